package abitest

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moonlm_numerics values.
const (
	NumericsDefault int32 = iota
	NumericsLlamaCpp
	NumericsLlamaCppNoRepack
	NumericsIk
)

// The numerics member of moonlm_model_params: its default, validation, and
// a caller built before it existed.
func TestModelParamsNumerics(t *testing.T) {
	l := lib(t)
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var def ModelParams
	def.Numerics = 7 // overwritten
	l.ModelParamsDefault(&def)
	assert.Equal(t, NumericsDefault, def.Numerics, "MOONLM_NUMERICS_DEFAULT")

	var out uintptr
	for _, v := range []int32{-1, 4, math.MaxInt32, math.MinInt32} {
		p := def
		p.Numerics = v
		out = 99
		requireStatus(t, l, InvalidArg, l.ModelOpen(missing, &p, &out), "numerics out of range")
		msg := l.LastError()
		assert.Contains(t, msg, "moonlm_model_params.numerics is", "numerics %d", v)
		assert.Contains(t, msg, "0 default, 1 llamacpp, 2 llamacpp-norepack, 3 ik", "the message lists the accepted values")
		assert.Zero(t, out, "numerics %d: *out cleared", v)
	}
	for v := NumericsDefault; v <= NumericsIk; v++ {
		p := def
		p.Numerics = v
		requireStatus(t, l, IOErr, l.ModelOpen(missing, &p, &out), "a valid numerics gets past validation to the (missing) file")
	}

	// A caller built before numerics passes the size that ends before it;
	// the library must not read the member (garbage that would be
	// rejected if it were read).
	old := def
	old.Size = modelParamsV2Size
	old.Numerics = 99
	requireStatus(t, l, IOErr, l.ModelOpen(missing, &old, &out), "pre-numerics size")
	model := shareddata.Path(t, stories)
	requireStatus(t, l, OK, l.ModelOpen(model, &old, &out), "pre-numerics size, real model")
	require.NotZero(t, out)
	assert.Equal(t, OK, l.ModelFree(out))
}

func init() {
	children["numericsenv"] = func() error {
		l, err := childLib()
		if err != nil {
			return err
		}
		path := os.Getenv("MOONLM_ABITEST_MODEL")
		var p ModelParams
		l.ModelParamsDefault(&p)
		var m uintptr
		if st := l.ModelOpen(path, &p, &m); st != InvalidArg || m != 0 {
			return errorf("MOONLM_NUMERICS=%q, default numerics: status %d (%s), want MOONLM_INVALID_ARGUMENT; %s",
				os.Getenv("MOONLM_NUMERICS"), st, l.StatusString(st), l.LastError())
		}
		if msg := l.LastError(); !strings.Contains(msg, "MOONLM_NUMERICS") {
			return errorf("message %q does not name MOONLM_NUMERICS", msg)
		}
		// An explicit mode does not consult the variable.
		p.Numerics = NumericsLlamaCpp
		if st := l.ModelOpen(path, &p, &m); st != OK {
			return errorf("MOONLM_NUMERICS=%q, numerics llamacpp: %s", os.Getenv("MOONLM_NUMERICS"), l.LastError())
		}
		if st := l.ModelFree(m); st != OK {
			return errorf("model free: %s", l.LastError())
		}
		return nil
	}
}

// An invalid MOONLM_NUMERICS still fails the open under the default mode,
// and an explicit mode does not consult it. Runs in a child because the
// library reads the environment once, when it loads.
func TestNumericsEnvironment(t *testing.T) {
	lib(t)
	runInChild(t, "numericsenv", "MOONLM_NUMERICS=bogus", "MOONLM_ABITEST_MODEL="+shareddata.Path(t, stories))
}

const (
	ikModel = "synth/synth-qwen3-Q4_K_M.gguf"
	ikRefs  = "synth/synth-qwen3-Q4_K_M.ref.jsonl"
)

// openNumericsModel opens the shared test file rel with the given threads
// and numerics mode; the caller holds the OS thread and frees the model.
func openNumericsModel(t *testing.T, l *Lib, rel string, threads, numerics int32) uintptr {
	t.Helper()
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.NThreads = threads
	p.Numerics = numerics
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(shareddata.Path(t, rel), &p, &m), "opening "+rel)
	return m
}

// firstPositionLogits opens rel in the given numerics mode and returns the
// logits after the first token of toks.
func firstPositionLogits(t *testing.T, l *Lib, rel string, numerics int32, toks []int32) []float32 {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := openNumericsModel(t, l, rel, 2, numerics)
	defer func() { requireStatus(t, l, OK, l.ModelFree(m), "model_free") }()
	var sp SessionParams
	l.SessionParamsDefault(&sp)
	sp.NCtx = 64
	var s uintptr
	requireStatus(t, l, OK, l.SessionNew(m, &sp, &s), "session_new")
	defer func() { requireStatus(t, l, OK, l.SessionFree(s), "session_free") }()
	logits := make([]float32, modelInfo(t, l, m).NVocab)
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], 1, &logits[0], uintptr(len(logits))), "prefill")
	return logits
}

// worstTopDiff is the largest difference between the log-probabilities of
// logits and the reference's over the reference's top tokens.
func worstTopDiff(logits []float32, lse float64, top [][]float64) float64 {
	got := logSumExp(logits)
	worst := 0.0
	for _, p := range top {
		worst = max(worst, math.Abs((float64(logits[int(p[0])])-got)-(p[1]-lse)))
	}
	return worst
}

// MOONLM_NUMERICS_IK reaches the engine: the synthetic Q4_K_M model, whose
// reference ik_llama.cpp made, gives the reference's first prompt position
// exactly (the top 10 log-probabilities within 1e-4, room for the float64
// log-sum-exp only, as engine's TestSynthReferenceIk), while the default
// (fast) mode, with MOONLM_NUMERICS unset, quantizes activations its own way
// and is measurably off at the same position, so the comparison can tell
// the modes apart. MOONLM_NUMERICS_LLAMACPP opens and computes the same
// model (within the 0.5 the engine allows the fast mode on these files).
func TestNumericsIkMatchesReference(t *testing.T) {
	l := lib(t)
	if env := os.Getenv("MOONLM_NUMERICS"); env != "" {
		// The library took it in when it loaded; the default mode is not the fast one.
		t.Skipf("MOONLM_NUMERICS=%q is set: this test compares the default (fast) mode with ik", env)
	}
	refs := readRefs(t, ikRefs)
	ref := refs[0]
	require.NotEmpty(t, ref.Tokens)
	require.NotEmpty(t, ref.PromptLogits)
	want := ref.PromptLogits[0]
	require.GreaterOrEqual(t, len(want.Top), 10)
	top := want.Top[:10]

	ik := firstPositionLogits(t, l, ikModel, NumericsIk, ref.Tokens)
	ikDiff := worstTopDiff(ik, want.LSE, top)
	fast := firstPositionLogits(t, l, ikModel, NumericsDefault, ref.Tokens)
	fastDiff := worstTopDiff(fast, want.LSE, top)
	exact := firstPositionLogits(t, l, ikModel, NumericsLlamaCpp, ref.Tokens)
	exactDiff := worstTopDiff(exact, want.LSE, top)
	t.Logf("worst top-10 log-probability difference at the first position: ik %.6f, default %.6f, llamacpp %.6f", ikDiff, fastDiff, exactDiff)

	assert.LessOrEqual(t, ikDiff, 1e-4, "MOONLM_NUMERICS_IK against ik_llama.cpp's reference")
	assert.Greater(t, fastDiff, 1e-4, "the default mode should not match ik_llama.cpp exactly (else this test cannot tell the modes apart)")
	assert.LessOrEqual(t, fastDiff, 0.5, "the default mode computes the same model")
	assert.LessOrEqual(t, exactDiff, 0.5, "MOONLM_NUMERICS_LLAMACPP computes the same model")
	assert.NotEqual(t, ik, fast, "ik and default logits")
}

// MOONLM_NUMERICS_IK follows ik_llama.cpp's flash attention over an f16
// cache only: moonlm_session_new with MOONLM_KV_F32 is MOONLM_UNSUPPORTED
// naming the cache, and the same model takes an f16 session.
func TestNumericsIkRefusesF32Cache(t *testing.T) {
	l := lib(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := openNumericsModel(t, l, ikModel, 1, NumericsIk)
	defer func() { requireStatus(t, l, OK, l.ModelFree(m), "model_free") }()
	var sp SessionParams
	l.SessionParamsDefault(&sp)
	sp.NCtx = 64
	sp.KVType = 1 // MOONLM_KV_F32
	var s uintptr
	requireStatus(t, l, Unsupported, l.SessionNew(m, &sp, &s), "ik with an f32 KV cache")
	assert.Contains(t, l.LastError(), "f32 KV cache")
	assert.Zero(t, s)
	sp.KVType = 0
	requireStatus(t, l, OK, l.SessionNew(m, &sp, &s), "ik with an f16 KV cache")
	requireStatus(t, l, OK, l.SessionFree(s), "session_free")
}
