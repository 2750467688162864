package abitest

import (
	"math"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	grammarOnce sync.Once
	grammarNew  func(m uintptr, text *byte, n uintptr, out *uintptr) int32
	grammarFree func(g uintptr) int32
)

func grammarFns(t testing.TB) *Lib {
	l := lib(t)
	grammarOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			panic(err)
		}
		purego.RegisterLibFunc(&grammarNew, h, "moonlm_grammar_new")
		purego.RegisterLibFunc(&grammarFree, h, "moonlm_grammar_free")
	})
	return l
}

// newGrammar calls moonlm_grammar_new on a locked thread.
func newGrammar(t testing.TB, l *Lib, m uintptr, src string) (uintptr, int32, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var g uintptr
	b := []byte(src)
	var p *byte
	if len(b) > 0 {
		p = &b[0]
	}
	st := grammarNew(m, p, uintptr(len(b)), &g)
	msg := l.LastError()
	if st == OK {
		t.Cleanup(func() { grammarFree(g) })
	}
	return g, st, msg
}

func hotSampler(t testing.TB, l *Lib, seed uint64) uintptr {
	p := defaultSamplerParams(l)
	p.Temperature, p.TopK, p.TopP, p.MinP, p.Seed = 1.5, 0, 1, 0, seed
	s, st, msg := newSamplerP(t, l, &p)
	require.Equal(t, OK, st, msg)
	return s
}

func TestGrammarErrors(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	_, st, msg := newGrammar(t, l, m, "root ::= \"a\"\nnum ::= [0-9\n")
	assert.Equal(t, InvalidArg, st)
	assert.Regexp(t, `moonlm_grammar_new: .*grammar: \d+:\d+: `, msg, "line:col of the error")
	_, st, msg = newGrammar(t, l, m, "root ::= \"a\"\nnum ::= ?")
	assert.Equal(t, InvalidArg, st)
	assert.Regexp(t, `grammar: 2:\d+: `, msg, "the error is on line 2")
	_, st, msg = newGrammar(t, l, m, `root ::= <[999999]>`)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "999999")
	_, st, _ = newGrammar(t, l, 0, `root ::= "a"`)
	assert.Equal(t, InvalidArg, st, "NULL model")
	g, st, msg := newGrammar(t, l, m, `root ::= "a"`)
	require.Equal(t, OK, st, msg)
	// Wrong kinds, double free, NULL.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, InvalidArg, l.SamplerFree(g), "a grammar freed as a sampler")
	assert.Contains(t, l.LastError(), "is a grammar")
	requireStatus(t, l, OK, grammarFree(0), "free NULL")
	var g2 uintptr
	b := []byte(`root ::= "b"`)
	requireStatus(t, l, OK, grammarNew(m, &b[0], uintptr(len(b)), &g2), "new")
	requireStatus(t, l, OK, grammarFree(g2), "free")
	requireStatus(t, l, InvalidArg, grammarFree(g2), "double free")
}

func generateWithGrammar(t *testing.T, l *Lib, s, smp, g uintptr, prompt []int32, maxTokens int32, lp []TokenLogprob) (GenerateResult, *genRecorder, int32, string) {
	rec := &genRecorder{}
	var p GenerateParams
	l.GenerateParamsInit(&p, unsafe.Sizeof(p))
	p.MaxTokens = maxTokens
	p.Callback, p.UserData = callback(), register(rec)
	p.Grammar = g
	if lp != nil {
		p.Logprobs, p.LogprobsCap, p.TopLogprobs = &lp[0], uintptr(len(lp)), 3
	}
	r := newResult()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := l.GenerateEx(s, smp, &prompt[0], uintptr(len(prompt)), &p, &r)
	return r, rec, st, l.LastError()
}

// A grammar that allows one string yields exactly it at temperature 1.5;
// its log-probabilities are those of the masked logits (one choice: 0).
func TestGrammarGenerate(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g, st, msg := newGrammar(t, l, m, `root ::= " Once upon a time, " [0-9] [0-9] " cats"`)
	require.Equal(t, OK, st, msg)
	re := regexp.MustCompile(`^ Once upon a time, [0-9]{2} cats$`)
	prompt := []int32{info.BOS}
	for seed := uint64(1); seed <= 4; seed++ {
		s := newSession(t, l, m, 128, 0)
		lp := make([]TokenLogprob, 64)
		r, rec, st, msg := generateWithGrammar(t, l, s, hotSampler(t, l, seed), g, prompt, 64, lp)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishEOG, r.FinishReason)
		assert.Regexp(t, re, rec.text.String())
		for i := uintptr(0); i < r.NGenerated; i++ {
			e := lp[i]
			require.GreaterOrEqual(t, e.NTop, int32(1))
			for _, alt := range e.Top[:e.NTop] {
				assert.False(t, math.IsInf(float64(alt.Logprob), -1), "only allowed tokens are alternatives")
			}
			if e.NTop == 1 {
				assert.InDelta(t, 0, float64(e.Logprob), 1e-6, "the only allowed token is certain")
			}
		}
	}
}

func TestGrammarOwnership(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	prompt := []int32{info.BOS}
	g, st, msg := newGrammar(t, l, m, `root ::= " Once" " upon"`)
	require.Equal(t, OK, st, msg)

	// A session of another model (another handle) is refused.
	m2 := openModel(t, l, stories)
	s2 := newSession(t, l, m2, 64, 0)
	_, _, st, msg = generateWithGrammar(t, l, s2, hotSampler(t, l, 1), g, prompt, 8, nil)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "another model")

	// Used by one generation at a time: a generation started from another's
	// callback with the same grammar gets BUSY.
	s := newSession(t, l, m, 64, 0)
	inner := newSession(t, l, m, 64, 0)
	innerSmp := hotSampler(t, l, 3)
	var innerSt int32 = -1
	var innerMsg string
	rec := &genRecorder{}
	rec.hook = func(int32) bool {
		if innerSt == -1 {
			_, _, innerSt, innerMsg = generateWithGrammar(t, l, inner, innerSmp, g, prompt, 8, nil)
		}
		return false
	}
	var p GenerateParams
	l.GenerateParamsInit(&p, unsafe.Sizeof(p))
	p.MaxTokens, p.Callback, p.UserData, p.Grammar = 8, callback(), register(rec), g
	r := newResult()
	runtime.LockOSThread()
	st = l.GenerateEx(s, hotSampler(t, l, 2), &prompt[0], 1, &p, &r)
	msg = l.LastError()
	runtime.UnlockOSThread()
	require.Equal(t, OK, st, msg)
	assert.Equal(t, Busy, innerSt, innerMsg)
	assert.Equal(t, " Once upon", rec.text.String())
	// Afterwards it is free again.
	s3 := newSession(t, l, m, 64, 0)
	_, rec3, st, msg := generateWithGrammar(t, l, s3, hotSampler(t, l, 4), g, prompt, 8, nil)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, " Once upon", rec3.text.String())

	// The grammar keeps its model alive: free the model handle, use the
	// grammar with a session that also outlives it.
	m3 := openModel(t, l, stories)
	g3, st, msg := newGrammar(t, l, m3, `root ::= " Once"`)
	require.Equal(t, OK, st, msg)
	s4 := newSession(t, l, m3, 64, 0)
	requireStatus(t, l, OK, l.ModelFree(m3), "free the model handle")
	_, rec4, st, msg := generateWithGrammar(t, l, s4, hotSampler(t, l, 5), g3, prompt, 8, nil)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, " Once", rec4.text.String())
}
