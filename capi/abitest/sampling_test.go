package abitest

import (
	"fmt"
	"math"
	"os/exec"
	"runtime"
	"sort"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TopLogprob and TokenLogprob mirror moonlm_top_logprob and
// moonlm_token_logprob.
type TopLogprob struct {
	Token   int32
	Logprob float32
}

type TokenLogprob struct {
	Token   int32
	Logprob float32
	NTop    int32
	Top     [20]TopLogprob
}

// samplingFns are the entry points these tests add to Lib's.
type samplingFns struct {
	SamplerParamsInit func(p unsafe.Pointer, size uintptr)
	SamplerNewRaw     func(p unsafe.Pointer, out *uintptr) int32
	SamplerSetModel   func(s, m uintptr) int32
	GenerateExV2      func(s, smp uintptr, prompt *int32, n uintptr, p *GenerateParams, r *GenerateResult) int32
}

var (
	samplingOnce sync.Once
	samplingLib  samplingFns
)

func sampling(t testing.TB) (*Lib, *samplingFns) {
	l := lib(t)
	samplingOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			panic(err)
		}
		purego.RegisterLibFunc(&samplingLib.SamplerParamsInit, h, "moonlm_sampler_params_init")
		purego.RegisterLibFunc(&samplingLib.SamplerNewRaw, h, "moonlm_sampler_new")
		purego.RegisterLibFunc(&samplingLib.SamplerSetModel, h, "moonlm_sampler_set_model")
		purego.RegisterLibFunc(&samplingLib.GenerateExV2, h, "moonlm_generate_ex")
	})
	return l, &samplingLib
}

// newSamplerP creates a sampler from p on a locked thread; it returns the
// status and the message.
func newSamplerP(t testing.TB, l *Lib, p *SamplerParams) (uintptr, int32, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s uintptr
	st := l.SamplerNew(p, &s)
	msg := l.LastError()
	if st == OK {
		t.Cleanup(func() { l.SamplerFree(s) })
	}
	return s, st, msg
}

func defaultSamplerParams(l *Lib) SamplerParams {
	var p SamplerParams
	l.SamplerParamsDefault(&p)
	return p
}

func TestSamplerParamsLayoutAndDefaults(t *testing.T) {
	l, fns := sampling(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
#define F(s, m) printf(#m " %zu\n", offsetof(s, m))
int main(void) {
	printf("sampler %zu\n", sizeof(moonlm_sampler_params));
	F(moonlm_sampler_params, typical_p); F(moonlm_sampler_params, xtc_threshold); F(moonlm_sampler_params, mirostat);
	F(moonlm_sampler_params, mirostat_m); F(moonlm_sampler_params, dry_multiplier); F(moonlm_sampler_params, dry_penalty_last_n);
	F(moonlm_sampler_params, dry_sequence_breakers); F(moonlm_sampler_params, n_dry_sequence_breakers);
	F(moonlm_sampler_params, logit_bias); F(moonlm_sampler_params, n_logit_bias);
	printf("bias %zu %zu\n", sizeof(moonlm_logit_bias), offsetof(moonlm_logit_bias, bias));
	printf("generate %zu\n", sizeof(moonlm_generate_params));
	F(moonlm_generate_params, logprobs); F(moonlm_generate_params, logprobs_cap); F(moonlm_generate_params, top_logprobs);
	printf("token_logprob %zu %zu %zu %d\n", sizeof(moonlm_token_logprob), offsetof(moonlm_token_logprob, n_top),
	       offsetof(moonlm_token_logprob, top), MOONLM_MAX_TOP_LOGPROBS);
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var sp SamplerParams
	var gp GenerateParams
	var tl TokenLogprob
	want := fmt.Sprintf(`sampler %d
typical_p %d
xtc_threshold %d
mirostat %d
mirostat_m %d
dry_multiplier %d
dry_penalty_last_n %d
dry_sequence_breakers %d
n_dry_sequence_breakers %d
logit_bias %d
n_logit_bias %d
bias 8 4
generate %d
logprobs %d
logprobs_cap %d
top_logprobs %d
token_logprob %d %d %d 20
`, unsafe.Sizeof(sp), unsafe.Offsetof(sp.TypicalP), unsafe.Offsetof(sp.XTCThreshold), unsafe.Offsetof(sp.Mirostat),
		unsafe.Offsetof(sp.MirostatM), unsafe.Offsetof(sp.DRYMultiplier), unsafe.Offsetof(sp.DRYPenaltyLastN),
		unsafe.Offsetof(sp.DRYSequenceBreakers), unsafe.Offsetof(sp.NDRYSequenceBreakers),
		unsafe.Offsetof(sp.LogitBias), unsafe.Offsetof(sp.NLogitBias),
		unsafe.Sizeof(gp), unsafe.Offsetof(gp.Logprobs), unsafe.Offsetof(gp.LogprobsCap), unsafe.Offsetof(gp.TopLogprobs),
		unsafe.Sizeof(tl), unsafe.Offsetof(tl.NTop), unsafe.Offsetof(tl.Top))
	assert.Equal(t, want, string(out))

	// The defaults, through _init with the caller's size.
	var p SamplerParams
	fns.SamplerParamsInit(unsafe.Pointer(&p), unsafe.Sizeof(p))
	assert.Equal(t, unsafe.Sizeof(p), p.Size)
	assert.Equal(t, float32(1), p.TypicalP)
	assert.Equal(t, float32(0), p.XTCProbability)
	assert.Equal(t, float32(0.1), p.XTCThreshold)
	assert.Equal(t, int32(0), p.Mirostat)
	assert.Equal(t, float32(5), p.MirostatTau)
	assert.Equal(t, float32(0.1), p.MirostatEta)
	assert.Equal(t, int32(100), p.MirostatM)
	assert.Equal(t, float32(0), p.DRYMultiplier)
	assert.Equal(t, float32(1.75), p.DRYBase)
	assert.Equal(t, int32(2), p.DRYAllowedLength)
	assert.Equal(t, int32(64), p.DRYPenaltyLastN)
	assert.Nil(t, p.DRYSequenceBreakers)
	assert.Nil(t, p.LogitBias)
}

// A caller built against the first header passes a struct that ends at
// seed: it still works, and gets the defaults of the later members.
func TestSamplerParamsOldSize(t *testing.T) {
	l, fns := sampling(t)
	_ = openModel(t, l, stories)
	// The old struct, followed by bytes the library must not read.
	buf := make([]byte, unsafe.Sizeof(SamplerParams{})+64)
	for i := range buf {
		buf[i] = 0xA5
	}
	fns.SamplerParamsInit(unsafe.Pointer(&buf[0]), samplerParamsV1Size)
	for i := samplerParamsV1Size; i < uintptr(len(buf)); i++ {
		require.Equal(t, byte(0xA5), buf[i], "init wrote beyond the caller's size at %d", i)
	}
	old := (*SamplerParams)(unsafe.Pointer(&buf[0]))
	assert.Equal(t, samplerParamsV1Size, old.Size)
	old.Temperature = 0
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var s uintptr
	requireStatus(t, l, OK, fns.SamplerNewRaw(unsafe.Pointer(&buf[0]), &s), "sampler_new with the first version's size")
	defer l.SamplerFree(s)
	logits := []float32{0.1, 3, 2.9}
	var tok int32
	requireStatus(t, l, OK, l.Sample(s, &logits[0], 3, &tok), "sample")
	assert.Equal(t, int32(1), tok)
	// Smaller than the first version: refused.
	old.Size = samplerParamsV1Size - 8
	requireStatus(t, l, InvalidArg, fns.SamplerNewRaw(unsafe.Pointer(&buf[0]), &s), "size below the first version")
}

func TestSamplerLogitBias(t *testing.T) {
	l, _ := sampling(t)
	_ = openModel(t, l, stories)
	logits := []float32{0.1, 3, 2.9, -1}
	sample := func(s uintptr) int32 {
		var tok int32
		requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
		return tok
	}
	p := defaultSamplerParams(l)
	p.Temperature = 0
	// Token 3 twice: the biases add up (-1 + 2.5 + 2.5 = 4 > 3).
	bias := []LogitBias{{3, 2.5}, {1, float32(math.Inf(-1))}, {3, 2.5}, {99, 100}}
	p.LogitBias, p.NLogitBias = &bias[0], uintptr(len(bias))
	s, st, msg := newSamplerP(t, l, &p)
	require.Equal(t, OK, st, msg)
	runtime.KeepAlive(bias)
	assert.Equal(t, int32(3), sample(s))
	// At temperature 1 a banned token never comes.
	p.Temperature, p.Seed = 1, 5
	bias = []LogitBias{{1, float32(math.Inf(-1))}}
	p.LogitBias, p.NLogitBias = &bias[0], 1
	s, st, msg = newSamplerP(t, l, &p)
	require.Equal(t, OK, st, msg)
	for i := 0; i < 300; i++ {
		require.NotEqual(t, int32(1), sample(s))
	}
	for _, c := range []struct {
		bias []LogitBias
		why  string
	}{
		{[]LogitBias{{-1, 1}}, "negative token"},
		{[]LogitBias{{2, float32(math.NaN())}}, "NaN bias"},
		{[]LogitBias{{2, float32(math.Inf(1))}}, "+Inf bias"},
	} {
		p.LogitBias, p.NLogitBias = &c.bias[0], 1
		_, st, msg := newSamplerP(t, l, &p)
		assert.Equal(t, InvalidArg, st, c.why)
		assert.Contains(t, msg, "logit_bias[0]", c.why)
	}
	p.LogitBias, p.NLogitBias = nil, 3
	_, st, _ = newSamplerP(t, l, &p)
	assert.Equal(t, InvalidArg, st, "NULL logit_bias with a count")
}

func TestSamplerNewParamsValidated(t *testing.T) {
	l, _ := sampling(t)
	_ = openModel(t, l, stories)
	for _, c := range []struct {
		set  func(p *SamplerParams)
		want string
	}{
		{func(p *SamplerParams) { p.Mirostat = 3 }, "mirostat"},
		{func(p *SamplerParams) { p.MirostatM = 0 }, "mirostat_m"},
		{func(p *SamplerParams) { p.MirostatTau = float32(math.NaN()) }, "mirostat_tau"},
		{func(p *SamplerParams) { p.TypicalP = float32(math.Inf(1)) }, "typical_p"},
		{func(p *SamplerParams) { p.XTCThreshold = -0.1 }, "xtc_threshold"},
		{func(p *SamplerParams) { p.DRYAllowedLength = -1 }, "dry_allowed_length"},
		{func(p *SamplerParams) { p.DRYPenaltyLastN = -2 }, "dry_penalty_last_n"},
		{func(p *SamplerParams) { p.DRYMultiplier = float32(math.NaN()) }, "dry_multiplier"},
	} {
		p := defaultSamplerParams(l)
		c.set(&p)
		_, st, msg := newSamplerP(t, l, &p)
		assert.Equal(t, InvalidArg, st, c.want)
		assert.Contains(t, msg, c.want)
	}
	// Empty and NULL breakers are refused.
	empty := []byte{0}
	ptrs := []*byte{&empty[0]}
	p := defaultSamplerParams(l)
	p.DRYSequenceBreakers, p.NDRYSequenceBreakers = unsafe.Pointer(&ptrs[0]), 1
	_, st, msg := newSamplerP(t, l, &p)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "dry_sequence_breakers[0] is empty")
	ptrs[0] = nil
	_, st, _ = newSamplerP(t, l, &p)
	assert.Equal(t, InvalidArg, st)
	runtime.KeepAlive(empty)
	p.DRYSequenceBreakers = nil
	_, st, msg = newSamplerP(t, l, &p)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "dry_sequence_breakers is NULL but n_dry_sequence_breakers is 1")
}

// XTC, typical-p and mirostat are reachable from C and reproducible.
func TestSamplerNewStages(t *testing.T) {
	l, _ := sampling(t)
	_ = openModel(t, l, stories)
	probs := []float64{0.4, 0.3, 0.2, 0.1}
	logits := make([]float32, len(probs))
	for i, p := range probs {
		logits[i] = float32(math.Log(p))
	}
	draws := func(p SamplerParams, n int) []int32 {
		s, st, msg := newSamplerP(t, l, &p)
		require.Equal(t, OK, st, msg)
		out := make([]int32, n)
		for i := range out {
			requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &out[i]), "sample")
		}
		return out
	}
	base := defaultSamplerParams(l)
	base.Temperature, base.TopK, base.TopP, base.MinP, base.Seed = 1, 0, 1, 0, 11

	xtc := base
	xtc.XTCProbability, xtc.XTCThreshold = 1, 0.15
	for _, tok := range draws(xtc, 300) {
		require.Contains(t, []int32{2, 3}, tok, "XTC removes 0.4 and 0.3, keeping 0.2 (the least likely above 0.15)")
	}
	typ := base
	typ.TypicalP = 0.5
	for _, tok := range draws(typ, 300) {
		require.NotEqual(t, int32(0), tok)
	}
	typ.Temperature = 0
	assert.Equal(t, []int32{1}, draws(typ, 1), "greedy picks the best typical token")
	for _, v := range []int32{1, 2} {
		m := base
		m.Mirostat, m.MirostatTau = v, 1.5
		a, b := draws(m, 100), draws(m, 100)
		assert.Equal(t, a, b, "mirostat %d: the seed reproduces", v)
		seen := map[int32]bool{}
		for _, tok := range a {
			seen[tok] = true
		}
		assert.Greater(t, len(seen), 1, "mirostat %d draws", v)
	}
}

// DRY with breakers needs a vocabulary for moonlm_sample; with one it
// steers greedy decoding away from extending a repeat.
func TestSamplerDRYSetModel(t *testing.T) {
	l, fns := sampling(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	p := defaultSamplerParams(l)
	p.Temperature = 0
	p.DRYMultiplier, p.DRYAllowedLength = 5, 2 // default breakers
	s, st, msg := newSamplerP(t, l, &p)
	require.Equal(t, OK, st, msg)
	logits := make([]float32, info.NVocab)
	for i := range logits {
		logits[i] = -float32(i) * 0.01 // token 0 is the greedy choice
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var tok int32
	requireStatus(t, l, InvalidArg, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "DRY breakers without a vocabulary")
	assert.Contains(t, l.LastError(), "moonlm_sampler_set_model")
	requireStatus(t, l, InvalidArg, fns.SamplerSetModel(s, 0), "NULL model")
	requireStatus(t, l, InvalidArg, fns.SamplerSetModel(m, s), "swapped handles")
	requireStatus(t, l, OK, fns.SamplerSetModel(s, m), "set_model")
	// History 0 1 2 0 1: token 2 would extend the repeat "0 1".
	for _, t0 := range []int32{0, 1, 2, 0, 1} {
		requireStatus(t, l, OK, l.SamplerAccept(s, t0), "accept")
	}
	logits[2] = 1 // the favourite without DRY
	requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
	assert.Equal(t, int32(0), tok, "DRY took 5 off token 2")
	// No breakers: no vocabulary needed.
	p.DRYSequenceBreakers, p.NDRYSequenceBreakers = unsafe.Pointer(&[]*byte{nil}[0]), 0
	s2, st, msg := newSamplerP(t, l, &p)
	require.Equal(t, OK, st, msg)
	requireStatus(t, l, OK, l.Sample(s2, &logits[0], uintptr(len(logits)), &tok), "sample without breakers")
}

// logSoftmax64 is log_softmax written out in float64.
func logSoftmax64(x []float32) []float64 {
	lse := logSumExp(x)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

// moonlm_generate_ex fills the caller's buffer with each token's
// log-probabilities: log_softmax of the model's logits (greedy, no bias),
// checked against logits from moonlm_prefill/moonlm_decode.
func TestGenerateExLogprobs(t *testing.T) {
	l, fns := sampling(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g := greedySampler(t, l)
	prompt := []int32{info.BOS}
	const n = 24

	buf := make([]TokenLogprob, n)
	var p GenerateParams
	l.GenerateParamsInit(&p, unsafe.Sizeof(p))
	p.MaxTokens = n
	p.Logprobs, p.LogprobsCap, p.TopLogprobs = &buf[0], n, 5
	// The entry of a token is there when the callback sees the token.
	calls := 0
	rec := &genRecorder{hook: func(tok int32) bool {
		if tok >= 0 {
			if buf[calls].Token != tok {
				panic(fmt.Sprintf("callback %d: entry holds token %d, want %d", calls, buf[calls].Token, tok))
			}
			calls++
		}
		return false
	}}
	p.Callback, p.UserData = callback(), register(rec)
	s := newSession(t, l, m, 256, 0)
	r := newResult()
	runtime.LockOSThread()
	st := fns.GenerateExV2(s, g, &prompt[0], 1, &p, &r)
	msg := l.LastError()
	runtime.UnlockOSThread()
	require.Equal(t, OK, st, msg)
	require.Equal(t, uintptr(n), r.NGenerated)
	assert.Equal(t, n, calls)

	s2 := newSession(t, l, m, 256, 0)
	logits := make([]float32, info.NVocab)
	requireStatus(t, l, OK, l.Prefill(s2, &prompt[0], 1, &logits[0], uintptr(len(logits))), "prefill")
	for i := 0; i < n; i++ {
		e := buf[i]
		want := logSoftmax64(logits)
		require.Equal(t, argmax(logits), e.Token, "token %d", i)
		assert.InDelta(t, want[e.Token], float64(e.Logprob), 1e-4, "token %d", i)
		require.Equal(t, int32(5), e.NTop)
		order := make([]int, len(want))
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return want[order[a]] > want[order[b]] })
		for j := 0; j < 5; j++ {
			assert.Equal(t, int32(order[j]), e.Top[j].Token, "token %d rank %d", i, j)
			assert.InDelta(t, want[order[j]], float64(e.Top[j].Logprob), 1e-4)
		}
		requireStatus(t, l, OK, l.Decode(s2, e.Token, &logits[0], uintptr(len(logits))), "decode")
	}

	// Refused before any work.
	bad := func(set func(q *GenerateParams), want string) {
		q := p
		set(&q)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		st := fns.GenerateExV2(s, g, &prompt[0], 1, &q, &r)
		assert.Equal(t, InvalidArg, st, want)
		assert.Contains(t, l.LastError(), want)
	}
	bad(func(q *GenerateParams) { q.MaxTokens = -1 }, "max_tokens is -1")
	bad(func(q *GenerateParams) { q.LogprobsCap = n - 1 }, "logprobs_cap")
	bad(func(q *GenerateParams) { q.TopLogprobs = 21 }, "top_logprobs is 21")
	bad(func(q *GenerateParams) { q.Logprobs = nil }, "logprobs is NULL")
	runtime.KeepAlive(buf)

	// A caller of the first version's size gets no log-probabilities and
	// generates as before (the members beyond its size are not read).
	old := p
	old.Size = generateParamsV1Size
	old.Callback, old.UserData = 0, 0
	for i := range buf {
		buf[i] = TokenLogprob{Token: -7}
	}
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
	runtime.LockOSThread()
	st = fns.GenerateExV2(s, g, &prompt[0], 1, &old, &r)
	msg = l.LastError()
	runtime.UnlockOSThread()
	require.Equal(t, OK, st, msg)
	assert.Equal(t, uintptr(n), r.NGenerated)
	assert.Equal(t, int32(-7), buf[0].Token, "nothing written for an old-size caller")
}
