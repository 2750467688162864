package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func randLogits(r *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

// softmax64 is the textbook softmax in float64 with the math package.
func softmax64(l []float32, t float64) []float64 {
	mx := math.Inf(-1)
	for _, x := range l {
		mx = math.Max(mx, float64(x))
	}
	p := make([]float64, len(l))
	sum := 0.0
	for i, x := range l {
		p[i] = math.Exp((float64(x) - mx) / t)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

func candsOf(l []float32) []cand {
	c := make([]cand, len(l))
	for i, x := range l {
		c[i] = cand{id: int32(i), logit: x}
	}
	return c
}

func idsOf(c []cand) []int32 {
	out := make([]int32, len(c))
	for i, x := range c {
		out[i] = x.id
	}
	slices.Sort(out)
	return out
}

func TestLogDet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 100000; i++ {
		x := math.Exp(r.Float64()*1400 - 700)
		want := math.Log(x)
		got := logDet(x)
		require.InDelta(t, want, got, 1e-15*math.Max(1, math.Abs(want)), "x=%v", x)
	}
	assert.Equal(t, 0.0, logDet(1))
	assert.True(t, math.IsInf(logDet(0), -1))
	assert.True(t, math.IsNaN(logDet(-1)))
	// 2^-1074 (math.Log's assembly gets this subnormal wrong on amd64).
	assert.InDelta(t, -1074*math.Ln2, logDet(math.SmallestNonzeroFloat64), 1e-12)
}

// typicalRef is typical-p written out directly from its definition.
func typicalRef(l []float32, p float64) []int32 {
	pr := softmax64(l, 1)
	h := 0.0
	for _, x := range pr {
		if x > 0 {
			h -= x * math.Log(x)
		}
	}
	idx := make([]int, len(l))
	for i := range idx {
		idx[i] = i
	}
	score := func(i int) float64 { return math.Abs(-math.Log(pr[i]) - h) }
	sort.SliceStable(idx, func(a, b int) bool { return score(idx[a]) < score(idx[b]) })
	var out []int32
	cum := 0.0
	for _, i := range idx {
		out = append(out, int32(i))
		cum += pr[i]
		if cum > p {
			break
		}
	}
	slices.Sort(out)
	return out
}

func TestTypicalMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for trial := 0; trial < 300; trial++ {
		l := randLogits(r, 2+r.IntN(300), 0.5+3*r.Float64())
		p := r.Float64()
		require.Equal(t, typicalRef(l, p), idsOf(typical(candsOf(l), p)), "trial %d", trial)
	}
	// llama.cpp's cases: a dominant token is the typical one; with one
	// token at 0.4 and three at 0.2 the three are.
	assert.Equal(t, []int32{0}, idsOf(typical(candsOf(logitsOf(0.97, 0.01, 0.01, 0.01)), 0.5)))
	assert.Equal(t, []int32{1, 2, 3}, idsOf(typical(candsOf(logitsOf(0.4, 0.2, 0.2, 0.2)), 0.5)))
}

// xtcRef removes the tokens at least threshold likely but the least likely
// of them, if two or more are.
func xtcRef(l []float32, thr float64) []int32 {
	pr := softmax64(l, 1)
	var above []int
	for i, x := range pr {
		if x >= thr {
			above = append(above, i)
		}
	}
	keep := map[int]bool{}
	for i := range l {
		keep[i] = true
	}
	if len(above) >= 2 {
		least := above[0]
		for _, i := range above {
			if l[i] < l[least] || (l[i] == l[least] && i > least) {
				least = i
			}
		}
		for _, i := range above {
			if i != least {
				delete(keep, i)
			}
		}
	}
	var out []int32
	for i := range l {
		if keep[i] {
			out = append(out, int32(i))
		}
	}
	return out
}

func TestXTC(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := 0; trial < 300; trial++ {
		l := randLogits(r, 2+r.IntN(100), 2)
		thr := r.Float64() * 0.5
		require.Equal(t, xtcRef(l, thr), idsOf(xtc(candsOf(l), thr)), "trial %d", trial)
	}
	// llama.cpp's cases on 0.4, 0.3, 0.2, 0.1.
	l := logitsOf(0.4, 0.3, 0.2, 0.1)
	for _, c := range []struct {
		thr  float64
		want []int32
	}{{0.09, []int32{3}}, {0.19, []int32{2, 3}}, {0.29, []int32{1, 2, 3}}, {0.39, []int32{0, 1, 2, 3}}} {
		assert.Equal(t, c.want, idsOf(xtc(candsOf(l), c.thr)), "threshold %v", c.thr)
	}
	// In the sampler: probability 1 always removes the top choices;
	// probability 0.5 about half the time.
	s := mustNew(t, Params{Temperature: 1, XTCProbability: 1, XTCThreshold: 0.15, Seed: 1})
	for i := 0; i < 500; i++ {
		require.Contains(t, []int32{2, 3}, s.Sample(l))
	}
	const n = 40000
	half := freqs(mustNew(t, Params{Temperature: 1, XTCProbability: 0.5, XTCThreshold: 0.15, Seed: 1}), l, n)
	assertDist(t, []float64{0.5 * 0.4, 0.5 * 0.3, 0.5*0.2 + 0.5*0.2/0.3, 0.5*0.1 + 0.5*0.1/0.3}, half, n, "xtc 0.5")
	// Greedy picks the best token XTC leaves.
	g := mustNew(t, Params{XTCProbability: 1, XTCThreshold: 0.15})
	assert.Equal(t, int32(2), g.Sample(l))
	// A threshold above 0.5 disables XTC.
	off := mustNew(t, Params{XTCProbability: 1, XTCThreshold: 0.6})
	assert.Equal(t, int32(0), off.Sample(l))
}

func TestTypicalInSampler(t *testing.T) {
	const n = 40000
	l := logitsOf(0.4, 0.2, 0.2, 0.2)
	got := freqs(mustNew(t, Params{Temperature: 1, TypicalP: 0.5, Seed: 4}), l, n)
	assertDist(t, []float64{0, 1.0 / 3, 1.0 / 3, 1.0 / 3}, got, n, "typical 0.5")
	// Greedy with typical-p picks the best typical token, not the argmax.
	assert.Equal(t, int32(1), mustNew(t, Params{TypicalP: 0.5}).Sample(l))
}

// refMirostat is mirostat v1 or v2 written from llama.cpp's description with
// the math package and a full sort, drawing with the same generator.
type refMirostat struct {
	version, m int
	tau, eta   float64
	t          float64
	mu         float64
	rng        rng
}

func (r *refMirostat) sample(l []float32) int32 {
	pr := softmax64(l, r.t)
	idx := make([]int, len(l))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return l[idx[a]] > l[idx[b]] })
	keep := 0
	if r.version == 1 {
		sumTB, sumTT := 0.0, 0.0
		for i := 0; i < r.m-1 && i < len(l)-1; i++ {
			ti := math.Log(float64(i+2) / float64(i+1))
			bi := math.Log(pr[idx[i]] / pr[idx[i+1]])
			sumTB += ti * bi
			sumTT += ti * ti
		}
		s := sumTB / sumTT
		eps := s - 1
		k := math.Pow(eps*math.Pow(2, r.mu)/(1-math.Pow(float64(len(l)), -eps)), 1/s)
		keep = 1
		if k >= 1 && !math.IsInf(k, 0) {
			keep = int(math.Min(k, float64(len(l))))
		}
	} else {
		for keep < len(idx) && -math.Log2(pr[idx[keep]]) <= r.mu {
			keep++
		}
		keep = max(keep, 1)
	}
	kept := idx[:keep]
	sum := 0.0
	for _, i := range kept {
		sum += pr[i]
	}
	u := r.rng.float64() * sum
	pick, cum := kept[len(kept)-1], 0.0
	for _, i := range kept {
		cum += pr[i]
		if u < cum {
			pick = i
			break
		}
	}
	surprise := -math.Log2(pr[pick] / sum)
	r.mu -= r.eta * (surprise - r.tau)
	return int32(pick)
}

func TestMirostatMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, version := range []int{1, 2} {
		for trial := 0; trial < 6; trial++ {
			tau := 1 + 6*r.Float64()
			eta := 0.05 + 0.3*r.Float64()
			temp := 0.5 + r.Float64()
			p := Params{Temperature: float32(temp), Mirostat: version, MirostatTau: float32(tau), MirostatEta: float32(eta), Seed: uint64(trial)}
			s := mustNew(t, p)
			ref := &refMirostat{version: version, m: 100, tau: float64(p.MirostatTau), eta: float64(p.MirostatEta), t: float64(p.Temperature), mu: 2 * float64(p.MirostatTau)}
			ref.rng.seed(p.Seed)
			// Distinct logits: the draw order over tied tokens is ours.
			l := make([]float32, 500)
			for step := 0; step < 150; step++ {
				for i := range l {
					l[i] = float32(r.NormFloat64()*3) + float32(i)*1e-4
				}
				want := ref.sample(l)
				require.Equal(t, want, s.Sample(l), "mirostat %d trial %d step %d", version, trial, step)
				require.InDelta(t, ref.mu, s.mu, 1e-6, "mu after step %d", step)
			}
			// Reset returns mu to 2 tau.
			s.Reset()
			assert.Equal(t, 2*float64(p.MirostatTau), s.mu)
		}
	}
}

// Mirostat holds the observed surprise near tau on average.
func TestMirostatTracksTau(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	l := randLogits(r, 2000, 2.5)
	for _, version := range []int{1, 2} {
		const tau = 3.0
		s := mustNew(t, Params{Temperature: 1, Mirostat: version, MirostatTau: tau, MirostatEta: 0.1, Seed: 9})
		pr := softmax64(l, 1)
		total, n := 0.0, 0
		for i := 0; i < 4000; i++ {
			tok := s.Sample(l)
			if i >= 1000 {
				total += -math.Log2(pr[tok])
				n++
			}
		}
		// The surprise is measured against the full distribution, which
		// exceeds the truncated one's: only a loose band is expected.
		avg := total / float64(n)
		assert.InDelta(t, tau, avg, 1.5, "mirostat %d average surprise", version)
	}
}

// dryRef computes DRY's penalties by brute force: for every token, the
// longest repeat it would extend.
func dryRef(hist []int32, nVocab int, mult, base float64, allowed int, breakers [][]int32) []float64 {
	n := len(hist)
	pen := make([]float64, nVocab)
	if n <= allowed {
		return pen
	}
	// The nearest complete breaker limits the repeat length.
	limit := n
	isHead := func(tok int32) bool {
		for _, b := range breakers {
			if b[0] == tok {
				return true
			}
		}
		return false
	}
found:
	for i := 0; i < n; i++ { // i tokens from the end
		pos := n - 1 - i
		if !isHead(hist[pos]) {
			continue
		}
		longest := -1
		for _, b := range breakers {
			tail := b[1:]
			if b[0] != hist[pos] || len(tail) > i || len(tail) <= longest {
				continue
			}
			if slices.Equal(hist[pos+1:pos+1+len(tail)], tail) {
				longest = len(tail)
			}
		}
		if longest >= 0 {
			limit = i - longest
			break found
		}
	}
	if limit < allowed {
		return pen
	}
	single := map[int32]bool{}
	for _, b := range breakers {
		if len(b) == 1 {
			single[b[0]] = true
		}
	}
	best := make([]int, nVocab)
	for i := range best {
		best[i] = -1
	}
	for end := 0; end < n-1; end++ { // a repeat ending at end, followed by hist[end+1]
		l := 0
		for l <= end && hist[end-l] == hist[n-1-l] {
			l++
		}
		l = min(l, limit)
		if l >= allowed {
			best[hist[end+1]] = max(best[hist[end+1]], l)
		}
	}
	for tok, l := range best {
		if l >= 0 && !single[int32(tok)] {
			pen[tok] = mult * math.Pow(base, float64(l-allowed))
		}
	}
	return pen
}

func TestDRYMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 400; trial++ {
		nVocab := 2 + r.IntN(6)
		allowed := r.IntN(4)
		window := 1 + r.IntN(40)
		p := Params{DRYMultiplier: 0.8, DRYBase: 1.75, DRYAllowedLength: allowed, DRYPenaltyLastN: window}
		s := mustNew(t, p)
		var breakers [][]int32
		for b := r.IntN(3); b > 0; b-- {
			seq := make([]int32, 1+r.IntN(3))
			for i := range seq {
				seq[i] = int32(r.IntN(nVocab + 2)) // some never occur
			}
			breakers = append(breakers, seq)
		}
		s.SetDRYBreakerTokens(breakers)
		var hist []int32
		for i := r.IntN(60); i > 0; i-- {
			tok := int32(r.IntN(nVocab))
			hist = append(hist, tok)
			s.Accept(tok)
		}
		if len(hist) > window {
			hist = hist[len(hist)-window:]
		}
		s.ensure(nVocab)
		w := make([]float32, nVocab)
		s.dry.apply(&s.p, w)
		want := dryRef(hist, nVocab, 0.8, 1.75, allowed, breakers)
		for tok := range w {
			require.InDelta(t, -want[tok], float64(w[tok]), 1e-5*math.Max(1, want[tok]), "trial %d token %d hist %v breakers %v allowed %d", trial, tok, hist, breakers, allowed)
		}
	}
}

// llama.cpp's DRY cases, as probabilities after the penalty.
func TestDRYKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		probs    []float64
		hist     []int32
		want     []float64
		mult     float32
		allowed  int
		window   int
		breakers [][]int32
	}{
		{[]float64{0.25, 0.25, 0.25, 0.25}, []int32{0, 1}, []float64{0.25, 0.25, 0.25, 0.25}, 1, 2, 4, nil},
		{[]float64{0.25, 0.25, 0.25, 0.25}, []int32{0, 1, 2, 0, 1}, []float64{0.296923, 0.296923, 0.109232, 0.296923}, 1, 2, 5, nil},
		{[]float64{0.2, 0.2, 0.2, 0.2, 0.2}, []int32{0, 1, 3, 4, 0, 1}, []float64{0.2, 0.2, 0.2, 0.2, 0.2}, 1, 2, 6, [][]int32{{3}}},
		{[]float64{0.2, 0.2, 0.2, 0.2, 0.2}, []int32{0, 1, 2, 0, 1}, []float64{0.241818, 0.241818, 0.032727, 0.241818, 0.241818}, 2, 2, 5, nil},
		{[]float64{0.2, 0.2, 0.2, 0.2, 0.2}, []int32{0, 1, 2, 3, 4, 0, 1}, []float64{0.2, 0.2, 0.2, 0.2, 0.2}, 1, 4, 7, nil},
	} {
		s := mustNew(t, Params{DRYMultiplier: c.mult, DRYBase: 1.1, DRYAllowedLength: c.allowed, DRYPenaltyLastN: c.window})
		s.SetDRYBreakerTokens(c.breakers)
		for _, tok := range c.hist {
			s.Accept(tok)
		}
		l := logitsOf(c.probs...)
		s.Sample(l)
		got := softmax64(s.work[:len(l)], 1)
		for i := range got {
			assert.InDelta(t, c.want[i], got[i], 1e-5, "history %v token %d", c.hist, i)
		}
	}
}

// fakeVocab is a vocabulary of given token texts whose tokenizer is a
// greedy longest match.
type fakeVocab []string

func (v fakeVocab) NumTokens() int            { return len(v) }
func (v fakeVocab) TokenText(id int32) []byte { return []byte(v[id]) }
func (v fakeVocab) Tokenize(s string) ([]int32, error) {
	var out []int32
	for len(s) > 0 {
		bestID, bestLen := -1, 0
		for id, t := range v {
			if len(t) > bestLen && len(t) <= len(s) && s[:len(t)] == t {
				bestID, bestLen = id, len(t)
			}
		}
		if bestID < 0 {
			return nil, assert.AnError
		}
		out = append(out, int32(bestID))
		s = s[bestLen:]
	}
	return out, nil
}

func TestDRYBreakersFromText(t *testing.T) {
	v := fakeVocab{"a", "b", "\n", "x\n", "Q", "Qu", "ote", "Quo", "te", "e", "u"}
	s := mustNew(t, Params{DRYMultiplier: 1, DRYBase: 2, DRYPenaltyLastN: -1, DRYSequenceBreakers: []string{"\n", "Quote"}})
	assert.True(t, s.NeedsVocab())
	require.NoError(t, s.SetVocab(v))
	assert.False(t, s.NeedsVocab())
	br := s.dry.breakers
	// Tokens containing "\n" break alone.
	assert.Equal(t, [][]int32{nil}, br[2])
	assert.Equal(t, [][]int32{nil}, br[3])
	// "Q", "Qu", "Quo" start "Quote": the rest, tokenized, must follow.
	assert.Equal(t, [][]int32{{10, 6}}, br[4], "Q, then u ote")
	assert.Equal(t, [][]int32{{6}}, br[5], "Qu, then ote")
	assert.Equal(t, [][]int32{{8}}, br[7], "Quo, then te")
	assert.Len(t, br, 5)
	assert.NotContains(t, br, int32(0))
	assert.NotContains(t, br, int32(9), "'e' is no prefix of Quote")
}

func TestValidatesNewStages(t *testing.T) {
	nan := float32(math.NaN())
	for _, p := range []Params{
		{TypicalP: -0.1}, {TypicalP: 1.5}, {TypicalP: nan},
		{XTCProbability: -1}, {XTCProbability: 2}, {XTCThreshold: nan},
		{DRYMultiplier: -1}, {DRYMultiplier: nan}, {DRYBase: -1}, {DRYAllowedLength: -1},
		{DRYPenaltyLastN: -2}, {DRYPenaltyLastN: MaxPenaltyLastN + 1},
		{DRYMultiplier: 1, DRYBase: 2, DRYPenaltyLastN: 4, DRYSequenceBreakers: []string{""}},
		{Mirostat: 3}, {Mirostat: -1}, {MirostatTau: nan}, {MirostatEta: -1}, {MirostatM: -1}, {MirostatM: MaxMirostatM + 1},
	} {
		_, err := New(p)
		assert.ErrorIs(t, err, ErrInvalidParams, "%+v", p)
	}
}

func TestLogSoftmaxTopMatchesDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	top := make([]TokenLogprob, MaxTopLogprobs)
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.IntN(3000)
		l := randLogits(r, n, 4)
		for i := range l {
			switch r.IntN(20) {
			case 0:
				l[i] = float32(math.Inf(-1))
			case 1:
				l[i] = float32(math.Round(float64(l[i]))) // ties
			}
		}
		pr := softmax64(l, 1)
		k := r.IntN(MaxTopLogprobs + 1)
		tok := int32(r.IntN(n))
		lp, got := LogSoftmaxTop(l, tok, top[:k])
		if math.IsInf(float64(l[tok]), -1) {
			require.True(t, math.IsInf(float64(lp), -1))
		} else {
			require.InDelta(t, math.Log(pr[tok]), float64(lp), 1e-4)
		}
		// The reference ranking: finite tokens by logit, ties to the lower id.
		var ids []int32
		for i := range l {
			if !math.IsInf(float64(l[i]), -1) {
				ids = append(ids, int32(i))
			}
		}
		sort.SliceStable(ids, func(a, b int) bool { return l[ids[a]] > l[ids[b]] })
		want := min(k, len(ids))
		require.Equal(t, want, got)
		for i := 0; i < got; i++ {
			require.Equal(t, ids[i], top[i].Token, "trial %d rank %d", trial, i)
			require.InDelta(t, math.Log(pr[ids[i]]), float64(top[i].Logprob), 1e-4)
		}
	}
	lp, n := LogSoftmaxTop([]float32{float32(math.Inf(-1))}, 0, top)
	assert.True(t, math.IsInf(float64(lp), -1))
	assert.Zero(t, n)
}

// Logprobs sees the logits after bias and penalties, before truncation and
// temperature.
func TestSamplerLogprobsStages(t *testing.T) {
	l := []float32{2, 1, 0.5, -1}
	s := mustNew(t, Params{Temperature: 0.3, TopK: 1, RepeatPenalty: 2, PenaltyLastN: 8,
		LogitBias: map[int32]float32{3: float32(math.Inf(-1)), 2: 1}, Seed: 1})
	s.Accept(0)
	tok := s.Sample(l)
	adjusted := []float32{1, 1, 1.5, float32(math.Inf(-1))}
	top := make([]TokenLogprob, 4)
	lp, n := s.Logprobs(tok, top)
	wantLP, wantN := LogSoftmaxTop(adjusted, tok, make([]TokenLogprob, 4))
	assert.Equal(t, int32(2), tok)
	assert.Equal(t, wantLP, lp)
	assert.Equal(t, 3, n, "the banned token is not an alternative")
	assert.Equal(t, wantN, n)
	assert.Equal(t, int32(2), top[0].Token)
	assert.InDelta(t, math.Log(math.Exp(1.5)/(2*math.E+math.Exp(1.5))), float64(lp), 1e-6)
}

func TestNoAllocsAllStages(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	logits := randLogits(r, 32000, 2)
	breakers := [][]int32{{5}, {6, 7}}
	top := make([]TokenLogprob, MaxTopLogprobs)
	for _, p := range []Params{
		{Temperature: 0.8, TopK: 40, TypicalP: 0.9, TopP: 0.95, MinP: 0.05, XTCProbability: 0.5, XTCThreshold: 0.1, Seed: 1},
		{Temperature: 0.8, DRYMultiplier: 0.8, DRYBase: 1.75, DRYAllowedLength: 2, DRYPenaltyLastN: -1, Seed: 1},
		{Temperature: 0.8, Mirostat: 1, MirostatTau: 5, MirostatEta: 0.1, Seed: 1},
		{Temperature: 0.8, Mirostat: 2, MirostatTau: 5, MirostatEta: 0.1, Seed: 1},
		{TypicalP: 0.5, XTCProbability: 1, XTCThreshold: 0.01},
	} {
		s := mustNew(t, p)
		s.SetDRYBreakerTokens(breakers)
		for i := 0; i < 300; i++ {
			s.Accept(int32(i % 37))
		}
		s.Sample(logits)
		allocs := testing.AllocsPerRun(20, func() {
			tok := s.Sample(logits)
			s.Logprobs(tok, top)
		})
		assert.Zero(t, allocs, "%+v", p)
	}
}

func TestReproducibleAllStages(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	logits := randLogits(r, 3000, 3)
	for _, p := range []Params{
		{Temperature: 1.1, TopK: 100, TypicalP: 0.95, TopP: 0.95, MinP: 0.01, XTCProbability: 0.3, XTCThreshold: 0.05,
			DRYMultiplier: 0.8, DRYBase: 1.75, DRYAllowedLength: 2, DRYPenaltyLastN: 64, Seed: 77},
		{Temperature: 0.9, Mirostat: 2, MirostatTau: 4, MirostatEta: 0.2, Seed: 77},
		{Temperature: 0.9, Mirostat: 1, MirostatTau: 4, MirostatEta: 0.2, Seed: 77},
	} {
		run := func(s *Sampler) []int32 {
			var out []int32
			for i := 0; i < 200; i++ {
				tok := s.Sample(logits)
				s.Accept(tok)
				out = append(out, tok)
			}
			return out
		}
		a := mustNew(t, p)
		first := run(a)
		assert.Equal(t, first, run(mustNew(t, p)))
		a.Reset()
		assert.Equal(t, first, run(a), "Reset replays")
	}
}

// FuzzSampleStages: typical-p, XTC, DRY and mirostat on arbitrary logits
// (NaN, infinities, extremes) return a token inside the vocabulary, never
// the banned one while another is possible, with a finite log-probability
// then, and no panic.
func FuzzSampleStages(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}, uint8(50), uint8(90), uint8(40), uint8(3), uint8(0), uint64(1))
	f.Add([]byte{0, 0, 192, 127, 0, 0, 128, 127, 0, 0, 128, 255, 255, 255, 127, 127}, uint8(1), uint8(10), uint8(5), uint8(9), uint8(1), uint64(7))
	f.Add([]byte{255, 255, 127, 255, 255, 255, 127, 127, 0, 0, 0, 0}, uint8(255), uint8(0), uint8(100), uint8(2), uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, raw []byte, temp, typ, xtcP, dry, miro uint8, seed uint64) {
		n := len(raw) / 4
		if n == 0 || n > 4096 {
			return
		}
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		p := Params{
			Temperature: float32(temp) / 50, TypicalP: float32(typ%101) / 100,
			XTCProbability: float32(xtcP%101) / 100, XTCThreshold: float32(xtcP%51) / 100,
			DRYMultiplier: float32(dry) / 10, DRYBase: 1 + float32(dry)/20, DRYAllowedLength: int(dry % 4), DRYPenaltyLastN: int(dry%9) - 1,
			Mirostat: int(miro % 3), MirostatTau: float32(miro) / 20, MirostatEta: float32(miro%7) / 10, MirostatM: int(miro % 5),
			Seed:      seed,
			LogitBias: map[int32]float32{0: float32(math.Inf(-1))},
		}
		s, err := New(p)
		if err != nil {
			t.Fatalf("valid params rejected: %v", err)
		}
		s.SetDRYBreakerTokens([][]int32{{1}, {2, 0}})
		possible := false
		for _, l := range logits[1:] {
			if !math.IsNaN(float64(l)) && !math.IsInf(float64(l), -1) {
				possible = true
			}
		}
		for i := 0; i < 6; i++ {
			tok := s.Sample(logits)
			if tok < 0 || int(tok) >= n {
				t.Fatalf("token %d outside vocabulary of %d", tok, n)
			}
			if tok == 0 && possible {
				t.Fatalf("banned token drawn with %v", logits)
			}
			if lp, _ := s.Logprobs(tok, make([]TokenLogprob, 3)); possible && (lp != lp || lp > 0 || math.IsInf(float64(lp), 0)) {
				t.Fatalf("log-probability %v of drawn token %d", lp, tok)
			}
			s.Accept(tok % 3)
		}
	})
}
