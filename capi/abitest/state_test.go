package abitest

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SessionStats mirrors moonlm_session_stats.
type SessionStats struct {
	Size                            uintptr
	NPos, NCtx, NEvaluated, NReused uint64
}

// stateLib holds the session-state functions (a section of its own in
// moonlm.h), loaded from the same library as Lib.
type stateLib struct {
	PrefillReuse func(s uintptr, toks *int32, n uintptr, logits *float32, cap uintptr, nEval *uintptr) int32
	Stats        func(s uintptr, st *SessionStats) int32
	Tokens       func(s uintptr, toks *int32, cap uintptr, nOut *uintptr) int32
	Fork         func(s uintptr, out *uintptr) int32
	StateSize    func(s uintptr, size *uintptr) int32
	StateSave    func(s uintptr, buf *byte, cap uintptr, nOut *uintptr) int32
	StateLoad    func(s uintptr, buf *byte, n uintptr) int32
	SaveFile     func(s uintptr, path *byte) int32
	LoadFile     func(s uintptr, path *byte) int32
}

var (
	stateOnce sync.Once
	theState  *stateLib
	stateErr  error
)

func stateFuncs(t testing.TB) (*Lib, *stateLib) {
	t.Helper()
	l := lib(t)
	stateOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			stateErr = err
			return
		}
		s := &stateLib{}
		reg := func(fptr any, name string) { purego.RegisterLibFunc(fptr, h, name) }
		reg(&s.PrefillReuse, "moonlm_prefill_reuse")
		reg(&s.Stats, "moonlm_session_stats_get")
		reg(&s.Tokens, "moonlm_session_tokens")
		reg(&s.Fork, "moonlm_session_fork")
		reg(&s.StateSize, "moonlm_session_state_size")
		reg(&s.StateSave, "moonlm_session_state_save")
		reg(&s.StateLoad, "moonlm_session_state_load")
		reg(&s.SaveFile, "moonlm_session_state_save_file")
		reg(&s.LoadFile, "moonlm_session_state_load_file")
		theState = s
	})
	require.NoError(t, stateErr)
	return l, theState
}

func tokenizeText(t testing.TB, l *Lib, m uintptr, text string) []int32 {
	t.Helper()
	out := make([]int32, 4*len(text)+8)
	var n uintptr
	b := []byte(text)
	requireStatus(t, l, OK, l.Tokenize(m, &b[0], uintptr(len(b)), 1, &out[0], uintptr(len(out)), &n), "tokenize")
	return out[:n]
}

func sessionStats(t testing.TB, l *Lib, sl *stateLib, s uintptr) SessionStats {
	t.Helper()
	st := SessionStats{Size: unsafe.Sizeof(SessionStats{})}
	requireStatus(t, l, OK, sl.Stats(s, &st), "session_stats_get")
	return st
}

// greedySteps decodes n greedy tokens from logits, returning every step's
// logits concatenated.
func greedySteps(t testing.TB, l *Lib, s uintptr, logits []float32, n int) []float32 {
	t.Helper()
	cur := append([]float32(nil), logits...)
	var all []float32
	for range n {
		requireStatus(t, l, OK, l.Decode(s, argmax(cur), &cur[0], uintptr(len(cur))), "decode")
		all = append(all, cur...)
	}
	return all
}

func requireSameBits(t testing.TB, what string, got, want []float32) {
	t.Helper()
	require.Equal(t, len(want), len(got), what)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: logit %d is %v, want %v (bit for bit)", what, i, got[i], want[i])
		}
	}
}

const storiesText = "Once upon a time, there was a little dog named Max. He liked to run and play in the park with his friends"

func TestSessionStateLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu\n", sizeof(moonlm_session_stats), offsetof(moonlm_session_stats, n_pos),
	       offsetof(moonlm_session_stats, n_ctx), offsetof(moonlm_session_stats, n_evaluated),
	       offsetof(moonlm_session_stats, n_reused));
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var s SessionStats
	assert.Equal(t, fmt.Sprintf("%d %d %d %d %d\n", unsafe.Sizeof(s), unsafe.Offsetof(s.NPos), unsafe.Offsetof(s.NCtx),
		unsafe.Offsetof(s.NEvaluated), unsafe.Offsetof(s.NReused)), string(out))
}

func TestPrefillReuseCountsEvaluatedTokens(t *testing.T) {
	l, sl := stateFuncs(t)
	m := openModel(t, l, stories)
	vocab := int(modelInfo(t, l, m).NVocab)
	toks := tokenizeText(t, l, m, storiesText)
	require.Greater(t, len(toks), 12)
	s := newSession(t, l, m, 256, 0)
	logits := make([]float32, vocab)
	var n uintptr
	requireStatus(t, l, OK, sl.PrefillReuse(s, &toks[0], 10, &logits[0], uintptr(vocab), &n), "first turn")
	assert.EqualValues(t, 10, n)
	requireStatus(t, l, OK, sl.PrefillReuse(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab), &n), "second turn")
	assert.EqualValues(t, len(toks)-10, n, "only the new tokens are evaluated")

	ref := newSession(t, l, m, 256, 0)
	want := make([]float32, vocab)
	requireStatus(t, l, OK, l.Prefill(ref, &toks[0], uintptr(len(toks)), &want[0], uintptr(vocab)), "reference prefill")
	requireSameBits(t, "reused prefix", logits, want)

	st := sessionStats(t, l, sl, s)
	assert.Equal(t, SessionStats{Size: st.Size, NPos: uint64(len(toks)), NCtx: 256, NEvaluated: uint64(len(toks)), NReused: 10}, st)

	// All held: the last token is evaluated again for its logits; without
	// logits nothing is.
	requireStatus(t, l, OK, sl.PrefillReuse(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab), &n), "same again")
	assert.EqualValues(t, 1, n)
	requireSameBits(t, "same again", logits, want)
	requireStatus(t, l, OK, sl.PrefillReuse(s, &toks[0], uintptr(len(toks)), nil, 0, &n), "no logits")
	assert.EqualValues(t, 0, n)

	// The history, with the size protocol.
	var held uintptr
	requireStatus(t, l, BufferTooSmall, sl.Tokens(s, nil, 0, &held), "tokens, size only")
	assert.EqualValues(t, len(toks), held)
	got := make([]int32, held)
	requireStatus(t, l, OK, sl.Tokens(s, &got[0], held, &held), "tokens")
	assert.Equal(t, toks, got)

	// Refusals change nothing.
	bad := []int32{toks[0], int32(vocab)}
	requireStatus(t, l, InvalidArg, sl.PrefillReuse(s, &toks[0], 0, nil, 0, &n), "n = 0")
	requireStatus(t, l, InvalidArg, sl.PrefillReuse(s, &bad[0], 2, nil, 0, &n), "token outside the vocabulary")
	requireStatus(t, l, BufferTooSmall, sl.PrefillReuse(s, &toks[0], 3, &logits[0], 3, &n), "short logits")
	long := make([]int32, 257)
	requireStatus(t, l, ContextFull, sl.PrefillReuse(s, &long[0], 257, nil, 0, &n), "longer than the context")
	assert.EqualValues(t, len(toks), position(t, l, s))
	requireStatus(t, l, InvalidArg, sl.PrefillReuse(0, &toks[0], 1, nil, 0, &n), "NULL session")
	short := SessionStats{Size: 8}
	requireStatus(t, l, InvalidArg, sl.Stats(s, &short), "stats size too small")
	requireStatus(t, l, InvalidArg, sl.Stats(s, nil), "NULL stats")
}

func TestSessionForkContinuesBitForBit(t *testing.T) {
	l, sl := stateFuncs(t)
	m := openModel(t, l, stories)
	vocab := int(modelInfo(t, l, m).NVocab)
	toks := tokenizeText(t, l, m, storiesText)
	for _, kv := range []int32{0, 1} {
		ref := newSession(t, l, m, 128, kv)
		logits := make([]float32, vocab)
		requireStatus(t, l, OK, l.Prefill(ref, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab)), "prefill")
		want := greedySteps(t, l, ref, logits, 8)

		a := newSession(t, l, m, 128, kv)
		requireStatus(t, l, OK, l.Prefill(a, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab)), "prefill")
		var b uintptr
		requireStatus(t, l, OK, sl.Fork(a, &b), "fork")
		t.Cleanup(func() { l.SessionFree(b) })
		st := sessionStats(t, l, sl, b)
		assert.EqualValues(t, len(toks), st.NPos)
		assert.EqualValues(t, 128, st.NCtx)
		assert.Zero(t, st.NEvaluated, "a fork recomputes nothing")
		// The original goes elsewhere and is freed; the fork is unaffected.
		other := make([]float32, vocab)
		requireStatus(t, l, OK, l.Decode(a, 5, &other[0], uintptr(vocab)), "original decodes")
		requireStatus(t, l, OK, l.SessionFree(a), "free original")
		requireSameBits(t, "fork", greedySteps(t, l, b, logits, 8), want)
	}
	var out uintptr = 1
	requireStatus(t, l, InvalidArg, sl.Fork(0, &out), "fork of NULL")
	assert.Zero(t, out, "*out is NULL on failure")
	s := newSession(t, l, m, 16, 0)
	requireStatus(t, l, InvalidArg, sl.Fork(s, nil), "out NULL")
}

// saveState returns the session's state with the size protocol.
func saveState(t testing.TB, l *Lib, sl *stateLib, s uintptr) []byte {
	t.Helper()
	var size, n uintptr
	requireStatus(t, l, OK, sl.StateSize(s, &size), "state_size")
	requireStatus(t, l, BufferTooSmall, sl.StateSave(s, nil, 0, &n), "state_save, size only")
	require.Equal(t, size, n)
	buf := make([]byte, size)
	requireStatus(t, l, BufferTooSmall, sl.StateSave(s, &buf[0], size-1, &n), "state_save, one byte short")
	requireStatus(t, l, OK, sl.StateSave(s, &buf[0], size, &n), "state_save")
	require.Equal(t, size, n)
	return buf
}

func TestSessionStateSaveLoad(t *testing.T) {
	l, sl := stateFuncs(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := openModel(t, l, stories)
	vocab := int(modelInfo(t, l, m).NVocab)
	toks := tokenizeText(t, l, m, storiesText)
	s := newSession(t, l, m, 128, 0)
	logits := make([]float32, vocab)
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab)), "prefill")
	state := saveState(t, l, sl, s)
	file := filepath.Join(t.TempDir(), "state.bin")
	requireStatus(t, l, OK, sl.SaveFile(s, cstr(file)), "save_file")
	onDisk, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, state, onDisk)
	want := greedySteps(t, l, s, logits, 8)

	// A second open of the model file: nothing shared with the first.
	m2 := openModel(t, l, stories)
	for i, load := range []func(r uintptr) int32{
		func(r uintptr) int32 { return sl.StateLoad(r, &state[0], uintptr(len(state))) },
		func(r uintptr) int32 { return sl.LoadFile(r, cstr(file)) },
	} {
		r := newSession(t, l, m2, 100, 0)
		requireStatus(t, l, OK, load(r), fmt.Sprintf("load %d", i))
		assert.EqualValues(t, len(toks), position(t, l, r))
		requireSameBits(t, "restored", greedySteps(t, l, r, logits, 8), want)
	}

	// Refusals, each with a status, a message, and the session unchanged.
	r := newSession(t, l, m2, 128, 0)
	requireStatus(t, l, OK, l.Prefill(r, &toks[0], 3, nil, 0), "prefill 3")
	flip := append([]byte(nil), state...)
	flip[len(flip)/2] ^= 0x10
	newer := append([]byte(nil), state...)
	binary.LittleEndian.PutUint32(newer[8:], 99)
	cases := []struct {
		name string
		data []byte
		want int32
		msg  string
	}{
		{"truncated", state[:len(state)-1], BadFile, "truncated"},
		{"header only", state[:100], BadFile, "too short"},
		{"corrupted", flip, BadFile, "checksum"},
		{"not a state", []byte("GGUF" + strings.Repeat(" and more", 40)), BadFile, "not a moonlm saved state"},
		{"newer version (checksum wrong too)", newer, Unsupported, "version"},
	}
	for _, c := range cases {
		st := sl.StateLoad(r, &c.data[0], uintptr(len(c.data)))
		require.Equal(t, c.want, st, "%s: %s", c.name, l.LastError())
		assert.Contains(t, l.LastError(), "moonlm_session_state_load: ", c.name)
		assert.Contains(t, l.LastError(), c.msg, c.name)
		assert.EqualValues(t, 3, position(t, l, r), c.name)
	}
	requireStatus(t, l, BadFile, sl.StateLoad(r, nil, 0), "empty")
	requireStatus(t, l, InvalidArg, sl.StateLoad(r, nil, 10), "NULL with a size")

	f32 := newSession(t, l, m2, 128, 1)
	requireStatus(t, l, InvalidArg, sl.StateLoad(f32, &state[0], uintptr(len(state))), "f16 state into an f32 session")
	assert.Contains(t, l.LastError(), "KV cache")
	small := newSession(t, l, m2, int32(len(toks)-1), 0)
	requireStatus(t, l, ContextFull, sl.StateLoad(small, &state[0], uintptr(len(state))), "too many positions")

	other := openModel(t, l, "models/tiny-random-llama.gguf")
	o := newSession(t, l, other, 128, 0)
	requireStatus(t, l, InvalidArg, sl.StateLoad(o, &state[0], uintptr(len(state))), "another model")
	assert.Contains(t, l.LastError(), "another model")

	requireStatus(t, l, IOErr, sl.LoadFile(r, cstr(filepath.Join(t.TempDir(), "absent"))), "absent file")
	requireStatus(t, l, InvalidArg, sl.LoadFile(r, nil), "NULL path")
	requireStatus(t, l, InvalidArg, sl.SaveFile(r, cstr("")), "empty path")
	requireStatus(t, l, IOErr, sl.SaveFile(r, cstr(filepath.Join(t.TempDir(), "no", "dir", "x"))), "unwritable path")
	// The session keeps the message for other threads.
	buf := make([]byte, 512)
	var n uintptr
	requireStatus(t, l, OK, l.SessionErr(r, &buf[0], uintptr(len(buf)), &n), "session_last_error")
	assert.Contains(t, goString(buf, n), "moonlm_session_state_save_file")
	assert.EqualValues(t, 3, position(t, l, r))
}

// The child of TestSessionStateAcrossProcesses: it prefills, saves the
// state to a file, runs on uninterrupted and writes those logits.
func init() {
	children["state-save"] = func() error {
		l, err := childLib()
		if err != nil {
			return err
		}
		sl := &stateLib{}
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			return err
		}
		purego.RegisterLibFunc(&sl.SaveFile, h, "moonlm_session_state_save_file")
		var m, s uintptr
		if st := l.ModelOpen(os.Getenv("STATE_MODEL"), nil, &m); st != OK {
			return fmt.Errorf("open: %s", l.LastError())
		}
		var p SessionParams
		l.SessionParamsDefault(&p)
		p.NCtx = 128
		if st := l.SessionNew(m, &p, &s); st != OK {
			return fmt.Errorf("session: %s", l.LastError())
		}
		text := []byte(storiesText)
		toks := make([]int32, 256)
		var n uintptr
		if st := l.Tokenize(m, &text[0], uintptr(len(text)), 1, &toks[0], 256, &n); st != OK {
			return fmt.Errorf("tokenize: %s", l.LastError())
		}
		var info ModelInfo
		info.Size = unsafe.Sizeof(info)
		l.ModelGetInfo(m, &info)
		logits := make([]float32, info.NVocab)
		if st := l.Prefill(s, &toks[0], n, &logits[0], uintptr(len(logits))); st != OK {
			return fmt.Errorf("prefill: %s", l.LastError())
		}
		if st := sl.SaveFile(s, cstr(os.Getenv("STATE_FILE"))); st != OK {
			return fmt.Errorf("save: %s", l.LastError())
		}
		// The prefill's logits first: the parent continues from them.
		var out []byte
		for _, v := range logits {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
		cur := append([]float32(nil), logits...)
		for range 8 {
			if st := l.Decode(s, argmax(cur), &cur[0], uintptr(len(cur))); st != OK {
				return fmt.Errorf("decode: %s", l.LastError())
			}
			for _, v := range cur {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
			}
		}
		return os.WriteFile(os.Getenv("STATE_LOGITS"), out, 0o644)
	}
}

// A state saved in one process and loaded in another continues with the
// logits the first process computed, bit for bit.
func TestSessionStateAcrossProcesses(t *testing.T) {
	l, sl := stateFuncs(t)
	dir := t.TempDir()
	file, logitsFile := filepath.Join(dir, "state.bin"), filepath.Join(dir, "logits.bin")
	runInChild(t, "state-save", "STATE_MODEL="+shareddata.Path(t, stories), "STATE_FILE="+file, "STATE_LOGITS="+logitsFile)
	raw, err := os.ReadFile(logitsFile)
	require.NoError(t, err)
	want := make([]float32, len(raw)/4)
	for i := range want {
		want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}

	m := openModel(t, l, stories)
	vocab := int(modelInfo(t, l, m).NVocab)
	toks := tokenizeText(t, l, m, storiesText)
	s := newSession(t, l, m, 128, 0)
	requireStatus(t, l, OK, sl.LoadFile(s, cstr(file)), "load_file")
	held := make([]int32, 256)
	var n uintptr
	requireStatus(t, l, OK, sl.Tokens(s, &held[0], 256, &n), "tokens")
	require.Equal(t, toks, held[:n])
	require.Equal(t, 9*vocab, len(want))
	requireSameBits(t, "across processes", greedySteps(t, l, s, want[:vocab], 8), want[vocab:])
}

// A Q8_0 KV cache (MOONLM_KV_Q8_0) through the C API: it runs, forks and
// saves; a model whose head dimension is not a multiple of 32 refuses it.
func TestSessionKVQ8(t *testing.T) {
	l, sl := stateFuncs(t)
	const kvQ8 = 2
	var p SessionParams
	l.SessionParamsDefault(&p)
	p.NCtx, p.KVType = 64, kvQ8
	st := openModel(t, l, stories)
	var s uintptr
	requireStatus(t, l, Unsupported, l.SessionNew(st, &p, &s), "q8_0 cache, head dimension 8")
	assert.Zero(t, s)

	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(shareddata.Model(t, shareddata.SmolLM2), nil, &m), "open SmolLM2")
	t.Cleanup(func() { l.ModelFree(m) })
	vocab := int(modelInfo(t, l, m).NVocab)
	a := newSession(t, l, m, 64, kvQ8)
	toks := tokenizeText(t, l, m, "The three primary colors are")
	logits := make([]float32, vocab)
	requireStatus(t, l, OK, l.Prefill(a, &toks[0], uintptr(len(toks)), &logits[0], uintptr(vocab)), "prefill")
	state := saveState(t, l, sl, a)
	assert.EqualValues(t, 8, binary.LittleEndian.Uint32(state[92:]), "KV type q8_0 in the header")
	var b uintptr
	requireStatus(t, l, OK, sl.Fork(a, &b), "fork")
	t.Cleanup(func() { l.SessionFree(b) })
	r := newSession(t, l, m, 64, kvQ8)
	requireStatus(t, l, OK, sl.StateLoad(r, &state[0], uintptr(len(state))), "load")
	want := greedySteps(t, l, a, logits, 3)
	requireSameBits(t, "fork", greedySteps(t, l, b, logits, 3), want)
	requireSameBits(t, "restored", greedySteps(t, l, r, logits, 3), want)
	f16 := newSession(t, l, m, 64, 0)
	requireStatus(t, l, InvalidArg, sl.StateLoad(f16, &state[0], uintptr(len(state))), "q8_0 state into an f16 session")
}
