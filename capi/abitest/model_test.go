package abitest

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refCase is one prompt of a *.ref.jsonl file (see the test data README):
// llama.cpp's tokens, per-position top logits and greedy continuation.
type refCase struct {
	Prompt       string  `json:"prompt"`
	Tokens       []int32 `json:"tokens"`
	PromptLogits []struct {
		LSE float64     `json:"lse"`
		Top [][]float64 `json:"top"`
	} `json:"prompt_logits"`
	Greedy       []int32 `json:"greedy"`
	GreedyText   string  `json:"greedy_text"`
	GreedyLogits []struct {
		LSE float64     `json:"lse"`
		Top [][]float64 `json:"top"`
	} `json:"greedy_logits"`
}

func readRefs(t testing.TB, rel string) []refCase {
	f, err := os.Open(shareddata.Path(t, rel))
	require.NoError(t, err)
	defer f.Close()
	var out []refCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c refCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		out = append(out, c)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// openModel opens a model of the shared test data, freed at cleanup.
func openModel(t testing.TB, l *Lib, rel string) uintptr {
	t.Helper()
	path := shareddata.Path(t, rel)
	var m uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := l.ModelOpen(path, nil, &m)
	if st == Unsupported && strings.Contains(l.LastError(), "engine is not built") {
		t.Skip("the library has no engine yet: " + l.LastError())
	}
	requireStatus(t, l, OK, st, "opening "+rel)
	require.NotZero(t, m)
	t.Cleanup(func() { l.ModelFree(m) })
	return m
}

func modelInfo(t testing.TB, l *Lib, m uintptr) ModelInfo {
	t.Helper()
	var info ModelInfo
	info.Size = unsafe.Sizeof(info)
	requireStatus(t, l, OK, l.ModelGetInfo(m, &info), "model_get_info")
	return info
}

func newSession(t testing.TB, l *Lib, m uintptr, nCtx int32, kv int32) uintptr {
	t.Helper()
	var p SessionParams
	l.SessionParamsDefault(&p)
	p.NCtx = nCtx
	p.KVType = kv
	var s uintptr
	requireStatus(t, l, OK, l.SessionNew(m, &p, &s), "session_new")
	t.Cleanup(func() { l.SessionFree(s) })
	return s
}

func greedySampler(t testing.TB, l *Lib) uintptr {
	t.Helper()
	var p SamplerParams
	l.SamplerParamsDefault(&p)
	p.Temperature = 0
	var s uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := l.SamplerNew(&p, &s)
	if st == Unsupported && strings.Contains(l.LastError(), "sampler is not built") {
		t.Skip("the library has no sampler yet: " + l.LastError())
	}
	requireStatus(t, l, OK, st, "sampler_new")
	t.Cleanup(func() { l.SamplerFree(s) })
	return s
}

func position(t testing.TB, l *Lib, s uintptr) uintptr {
	t.Helper()
	var pos uintptr
	requireStatus(t, l, OK, l.Position(s, &pos), "session_position")
	return pos
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func logSumExp(x []float32) float64 {
	m := float64(x[argmax(x)])
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}

const stories = "models/stories260K.gguf"

func TestModelInfoAndText(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	// Facts from the test data README: dim 64, 5 layers, 8 heads, 4 KV heads, vocabulary 512.
	assert.Equal(t, int32(512), info.NVocab)
	assert.Equal(t, int32(64), info.NEmbd)
	assert.Equal(t, int32(5), info.NLayer)
	assert.Equal(t, int32(8), info.NHead)
	assert.Equal(t, int32(4), info.NHeadKV)
	assert.Greater(t, info.NCtxTrain, int32(0))
	refs := readRefs(t, "reference/stories260K.ref.jsonl")
	assert.Equal(t, refs[0].Tokens[0], info.BOS, "BOS is the first token llama.cpp adds")
	require.GreaterOrEqual(t, info.EOS, int32(0))
	assert.Equal(t, int32(1), l.ModelIsEOG(m, info.EOS))
	assert.Equal(t, int32(0), l.ModelIsEOG(m, refs[0].Tokens[1]))
	assert.Equal(t, int32(0), l.ModelIsEOG(m, info.NVocab))
	assert.Contains(t, l.LastError(), "outside the vocabulary")

	// A caller with a newer, larger info struct gets the fields this library
	// knows; the rest stays as the caller set it.
	type newerInfo struct {
		ModelInfo
		Later [3]int64
	}
	ni := newerInfo{Later: [3]int64{-5, -6, -7}}
	ni.Size = unsafe.Sizeof(ni)
	requireStatus(t, l, OK, l.ModelGetInfo(m, &ni.ModelInfo), "get_info into a larger struct")
	assert.Equal(t, info.NVocab, ni.NVocab)
	assert.Equal(t, info.EOS, ni.EOS)
	assert.Equal(t, unsafe.Sizeof(ni), ni.Size, "size kept")
	assert.Equal(t, [3]int64{-5, -6, -7}, ni.Later, "unknown fields untouched")

	// The text protocol: size query, too small by the NUL, exact.
	var n uintptr
	requireStatus(t, l, BufferTooSmall, l.ModelArchitecture(m, nil, 0, &n), "architecture size query")
	require.Equal(t, uintptr(len("llama")), n)
	buf := []byte("xxxxxxxxxx")
	requireStatus(t, l, BufferTooSmall, l.ModelArchitecture(m, &buf[0], n, &n), "architecture without room for NUL")
	assert.Equal(t, "xxxxxxxxxx", string(buf), "buffer untouched on BUFFER_TOO_SMALL")
	requireStatus(t, l, OK, l.ModelArchitecture(m, &buf[0], n+1, &n), "architecture")
	assert.Equal(t, "llama\x00", string(buf[:n+1]))
	requireStatus(t, l, InvalidArg, l.ModelArchitecture(m, nil, 8, &n), "NULL buffer with cap")

	requireStatus(t, l, OK, l.ModelChatTemplate(m, &buf[0], uintptr(len(buf)), &n), "chat template")
	assert.Equal(t, uintptr(0), n, "stories260K has no template")
	msgs := []Message{{cstr("user"), cstr("hello")}}
	requireStatus(t, l, Unsupported, l.ChatApply(m, &msgs[0], 1, 1, &buf[0], uintptr(len(buf)), &n), "chat without template")
	bad := []Message{{nil, cstr("hello")}}
	requireStatus(t, l, InvalidArg, l.ChatApply(m, &bad[0], 1, 1, &buf[0], uintptr(len(buf)), &n), "chat with NULL role")
}

func TestOpenErrors(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories) // skips if the engine is absent
	dir := t.TempDir()
	var m uintptr = 99
	requireStatus(t, l, IOErr, l.ModelOpen(filepath.Join(dir, "missing.gguf"), nil, &m), "missing file")
	assert.Equal(t, uintptr(0), m)
	assert.Contains(t, l.LastError(), "missing.gguf")
	junk := filepath.Join(dir, "junk.gguf")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("not a gguf file ", 64)), 0o644))
	requireStatus(t, l, BadFile, l.ModelOpen(junk, nil, &m), "not a GGUF file")
	vocabOnly := shareddata.Path(t, "vocab/ggml-vocab-llama-spm.gguf")
	st := l.ModelOpen(vocabOnly, nil, &m)
	assert.Contains(t, []int32{BadFile, Unsupported}, st, "a vocabulary-only file has no weights: %s", l.LastError())
}

func TestTokenizeProtocol(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	ref := readRefs(t, "reference/stories260K.ref.jsonl")[0]
	text := ref.Prompt + "TRAILING BYTES NOT PASSED"
	want := ref.Tokens

	var n uintptr
	requireStatus(t, l, BufferTooSmall, l.Tokenize(m, cstr(text), uintptr(len(ref.Prompt)), 1, nil, 0, &n), "size query")
	require.Equal(t, uintptr(len(want)), n)
	out := make([]int32, len(want)+2)
	for i := range out {
		out[i] = -7
	}
	requireStatus(t, l, BufferTooSmall, l.Tokenize(m, cstr(text), uintptr(len(ref.Prompt)), 1, &out[0], n-1, &n), "one short")
	assert.Equal(t, int32(-7), out[0], "out untouched on BUFFER_TOO_SMALL")
	requireStatus(t, l, OK, l.Tokenize(m, cstr(text), uintptr(len(ref.Prompt)), 1, &out[0], uintptr(len(out)), &n), "tokenize")
	assert.Equal(t, want, out[:n], "llama.cpp's tokens for %q", ref.Prompt)
	assert.Equal(t, int32(-7), out[n], "nothing written past n_out")

	requireStatus(t, l, OK, l.Tokenize(m, cstr(ref.Prompt), uintptr(len(ref.Prompt)), 0, &out[0], uintptr(len(out)), &n), "without BOS")
	assert.Equal(t, want[1:], out[:n])
	requireStatus(t, l, InvalidArg, l.Tokenize(m, cstr("x"), 1, 8, &out[0], uintptr(len(out)), &n), "unknown flag")
	requireStatus(t, l, InvalidArg, l.Tokenize(m, nil, 3, 0, &out[0], uintptr(len(out)), &n), "NULL text with length")
	requireStatus(t, l, OK, l.Tokenize(m, cstr(ref.Prompt), uintptr(len(ref.Prompt)), 1, &out[0], ^uintptr(0), &n), "cap SIZE_MAX")
	assert.Equal(t, want, out[:n])
	requireStatus(t, l, OK, l.Tokenize(m, nil, 0, 0, nil, 0, &n), "empty text")
	assert.Equal(t, uintptr(0), n)

	// Back to text: the whole sequence and one piece at a time.
	buf := make([]byte, 256)
	requireStatus(t, l, OK, l.Detokenize(m, &want[0], uintptr(len(want)), &buf[0], uintptr(len(buf)), &n), "detokenize")
	assert.Equal(t, ref.Prompt, strings.TrimPrefix(string(buf[:n]), " "))
	var pieces strings.Builder
	for _, tok := range want[1:] {
		requireStatus(t, l, OK, l.TokenPiece(m, tok, &buf[0], uintptr(len(buf)), &n), "token_to_piece")
		pieces.Write(buf[:n])
	}
	assert.Equal(t, " "+ref.Prompt, pieces.String(), "SentencePiece pieces keep their word-initial spaces")
	requireStatus(t, l, BufferTooSmall, l.TokenPiece(m, want[1], &buf[0], 1, &n), "piece into 1 byte")
	requireStatus(t, l, OK, l.Detokenize(m, &want[0], uintptr(len(want)), &buf[0], ^uintptr(0), &n), "cap SIZE_MAX")
	requireStatus(t, l, InvalidArg, l.Detokenize(m, &want[0], ^uintptr(0), &buf[0], uintptr(len(buf)), &n), "n SIZE_MAX")
	requireStatus(t, l, InvalidArg, l.TokenPiece(m, 512, &buf[0], uintptr(len(buf)), &n), "piece of token out of range")
	bad := []int32{1, -3}
	requireStatus(t, l, InvalidArg, l.Detokenize(m, &bad[0], 2, &buf[0], uintptr(len(buf)), &n), "detokenize out of range")
}

// Logits through the ABI match llama.cpp's (F32 KV cache reference), and
// greedy decoding follows its continuation up to the first near-tie.
func TestPrefillDecodeMatchesReference(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	for _, ref := range readRefs(t, "reference/stories260K.kvf32.ref.jsonl") {
		s := newSession(t, l, m, 0, 1)
		logits := make([]float32, info.NVocab)
		requireStatus(t, l, OK, l.Prefill(s, &ref.Tokens[0], uintptr(len(ref.Tokens)), &logits[0], uintptr(len(logits))), "prefill")
		require.Equal(t, uintptr(len(ref.Tokens)), position(t, l, s))
		checkTop := func(where string, lse float64, top [][]float64) bool {
			got := logSumExp(logits)
			for _, p := range top {
				tok := int(p[0])
				assert.InDelta(t, p[1]-lse, float64(logits[tok])-got, 0.02, "%q %s: log-prob of token %d", ref.Prompt, where, tok)
			}
			return top[0][1]-top[1][1] < 0.01
		}
		last := ref.PromptLogits[len(ref.PromptLogits)-1]
		nearTie := checkTop("last prompt position", last.LSE, last.Top)
		for i, want := range ref.Greedy {
			if nearTie {
				break
			}
			require.Equal(t, want, argmax(logits), "%q: greedy token %d", ref.Prompt, i)
			if i == len(ref.Greedy)-1 || l.ModelIsEOG(m, want) == 1 {
				break
			}
			requireStatus(t, l, OK, l.Decode(s, want, &logits[0], uintptr(len(logits))), "decode")
			g := ref.GreedyLogits[i]
			nearTie = checkTop("greedy step", g.LSE, g.Top)
		}
	}
}

func TestSessionErrors(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 8, 0)
	logits := make([]float32, info.NVocab)
	toks := []int32{info.BOS, 403, 407, 261, 378}

	requireStatus(t, l, BufferTooSmall, l.Prefill(s, &toks[0], 5, &logits[0], uintptr(info.NVocab-1)), "short logits buffer")
	assert.Equal(t, uintptr(0), position(t, l, s), "nothing evaluated")
	requireStatus(t, l, InvalidArg, l.Prefill(s, &toks[0], 0, nil, 0), "no tokens")
	bad := []int32{info.BOS, info.NVocab}
	requireStatus(t, l, InvalidArg, l.Prefill(s, &bad[0], 2, nil, 0), "token out of range")
	assert.Equal(t, uintptr(0), position(t, l, s))

	requireStatus(t, l, InvalidArg, l.Prefill(s, &toks[0], ^uintptr(0), nil, 0), "n = SIZE_MAX (a -1 cast)")
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], 5, nil, 0), "prefill without logits")
	requireStatus(t, l, ContextFull, l.Prefill(s, &toks[0], 4, &logits[0], uintptr(len(logits))), "5 + 4 > 8")
	assert.Contains(t, l.LastError(), "context")
	assert.Equal(t, uintptr(5), position(t, l, s), "position unchanged by the failed call")
	requireStatus(t, l, OK, l.Prefill(s, &toks[1], 3, &logits[0], ^uintptr(0)), "5 + 3 fits (and a cap of SIZE_MAX is plenty)")
	requireStatus(t, l, ContextFull, l.Decode(s, toks[1], nil, 0), "full")

	// Rewind and replay give the same logits.
	first := append([]float32(nil), logits...)
	requireStatus(t, l, InvalidArg, l.Rewind(s, 9), "rewind beyond the position")
	requireStatus(t, l, OK, l.Rewind(s, 5), "rewind")
	assert.Equal(t, uintptr(5), position(t, l, s))
	requireStatus(t, l, OK, l.Prefill(s, &toks[1], 3, &logits[0], uintptr(len(logits))), "replay")
	assert.Equal(t, first, logits)
	requireStatus(t, l, InvalidArg, l.Position(s, nil), "position into NULL")

	var p SessionParams
	l.SessionParamsDefault(&p)
	p.KVType = 7
	var s2 uintptr
	requireStatus(t, l, InvalidArg, l.SessionNew(m, &p, &s2), "unknown KV type")
	p.KVType = 0
	p.NCtx = -1
	requireStatus(t, l, InvalidArg, l.SessionNew(m, &p, &s2), "negative n_ctx")
}

func TestSampler(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	logits := []float32{0.1, 3, 2.9, -1, 0.5, 2.95}
	g := greedySampler(t, l)
	var tok int32
	requireStatus(t, l, OK, l.Sample(g, &logits[0], uintptr(len(logits)), &tok), "greedy sample")
	assert.Equal(t, int32(1), tok)
	requireStatus(t, l, InvalidArg, l.Sample(g, nil, 6, &tok), "NULL logits")
	requireStatus(t, l, InvalidArg, l.Sample(g, &logits[0], 6, nil), "NULL token")

	// Equal seeds give equal draws; the draws spread over the top tokens.
	draw := func(seed uint64) []int32 {
		var p SamplerParams
		l.SamplerParamsDefault(&p)
		p.Temperature = 1.5
		p.TopK = 0
		p.TopP = 1
		p.MinP = 0
		p.Seed = seed
		var s uintptr
		requireStatus(t, l, OK, l.SamplerNew(&p, &s), "sampler_new")
		defer l.SamplerFree(s)
		var out []int32
		for i := 0; i < 64; i++ {
			requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
			out = append(out, tok)
		}
		return out
	}
	a, b, c := draw(1), draw(1), draw(2)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	distinct := map[int32]bool{}
	for _, v := range a {
		distinct[v] = true
	}
	assert.Greater(t, len(distinct), 1)

	// A repeat penalty steers greedy away from an accepted token.
	var p SamplerParams
	l.SamplerParamsDefault(&p)
	p.Temperature = 0
	p.RepeatPenalty = 2
	var s uintptr
	requireStatus(t, l, OK, l.SamplerNew(&p, &s), "sampler_new")
	defer l.SamplerFree(s)
	requireStatus(t, l, OK, l.SamplerAccept(s, 1), "accept")
	requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
	assert.Equal(t, int32(5), tok, "token 1 penalised to 1.5")
	requireStatus(t, l, OK, l.SamplerReset(s), "reset")
	requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
	assert.Equal(t, int32(1), tok, "history forgotten")
	requireStatus(t, l, InvalidArg, l.SamplerAccept(s, -1), "negative token")

	p.Temperature = float32(math.NaN())
	requireStatus(t, l, InvalidArg, l.SamplerNew(&p, &s), "NaN temperature")
	p.Temperature = 1
	p.PenaltyLastN = -2
	requireStatus(t, l, InvalidArg, l.SamplerNew(&p, &s), "negative penalty window")
}

// Handles of one kind are refused by functions of another; double frees
// are harmless.
func TestHandleKindsAndDoubleFree(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	s := newSession(t, l, m, 16, 0)
	g := greedySampler(t, l)
	var n uintptr
	requireStatus(t, l, InvalidArg, l.Position(m, &n), "model as session")
	assert.Contains(t, l.LastError(), "is a model, not a session")
	requireStatus(t, l, InvalidArg, l.SamplerReset(s), "session as sampler")
	assert.Contains(t, l.LastError(), "is a session, not a sampler")
	var info ModelInfo
	info.Size = unsafe.Sizeof(info)
	requireStatus(t, l, InvalidArg, l.ModelGetInfo(g, &info), "sampler as model")
	requireStatus(t, l, InvalidArg, l.ModelFree(s), "model_free of a session")
	requireStatus(t, l, OK, position2(l, s), "the session survived the wrong free")

	m2 := openModel(t, l, stories)
	requireStatus(t, l, OK, l.ModelFree(m2), "free")
	requireStatus(t, l, InvalidArg, l.ModelFree(m2), "double free")
	assert.Contains(t, l.LastError(), "not live")
	requireStatus(t, l, InvalidArg, l.ModelGetInfo(m2, &info), "use after free")
	requireStatus(t, l, OK, l.SamplerFree(g), "free sampler")
	requireStatus(t, l, InvalidArg, l.SamplerFree(g), "double free sampler")
	requireStatus(t, l, OK, l.SessionFree(s), "free session")
	requireStatus(t, l, InvalidArg, l.SessionFree(s), "double free session")
	requireStatus(t, l, InvalidArg, l.Decode(s, 1, nil, 0), "decode after free")
}

func position2(l *Lib, s uintptr) int32 {
	var pos uintptr
	return l.Position(s, &pos)
}

// Freeing the model handle leaves its sessions working; the model is
// released with the last of them.
func TestModelFreeWithLiveSession(t *testing.T) {
	l := lib(t)
	path := shareddata.Path(t, stories)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	var s uintptr
	requireStatus(t, l, OK, l.SessionNew(m, nil, &s), "session_new")
	requireStatus(t, l, OK, l.ModelFree(m), "free the model under a live session")
	requireStatus(t, l, InvalidArg, l.ModelFree(m), "the model handle is gone")
	var s2 uintptr
	requireStatus(t, l, InvalidArg, l.SessionNew(m, nil, &s2), "no new sessions from a freed handle")

	// The session still computes the same logits as a fresh model's session.
	toks := []int32{info.BOS, 403, 407}
	got := make([]float32, info.NVocab)
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], 3, &got[0], uintptr(len(got))), "prefill on the orphaned session")
	var m2 uintptr
	requireStatus(t, l, OK, l.ModelOpen(path, nil, &m2), "open")
	defer l.ModelFree(m2)
	s3 := newSession(t, l, m2, 0, 0)
	want := make([]float32, info.NVocab)
	requireStatus(t, l, OK, l.Prefill(s3, &toks[0], 3, &want[0], uintptr(len(want))), "prefill")
	assert.Equal(t, want, got)
	requireStatus(t, l, OK, l.SessionFree(s), "free the last session")
}

// generate's callback, greedy output against the published golden text.
type genRecorder struct {
	mu     sync.Mutex
	text   strings.Builder
	tokens []int32
	stopAt int                  // return nonzero after this many tokens (0: never)
	hook   func(tok int32) bool // optional, true to stop
}

var (
	recorders   sync.Map // user_data value -> *genRecorder
	recorderSeq uintptr
	recorderMu  sync.Mutex
)

func register(r *genRecorder) uintptr {
	recorderMu.Lock()
	recorderSeq++
	id := recorderSeq
	recorderMu.Unlock()
	recorders.Store(id, r)
	return id
}

var (
	pieceCallbackOnce sync.Once
	pieceCallback     uintptr
)

func callback() uintptr {
	pieceCallbackOnce.Do(func() { pieceCallback = newPieceCallback() })
	return pieceCallback
}

func TestGenerateGolden(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	want := strings.TrimSuffix(string(golden), "\n")

	s := newSession(t, l, m, 0, 0)
	g := greedySampler(t, l)
	rec := &genRecorder{}
	prompt := []int32{info.BOS}
	var n uintptr
	requireStatus(t, l, OK, l.Generate(s, g, &prompt[0], 1, 300, callback(), register(rec), &n), "generate")
	assert.Equal(t, uintptr(len(rec.tokens)), n)
	assert.Equal(t, 1+n, position(t, l, s), "the session holds the prompt and every generated token")
	got := strings.TrimPrefix(rec.text.String(), " ")
	require.GreaterOrEqual(t, len(got), len(want), "generated %q", got)
	assert.Equal(t, want, got[:len(want)])

	// The same through the explicit loop gives the same tokens.
	s2 := newSession(t, l, m, 0, 0)
	logits := make([]float32, info.NVocab)
	requireStatus(t, l, OK, l.Prefill(s2, &prompt[0], 1, &logits[0], uintptr(len(logits))), "prefill")
	for i, tok := range rec.tokens[:32] {
		require.Equal(t, tok, argmax(logits), "token %d", i)
		requireStatus(t, l, OK, l.Decode(s2, tok, &logits[0], uintptr(len(logits))), "decode")
	}

	// A callback can stop generation.
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
	rec2 := &genRecorder{stopAt: 5}
	requireStatus(t, l, OK, l.Generate(s, g, &prompt[0], 1, 200, callback(), register(rec2), &n), "generate with stop")
	assert.Equal(t, uintptr(5), n)
	assert.Equal(t, rec.tokens[:5], rec2.tokens)
	assert.Equal(t, uintptr(6), position(t, l, s), "the stopping token was evaluated too")
	// Continuing with just the next token picks up the same greedy text.
	rec3 := &genRecorder{}
	next := []int32{rec.tokens[5]}
	requireStatus(t, l, OK, l.Generate(s, g, &next[0], 1, 4, callback(), register(rec3), &n), "continue")
	assert.Equal(t, rec.tokens[6:10], rec3.tokens)
	assert.Equal(t, uintptr(11), position(t, l, s))
	requireStatus(t, l, InvalidArg, l.Generate(s, g, nil, 0, 10, 0, 0, &n), "empty prompt")

	// The context fills.
	s3 := newSession(t, l, m, 8, 0)
	requireStatus(t, l, ContextFull, l.Generate(s3, g, &prompt[0], 1, 100, 0, 0, &n), "generate into a context of 8")
	assert.Equal(t, uintptr(7), n)
}

// generate releases text only at character boundaries yet loses nothing:
// on the random Llama-vocabulary model (byte tokens, multi-byte pieces) the
// callback's text is exactly the tokens' pieces joined, and never ends
// inside a character. Seeds are tried until one generation has split a
// character across tokens, so the holding back is exercised.
func TestGenerateUTF8Boundaries(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, "models/tiny-random-llama.gguf")
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 0, 0)
	buf := make([]byte, 256)
	split := false
	for seed := uint64(1); seed <= 40 && !split; seed++ {
		var p SamplerParams
		l.SamplerParamsDefault(&p)
		p.Temperature = 1.5
		p.TopK = 0
		p.TopP = 1
		p.MinP = 0
		p.Seed = seed
		var smp uintptr
		requireStatus(t, l, OK, l.SamplerNew(&p, &smp), "sampler")
		var lens []int // callback text length after each call
		rec := &genRecorder{}
		rec.hook = func(int32) bool {
			lens = append(lens, rec.text.Len())
			return false
		}
		requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
		prompt := []int32{info.BOS}
		var n uintptr
		requireStatus(t, l, OK, l.Generate(s, smp, &prompt[0], 1, 64, callback(), register(rec), &n), "generate")
		l.SamplerFree(smp)
		require.NotZero(t, n)

		var want []byte
		text := rec.text.String()
		for i, tok := range rec.tokens {
			if tok < 0 {
				require.Equal(t, len(rec.tokens)-1, i, "token -1 only in the final flush")
				continue
			}
			var k uintptr
			requireStatus(t, l, OK, l.TokenPiece(m, tok, &buf[0], uintptr(len(buf)), &k), "piece")
			want = append(want, buf[:k]...)
			if lens[i] < len(want) {
				split = true // part of this token's bytes were held back
			}
			if utf8.Valid(want) {
				assert.Equal(t, len(want), lens[i], "seed %d token %d: complete text is released at once", seed, i)
			}
			assert.True(t, utf8.Valid([]byte(text[:lens[i]])) || !utf8.Valid([]byte(text)), "seed %d: text after token %d ends inside a character", seed, i)
		}
		assert.Equal(t, string(want), text, "seed %d", seed)
	}
	assert.True(t, split, "no seed in 1..40 split a character across tokens; the test no longer exercises holding back")
}
