package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustNew(t testing.TB, p Params) *Sampler {
	t.Helper()
	s, err := New(p)
	require.NoError(t, err)
	return s
}

func TestNewValidates(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	bad := []Params{
		{Temperature: -0.1}, {Temperature: nan}, {Temperature: inf},
		{TopK: -1}, {TopP: -0.1}, {TopP: 1.1}, {TopP: nan},
		{MinP: -0.5}, {MinP: 2}, {RepeatPenalty: -1}, {RepeatPenalty: nan},
		{PresencePenalty: inf}, {FrequencyPenalty: nan}, {PenaltyLastN: -2},
		{LogitBias: map[int32]float32{-1: 1}}, {LogitBias: map[int32]float32{3: nan}},
		{LogitBias: map[int32]float32{3: inf}},
	}
	for _, p := range bad {
		_, err := New(p)
		assert.ErrorIs(t, err, ErrInvalidParams, "%+v", p)
	}
	good := []Params{
		{}, {Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64},
		{TopP: 1, MinP: 1, PenaltyLastN: -1, LogitBias: map[int32]float32{2: float32(math.Inf(-1))}},
	}
	for _, p := range good {
		_, err := New(p)
		assert.NoError(t, err, "%+v", p)
	}
}

func TestGreedy(t *testing.T) {
	s := mustNew(t, Params{})
	logits := []float32{1, 3, 2, 3, -1}
	orig := slices.Clone(logits)
	assert.Equal(t, int32(1), s.Sample(logits), "ties go to the lowest id")
	assert.Equal(t, orig, logits, "caller's logits unchanged")
	assert.Equal(t, int32(-1), s.Sample(nil))
	// NaN never wins; all -Inf picks id 0.
	nan := float32(math.NaN())
	assert.Equal(t, int32(2), s.Sample([]float32{nan, 1, 2, nan}))
	ninf := float32(math.Inf(-1))
	assert.Equal(t, int32(0), s.Sample([]float32{ninf, ninf}))
	// Greedy ignores the seed.
	for seed := uint64(0); seed < 5; seed++ {
		assert.Equal(t, int32(1), mustNew(t, Params{Seed: seed}).Sample(logits))
	}
}

func TestLogitBias(t *testing.T) {
	logits := []float32{1, 3, 2}
	s := mustNew(t, Params{LogitBias: map[int32]float32{2: 1.5, 99: 100}})
	assert.Equal(t, int32(2), s.Sample(logits), "bias lifts token 2 to 3.5; id 99 is beyond the vocabulary")
	// A banned token is never drawn.
	ban := mustNew(t, Params{Temperature: 1, Seed: 1, LogitBias: map[int32]float32{1: float32(math.Inf(-1))}})
	for i := 0; i < 2000; i++ {
		require.NotEqual(t, int32(1), ban.Sample(logits))
	}
}

// TestPenaltiesExact checks llama.cpp's formula on hand-worked values.
func TestPenaltiesExact(t *testing.T) {
	s := mustNew(t, Params{RepeatPenalty: 2, FrequencyPenalty: 0.25, PresencePenalty: 0.5, PenaltyLastN: 4})
	for _, tok := range []int32{7, 0, 1, 1, 3, 1} { // window keeps the last 4: 1, 1, 3, 1
		s.Accept(tok)
	}
	s.ensure(5)
	w := []float32{3, 3, -1, 2, 4}
	s.applyPenalties(w)
	// token 0: out of the window; 1: 3/2 - 3*0.25 - 0.5 = 0.25;
	// 3: 2/2 - 0.25 - 0.5 = 0.25; 2, 4: unseen.
	assert.Equal(t, []float32{3, 0.25, -1, 0.25, 4}, w)
	for _, c := range s.counts {
		require.Zero(t, c, "counts are cleared after use")
	}
	// Negative logits are multiplied.
	s2 := mustNew(t, Params{RepeatPenalty: 1.5, PenaltyLastN: -1})
	s2.Accept(0)
	s2.ensure(2)
	w = []float32{-2, 1}
	s2.applyPenalties(w)
	assert.Equal(t, []float32{-3, 1}, w)
}

func TestPenaltiesChangeChoice(t *testing.T) {
	logits := []float32{3, 2}
	s := mustNew(t, Params{RepeatPenalty: 2, PenaltyLastN: 8})
	assert.Equal(t, int32(0), s.Sample(logits))
	s.Accept(0)
	assert.Equal(t, int32(1), s.Sample(logits), "3/2 < 2")
	s.Reset()
	assert.Equal(t, int32(0), s.Sample(logits), "Reset forgets history")
	// Window: only the last N tokens count.
	w := mustNew(t, Params{RepeatPenalty: 2, PenaltyLastN: 2})
	w.Accept(0)
	w.Accept(1)
	w.Accept(1)
	assert.Equal(t, int32(0), w.Sample(logits), "token 0 left the window")
	// PenaltyLastN 0 disables penalties.
	off := mustNew(t, Params{RepeatPenalty: 2})
	off.Accept(0)
	assert.Equal(t, int32(0), off.Sample(logits))
	// Frequency penalty grows with the count.
	f := mustNew(t, Params{FrequencyPenalty: 0.4, PenaltyLastN: -1})
	f.Accept(0)
	f.Accept(0)
	assert.Equal(t, int32(0), f.Sample(logits), "3 - 0.8 > 2")
	f.Accept(0)
	assert.Equal(t, int32(1), f.Sample(logits), "3 - 1.2 < 2")
}

// freqs draws n tokens and returns each token's share.
func freqs(s *Sampler, logits []float32, n int) []float64 {
	out := make([]float64, len(logits))
	for i := 0; i < n; i++ {
		out[s.Sample(logits)]++
	}
	for i := range out {
		out[i] /= float64(n)
	}
	return out
}

// assertDist checks observed shares against probabilities within 5
// standard errors (a false alarm is then about one in a few million).
func assertDist(t *testing.T, want, got []float64, n int, msg string) {
	t.Helper()
	for i := range want {
		se := math.Sqrt(want[i]*(1-want[i])/float64(n)) + 1e-9
		assert.InDelta(t, want[i], got[i], 5*se+1e-12, "%s: token %d", msg, i)
	}
}

func logitsOf(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

func TestDistribution(t *testing.T) {
	const n = 40000
	logits := logitsOf(0.4, 0.3, 0.2, 0.1)
	got := freqs(mustNew(t, Params{Temperature: 1, Seed: 42}), logits, n)
	assertDist(t, []float64{0.4, 0.3, 0.2, 0.1}, got, n, "temperature 1")
}

func TestTemperature(t *testing.T) {
	const n = 40000
	logits := []float32{0, 1}
	for _, temp := range []float32{0.5, 2} {
		p1 := 1 / (1 + math.Exp(-1/float64(temp)))
		got := freqs(mustNew(t, Params{Temperature: temp, Seed: 7}), logits, n)
		assertDist(t, []float64{1 - p1, p1}, got, n, "temperature")
	}
}

func TestTopK(t *testing.T) {
	const n = 40000
	logits := []float32{0, 3, 1, 2}
	s := mustNew(t, Params{Temperature: 1, TopK: 2, Seed: 3})
	got := freqs(s, logits, n)
	e := math.E
	assertDist(t, []float64{0, e / (1 + e), 0, 1 / (1 + e)}, got, n, "top-k 2")
	assert.Zero(t, got[0])
	assert.Zero(t, got[2])
	one := mustNew(t, Params{Temperature: 5, TopK: 1, Seed: 3})
	for i := 0; i < 100; i++ {
		require.Equal(t, int32(1), one.Sample(logits))
	}
}

func TestTopP(t *testing.T) {
	const n = 40000
	logits := logitsOf(0.05, 0.5, 0.15, 0.3)
	// 0.5 + 0.3 = 0.8 >= 0.7: tokens 1 and 3 remain.
	got := freqs(mustNew(t, Params{Temperature: 1, TopP: 0.7, Seed: 5}), logits, n)
	assertDist(t, []float64{0, 0.625, 0, 0.375}, got, n, "top-p 0.7")
	// 0.85 needs the third token too.
	got = freqs(mustNew(t, Params{Temperature: 1, TopP: 0.85, Seed: 5}), logits, n)
	assertDist(t, []float64{0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95}, got, n, "top-p 0.85")
	// Top-p applies to the distribution left by top-k.
	got = freqs(mustNew(t, Params{Temperature: 1, TopK: 2, TopP: 0.6, Seed: 5}), logits, n)
	assertDist(t, []float64{0, 1, 0, 0}, got, n, "top-k 2 then top-p 0.6 (0.5/0.8 >= 0.6)")
}

// TestTopPPartialSortMatchesFullSort compares the incremental top-p cut on
// large random vocabularies with a full sort.
func TestTopPPartialSortMatchesFullSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 40; trial++ {
		n := 1 + r.IntN(20000)
		c := make([]cand, n)
		for i := range c {
			// coarse values force many ties
			c[i] = cand{id: int32(i), logit: float32(r.IntN(200)) / float32(1+r.IntN(10))}
		}
		p := r.Float64()
		ref := slices.Clone(c)
		slices.SortFunc(ref, cmpCand)
		softmaxInto(ref, ref[0].logit)
		cum, want := 0.0, len(ref)
		for i := range ref {
			cum += ref[i].p
			if cum >= p {
				want = i + 1
				break
			}
		}
		got := topP(c, p, false)
		require.Len(t, got, want, "trial %d n %d p %v", trial, n, p)
		for i := range got {
			require.Equal(t, ref[i].id, got[i].id)
		}
	}
}

func TestSelectTopMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(3000)
		c := make([]cand, n)
		for i := range c {
			c[i] = cand{id: int32(i), logit: float32(r.IntN(1 + r.IntN(50)))}
		}
		if trial%7 == 0 { // sorted and reversed inputs
			slices.SortFunc(c, cmpCand)
			if trial%2 == 0 {
				slices.Reverse(c)
			}
		}
		k := 1 + r.IntN(n)
		ref := slices.Clone(c)
		slices.SortFunc(ref, cmpCand)
		selectTop(c, k)
		require.Equal(t, ref[:k], c[:k], "trial %d n %d k %d", trial, n, k)
	}
}

func TestMinP(t *testing.T) {
	const n = 40000
	logits := logitsOf(0.5, 0.3, 0.15, 0.05)
	// threshold 0.2 * 0.5 = 0.1: token 3 (0.05) is dropped.
	got := freqs(mustNew(t, Params{Temperature: 1, MinP: 0.2, Seed: 9}), logits, n)
	assertDist(t, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, got, n, "min-p 0.2")
	assert.Zero(t, got[3])
	// min-p 1 keeps only the best.
	s := mustNew(t, Params{Temperature: 1, MinP: 1, Seed: 9})
	for i := 0; i < 100; i++ {
		require.Equal(t, int32(0), s.Sample(logits))
	}
}

// TestOrderTemperatureAfterFilters: top-p and min-p see the untempered
// distribution, as in llama.cpp's chain, so a high temperature does not
// widen the kept set.
func TestOrderTemperatureAfterFilters(t *testing.T) {
	logits := logitsOf(0.5, 0.3, 0.15, 0.05)
	s := mustNew(t, Params{Temperature: 100, TopP: 0.7, Seed: 11})
	for i := 0; i < 2000; i++ {
		tok := s.Sample(logits)
		require.Contains(t, []int32{0, 1}, tok)
	}
}

func TestReproducible(t *testing.T) {
	p := Params{Temperature: 0.9, TopK: 50, TopP: 0.9, MinP: 0.01, RepeatPenalty: 1.1, PenaltyLastN: 16, Seed: 1234}
	r := rand.New(rand.NewPCG(5, 6))
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	run := func(s *Sampler) []int32 {
		var out []int32
		for i := 0; i < 300; i++ {
			tok := s.Sample(logits)
			s.Accept(tok)
			out = append(out, tok)
		}
		return out
	}
	a := mustNew(t, p)
	first := run(a)
	assert.Equal(t, first, run(mustNew(t, p)), "same seed, same tokens")
	a.Reset()
	assert.Equal(t, first, run(a), "Reset replays the sequence")
	p.Seed = 1235
	assert.NotEqual(t, first, run(mustNew(t, p)), "another seed, other tokens")
	distinct := map[int32]bool{}
	for _, tok := range first {
		distinct[tok] = true
	}
	assert.Greater(t, len(distinct), 5, "sampling is not degenerate")
}

func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	logits := make([]float32, 32000)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	for _, p := range []Params{
		{},
		{Temperature: 0.8, Seed: 1},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1},
		{Temperature: 0.7, TopP: 0.9, Seed: 1},
		{Temperature: 1, MinP: 0.1, RepeatPenalty: 1.2, FrequencyPenalty: 0.1, PresencePenalty: 0.1, PenaltyLastN: 64,
			LogitBias: map[int32]float32{5: 2, 6: float32(math.Inf(-1))}, Seed: 1},
	} {
		s := mustNew(t, p)
		for i := 0; i < 100; i++ {
			s.Accept(int32(i * 7))
		}
		s.Sample(logits)
		allocs := testing.AllocsPerRun(20, func() { s.Sample(logits) })
		assert.Zero(t, allocs, "%+v", p)
	}
}

func TestExpDet(t *testing.T) {
	for x := -740.0; x <= 5; x += 0.0137 {
		want := math.Exp(x)
		got := expDet(x)
		tol := 2e-15
		if x < -708 { // subnormal results carry fewer bits
			tol = 1e-9
		}
		require.InDelta(t, 1, got/want, tol, "x=%v", x)
	}
	assert.Equal(t, 1.0, expDet(0))
	assert.Equal(t, 0.0, expDet(-1000))
}

// TestRNGKnownAnswers: splitmix64 from seed 0 starts with 0xe220a8397b1dcdaf
// (the published reference value); the xoshiro256** outputs were computed
// by an independent Python implementation of the published algorithm.
func TestRNGKnownAnswers(t *testing.T) {
	x := uint64(0)
	assert.Equal(t, uint64(0xe220a8397b1dcdaf), splitmix64(&x))
	var r rng
	r.seed(12345)
	got := []uint64{r.next(), r.next(), r.next()}
	assert.Equal(t, xoshiroRef12345, got)
}

func TestRNGUniform(t *testing.T) {
	var r rng
	r.seed(99)
	const n = 200000
	var bins [10]int
	sum := 0.0
	for i := 0; i < n; i++ {
		u := r.float64()
		require.True(t, u >= 0 && u < 1)
		bins[int(u*10)]++
		sum += u
	}
	for _, b := range bins {
		assert.InDelta(t, n/10, b, 5*math.Sqrt(n*0.1*0.9))
	}
	assert.InDelta(t, 0.5, sum/n, 5*math.Sqrt(1.0/12/n))
}

func benchLogits(n int) []float32 {
	r := rand.New(rand.NewPCG(9, 10))
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	return logits
}

func BenchmarkSample150k(b *testing.B) {
	logits := benchLogits(150000)
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"default-chain", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64, Seed: 1}},
		{"top-p-only", Params{Temperature: 0.8, TopP: 0.95, Seed: 1}},
		{"min-p-only", Params{Temperature: 0.8, MinP: 0.05, Seed: 1}},
		{"temperature-only", Params{Temperature: 0.8, Seed: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := New(c.p)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < 64; i++ {
				s.Accept(int32(i * 1000))
			}
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits)
			}
		})
	}
}

// xoshiroRef12345: first three xoshiro256** outputs for seed 12345
// (splitmix64-expanded), from a separate Python implementation.
var xoshiroRef12345 = []uint64{0xbe6a36374160d49b, 0x214aaa0637a688c6, 0xf69d16de9954d388}

// FuzzSample: any logits (NaN, infinities, huge values) and any valid
// parameters give a token id inside the vocabulary, never a banned one
// while another is allowed, and no panic.
func FuzzSample(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64}, uint8(1), uint8(0), uint8(0), uint8(0), uint8(0), uint64(1))
	f.Add([]byte{0, 0, 192, 127, 0, 0, 128, 127, 0, 0, 128, 255}, uint8(200), uint8(3), uint8(90), uint8(10), uint8(30), uint64(7))
	f.Fuzz(func(t *testing.T, raw []byte, temp, topK, topP, minP, rep uint8, seed uint64) {
		n := len(raw) / 4
		if n == 0 || n > 4096 {
			return
		}
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		p := Params{
			Temperature: float32(temp) / 50, TopK: int(topK), TopP: float32(topP%101) / 100,
			MinP: float32(minP%101) / 100, RepeatPenalty: 1 + float32(rep)/50, PenaltyLastN: int(rep % 5),
			FrequencyPenalty: float32(rep) / 100, Seed: seed,
			LogitBias: map[int32]float32{0: float32(math.Inf(-1))},
		}
		s, err := New(p)
		if err != nil {
			t.Fatalf("valid params rejected: %v", err)
		}
		for i := 0; i < 3; i++ {
			tok := s.Sample(logits)
			if tok < 0 || int(tok) >= n {
				t.Fatalf("token %d outside vocabulary of %d", tok, n)
			}
			if tok == 0 && n > 1 {
				// token 0 is banned; it may only come back if every other
				// logit is -Inf or NaN too
				for _, l := range logits[1:] {
					if !math.IsNaN(float64(l)) && !math.IsInf(float64(l), -1) {
						t.Fatalf("banned token drawn with %v", logits)
					}
				}
			}
			s.Accept(tok)
		}
	})
}

// TestOverflowDoesNotBan: penalties and finite biases that overflow
// float32 leave a token possible (clamped), unlike an explicit -Inf.
func TestOverflowDoesNotBan(t *testing.T) {
	s := mustNew(t, Params{RepeatPenalty: 4, PenaltyLastN: 4, LogitBias: map[int32]float32{1: -3e38}})
	s.Accept(0)
	s.ensure(3)
	w := []float32{-3e38, -2e38, float32(math.Inf(-1))}
	for i, id := range s.biasIDs {
		w[id] = clampFinite(w[id]+s.biasVals[i], w[id], s.biasVals[i])
	}
	s.applyPenalties(w)
	assert.Equal(t, []float32{-math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(-1))}, w)
	// Sampling at a tiny temperature still works on such logits.
	hot := mustNew(t, Params{Temperature: 0.01, Seed: 1, RepeatPenalty: 4, PenaltyLastN: 4})
	hot.Accept(0)
	for i := 0; i < 50; i++ {
		tok := hot.Sample([]float32{-3e38, -3.1e38, float32(math.Inf(-1))})
		require.Contains(t, []int32{0, 1}, tok)
	}
}
