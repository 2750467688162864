package abitest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CheckpointInfo mirrors moonlm_checkpoint_info.
type CheckpointInfo struct {
	Size                   uintptr
	Every, MaxCount, NHeld int32
	Reserved               uint32
	BytesHeld              uint64
}

// checkpointLib holds the checkpoint functions (a section of their own in
// moonlm.h).
type checkpointLib struct {
	Info      func(s uintptr, info *CheckpointInfo) int32
	Positions func(s uintptr, buf *uintptr, cap uintptr, nOut *uintptr) int32
}

var (
	checkpointOnce sync.Once
	theCheckpoint  *checkpointLib
	checkpointErr  error
)

func checkpointFuncs(t testing.TB) (*Lib, *checkpointLib) {
	t.Helper()
	l := lib(t)
	checkpointOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			checkpointErr = err
			return
		}
		c := &checkpointLib{}
		purego.RegisterLibFunc(&c.Info, h, "moonlm_session_checkpoints")
		purego.RegisterLibFunc(&c.Positions, h, "moonlm_session_checkpoint_positions")
		theCheckpoint = c
	})
	require.NoError(t, checkpointErr)
	return l, theCheckpoint
}

// writeTinyHybrid writes a tiny Qwen3.5 (one gated DeltaNet layer, one
// attention layer; F32 weights from a fixed formula) with stories260K's
// tokenizer: a hybrid model whose session keeps checkpoints.
func writeTinyHybrid(t *testing.T) string {
	t.Helper()
	tok, err := gguf.Open(shareddata.Path(t, stories))
	require.NoError(t, err)
	defer tok.Close()
	w := gguf.NewWriter()
	set := func(k string, v any) { require.NoError(t, w.Set(k, v), "setting %s", k) }
	for _, k := range tok.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := tok.Lookup(k)
			set(k, v)
		}
	}
	const (
		dim, heads, hd, ff, vocab    = 64, 2, 32, 64, 512
		convK, state, kHeads, vHeads = 4, 16, 2, 2
		inner, qDim, kvDim, rot      = vHeads * state, heads * hd, hd, 8
		convDim                      = 2*kHeads*state + inner
	)
	set("general.architecture", "qwen35")
	set("general.name", "tiny-hybrid")
	for k, v := range map[string]uint32{
		"context_length": 256, "embedding_length": dim, "block_count": 2, "feed_forward_length": ff,
		"attention.head_count": heads, "attention.head_count_kv": 1, "attention.key_length": hd,
		"attention.value_length": hd, "rope.dimension_count": rot, "full_attention_interval": 2,
		"ssm.conv_kernel": convK, "ssm.state_size": state, "ssm.group_count": kHeads,
		"ssm.time_step_rank": vHeads, "ssm.inner_size": inner,
	} {
		set("qwen35."+k, v)
	}
	set("qwen35.attention.layer_norm_rms_epsilon", float32(1e-6))
	seed := 0
	add := func(name string, fill func(i int) float32, shape ...int64) {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		seed++
		data := make([]byte, 4*n)
		for i := range n {
			v := float32(0.08 * math.Sin(float64(i)*0.7+float64(seed)*1.3))
			if fill != nil {
				v = fill(int(i))
			}
			*(*uint32)(unsafe.Pointer(&data[4*i])) = math.Float32bits(v)
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, shape, data))
	}
	one := func(int) float32 { return 1 }
	add("token_embd.weight", nil, dim, vocab)
	for il := range 2 {
		p := fmt.Sprintf("blk.%d.", il)
		add(p+"attn_norm.weight", one, dim)
		if il == 1 {
			add(p+"attn_q.weight", nil, dim, 2*qDim)
			add(p+"attn_k.weight", nil, dim, kvDim)
			add(p+"attn_v.weight", nil, dim, kvDim)
			add(p+"attn_q_norm.weight", one, hd)
			add(p+"attn_k_norm.weight", one, hd)
			add(p+"attn_output.weight", nil, qDim, dim)
		} else {
			add(p+"attn_qkv.weight", nil, dim, convDim)
			add(p+"attn_gate.weight", nil, dim, inner)
			add(p+"ssm_beta.weight", nil, dim, vHeads)
			add(p+"ssm_alpha.weight", nil, dim, vHeads)
			add(p+"ssm_conv1d.weight", nil, convK, convDim)
			add(p+"ssm_dt.bias", func(int) float32 { return 0 }, vHeads)
			add(p+"ssm_a", func(int) float32 { return -0.5 }, vHeads)
			add(p+"ssm_norm.weight", one, state)
			add(p+"ssm_out.weight", nil, inner, dim)
		}
		add(p+"post_attention_norm.weight", one, dim)
		add(p+"ffn_gate.weight", nil, dim, ff)
		add(p+"ffn_up.weight", nil, dim, ff)
		add(p+"ffn_down.weight", nil, ff, dim)
	}
	add("output_norm.weight", one, dim)
	path := filepath.Join(t.TempDir(), "tiny-hybrid.gguf")
	out, err := os.Create(path)
	require.NoError(t, err)
	_, err = w.WriteTo(out)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return path
}

func checkpointInfo(t testing.TB, l *Lib, c *checkpointLib, s uintptr) CheckpointInfo {
	t.Helper()
	info := CheckpointInfo{Size: unsafe.Sizeof(CheckpointInfo{})}
	requireStatus(t, l, OK, c.Info(s, &info), "session_checkpoints")
	return info
}

func checkpointPositions(t testing.TB, l *Lib, c *checkpointLib, s uintptr) []uintptr {
	t.Helper()
	buf := make([]uintptr, 16)
	var n uintptr
	requireStatus(t, l, OK, c.Positions(s, &buf[0], uintptr(len(buf)), &n), "session_checkpoint_positions")
	require.LessOrEqual(t, n, uintptr(len(buf)))
	return buf[:n]
}

// TestCheckpointSettings: the checkpoint members of moonlm_session_params
// reach a hybrid model's session (moonlm_session_checkpoints and
// moonlm_session_checkpoint_positions report them), a rewind to a
// checkpoint evaluates nothing, a caller of the first struct size gets the
// defaults, and a model without recurrent layers has no checkpoints.
func TestCheckpointSettings(t *testing.T) {
	l, c := checkpointFuncs(t)
	_, sl := stateFuncs(t)
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(writeTinyHybrid(t), nil, &m), "opening the tiny hybrid model")
	t.Cleanup(func() { l.ModelFree(m) })
	vocab := modelInfo(t, l, m).NVocab
	logits := make([]float32, vocab)
	newSession := func(p SessionParams) uintptr {
		t.Helper()
		p.NCtx = 128
		var s uintptr
		requireStatus(t, l, OK, l.SessionNew(m, &p, &s), "session_new")
		t.Cleanup(func() { l.SessionFree(s) })
		return s
	}
	// Eight prompt tokens, then ten decoded.
	run := func(s uintptr) {
		t.Helper()
		prompt := []int32{1, 403, 407, 261, 378, 290, 330, 324}
		requireStatus(t, l, OK, l.Prefill(s, &prompt[0], uintptr(len(prompt)), &logits[0], uintptr(vocab)), "prefill")
		for range 10 {
			requireStatus(t, l, OK, l.Decode(s, argmax(logits), &logits[0], uintptr(vocab)), "decode")
		}
	}
	size := unsafe.Sizeof(SessionParams{})

	s := newSession(SessionParams{Size: size, CheckpointEvery: 4})
	run(s)
	info := checkpointInfo(t, l, c, s)
	assert.Equal(t, int32(4), info.Every)
	assert.GreaterOrEqual(t, info.MaxCount, int32(2))
	assert.Equal(t, int32(3), info.NHeld)
	assert.Positive(t, info.BytesHeld)
	assert.Equal(t, []uintptr{8, 12, 16}, checkpointPositions(t, l, c, s))
	// The (buf, cap, n_out) protocol.
	var n uintptr
	one := make([]uintptr, 1)
	requireStatus(t, l, BufferTooSmall, c.Positions(s, &one[0], 1, &n), "positions in a buffer of 1")
	assert.Equal(t, uintptr(3), n)
	requireStatus(t, l, BufferTooSmall, c.Positions(s, nil, 0, &n), "the size asked first")
	assert.Equal(t, uintptr(3), n)
	// A rewind to a checkpoint evaluates nothing; one past it replays.
	before := sessionStats(t, l, sl, s).NEvaluated
	requireStatus(t, l, OK, l.Rewind(s, 12), "rewind to a checkpoint")
	assert.Equal(t, before, sessionStats(t, l, sl, s).NEvaluated)
	requireStatus(t, l, OK, l.Rewind(s, 10), "rewind between checkpoints")
	assert.Equal(t, before+2, sessionStats(t, l, sl, s).NEvaluated)

	// The first published struct size: the defaults (every 32 positions).
	old := newSession(SessionParams{Size: unsafe.Offsetof(SessionParams{}.CheckpointEvery)})
	run(old)
	info = checkpointInfo(t, l, c, old)
	assert.Equal(t, int32(32), info.Every)
	assert.Equal(t, []uintptr{8}, checkpointPositions(t, l, c, old))

	// A negative budget: none at all.
	none := newSession(SessionParams{Size: size, CheckpointEvery: 1, CheckpointBytes: -1})
	run(none)
	assert.Equal(t, CheckpointInfo{Size: unsafe.Sizeof(CheckpointInfo{})}, checkpointInfo(t, l, c, none))

	// Refusals: the reserved member, a short info struct.
	var bad uintptr
	requireStatus(t, l, InvalidArg, l.SessionNew(m, &SessionParams{Size: size, Reserved: 1}, &bad), "reserved set")
	short := CheckpointInfo{Size: 8}
	requireStatus(t, l, InvalidArg, c.Info(s, &short), "a short info struct")

	// A model without recurrent layers.
	dense := openModel(t, l, stories)
	var ds uintptr
	requireStatus(t, l, OK, l.SessionNew(dense, &SessionParams{Size: size, NCtx: 64, CheckpointEvery: 4}, &ds), "dense session")
	defer l.SessionFree(ds)
	assert.Equal(t, CheckpointInfo{Size: unsafe.Sizeof(CheckpointInfo{})}, checkpointInfo(t, l, c, ds))
	assert.Empty(t, checkpointPositions(t, l, c, ds))
}
