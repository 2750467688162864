package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/engine/sample"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seqConstraint allows exactly the tokens of seq, in order, then is done.
type seqConstraint struct {
	seq []int32
	pos int
}

func (c *seqConstraint) Mask(l []float32) {
	for i := range l {
		if c.pos >= len(c.seq) || int32(i) != c.seq[c.pos] {
			l[i] = float32(math.Inf(-1))
		}
	}
}

func (c *seqConstraint) Accept(tok int32) error {
	if c.pos >= len(c.seq) || tok != c.seq[c.pos] {
		return fmt.Errorf("token %d not allowed at %d", tok, c.pos)
	}
	c.pos++
	return nil
}

func (c *seqConstraint) CanEnd() bool { return c.pos == len(c.seq) }
func (c *seqConstraint) Done() bool   { return c.pos == len(c.seq) }

// setConstraint allows the tokens of set, any number of times, and may end
// after minLen tokens; it is never done.
type setConstraint struct {
	set    []int32
	minLen int
	n      int
}

func (c *setConstraint) Mask(l []float32) {
	for i := range l {
		if !slices.Contains(c.set, int32(i)) {
			l[i] = float32(math.Inf(-1))
		}
	}
}

func (c *setConstraint) Accept(tok int32) error {
	if !slices.Contains(c.set, tok) {
		return errors.New("not in the set")
	}
	c.n++
	return nil
}

func (c *setConstraint) CanEnd() bool { return c.n >= c.minLen }
func (c *setConstraint) Done() bool   { return false }

// A constraint that allows one string yields exactly it, whatever the
// sampler, and generation ends there (FinishEOG).
func TestGenerateConstraintOneString(t *testing.T) {
	m := openStories(t, 1)
	want := pieceTokens(t, m, " Once", " up", "on", " a")
	for seed := uint64(0); seed < 5; seed++ {
		s := newStoriesSession(t, m, 128)
		var c collect
		res, err := s.Generate([]int32{1}, GenerateParams{
			Sampler:    sample.Params{Temperature: 1.5, Seed: seed},
			Constraint: &seqConstraint{seq: want},
		}, c.piece)
		require.NoError(t, err)
		assert.Equal(t, FinishEOG, res.Finish)
		assert.Equal(t, want, res.Generated)
		assert.Equal(t, " Once upon a", c.text())
	}
	// A constraint done from the start generates nothing.
	s := newStoriesSession(t, m, 128)
	res, err := s.Generate([]int32{1}, GenerateParams{Constraint: &seqConstraint{}}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Zero(t, res.Tokens)
}

// An end-of-generation token is allowed exactly where the constraint can
// end: a sampler that wants EOS above all gets it only then.
func TestGenerateConstraintCanEnd(t *testing.T) {
	m := openStories(t, 1)
	eos := m.Info().EOS
	set := pieceTokens(t, m, " a", " b", " c")
	set = append(set, eos) // Mask allowing EOS must not matter before CanEnd
	s := newStoriesSession(t, m, 128)
	res, err := s.Generate([]int32{1}, GenerateParams{
		Sampler:    sample.Params{Temperature: 1, Seed: 3, LogitBias: map[int32]float32{eos: 50}},
		Constraint: &setConstraint{set: set, minLen: 3},
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Len(t, res.Generated, 3, "EOS as soon as the constraint can end")
	for _, tok := range res.Generated {
		assert.Contains(t, set[:3], tok)
	}
	// A constraint whose Mask leaves EOS out still ends where it can.
	s2 := newStoriesSession(t, m, 128)
	res, err = s2.Generate([]int32{1}, GenerateParams{
		Sampler:    sample.Params{LogitBias: map[int32]float32{eos: 50}},
		Constraint: &setConstraint{set: set[:3], minLen: 2},
	}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Len(t, res.Generated, 2)
}

func TestGenerateConstraintDeadEnd(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 128)
	tok := pieceTokens(t, m, " a")[0]
	// The logit bias bans the only token the constraint allows.
	_, err := s.Generate([]int32{1}, GenerateParams{
		Sampler:    sample.Params{LogitBias: map[int32]float32{tok: float32(math.Inf(-1))}},
		Constraint: &seqConstraint{seq: []int32{tok}},
	}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "allows no token")
	// Also when the fallback token (0) is one the constraint allows.
	s2 := newStoriesSession(t, m, 128)
	_, err = s2.Generate([]int32{1}, GenerateParams{
		Sampler:    sample.Params{LogitBias: map[int32]float32{0: float32(math.Inf(-1)), tok: float32(math.Inf(-1))}},
		Constraint: &setConstraint{set: []int32{0, tok}, minLen: 5},
	}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// recorder keeps a copy of the logits each Sample saw; with inner set it
// is also a LogprobSource through it.
type recorder struct {
	inner *sample.Sampler
	seen  [][]float32
}

func (r *recorder) Sample(l []float32) int32 {
	r.seen = append(r.seen, slices.Clone(l))
	return r.inner.Sample(l)
}
func (r *recorder) Accept(tok int32) { r.inner.Accept(tok) }

type recorderLP struct{ *recorder }

func (r recorderLP) Logprobs(tok int32, top []sample.TokenLogprob) (float32, int) {
	return r.inner.Logprobs(tok, top)
}

type lpCall struct {
	tok int32
	lp  float32
	top []sample.TokenLogprob
}

// directLogSoftmax is log_softmax written out with the math package.
func directLogSoftmax(l []float32) []float64 {
	mx := math.Inf(-1)
	for _, x := range l {
		mx = math.Max(mx, float64(x))
	}
	sum := 0.0
	for _, x := range l {
		sum += math.Exp(float64(x) - mx)
	}
	out := make([]float64, len(l))
	for i, x := range l {
		out[i] = float64(x) - mx - math.Log(sum)
	}
	return out
}

func checkLogprobs(t *testing.T, calls []lpCall, logits [][]float32, generated []int32, nTop int) {
	t.Helper()
	require.Len(t, calls, len(generated))
	for i, c := range calls {
		require.Equal(t, generated[i], c.tok)
		want := directLogSoftmax(logits[i])
		assert.InDelta(t, want[c.tok], float64(c.lp), 1e-4, "token %d", i)
		require.Len(t, c.top, nTop)
		order := make([]int, len(want))
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case want[a] > want[b]:
				return -1
			case want[a] < want[b]:
				return 1
			}
			return 0
		})
		for j, alt := range c.top {
			assert.Equal(t, int32(order[j]), alt.Token, "token %d rank %d", i, j)
			assert.InDelta(t, want[order[j]], float64(alt.Logprob), 1e-4)
		}
	}
}

// Log-probabilities: log_softmax of the logits the sampler saw after the
// constraint's mask, with the logit bias, before top-k and temperature.
func TestGenerateLogprobs(t *testing.T) {
	m := openStories(t, 1)
	allowed := pieceTokens(t, m, " a", " b", " c", " the", " up", "on")
	bias := map[int32]float32{allowed[1]: 2, allowed[2]: float32(math.Inf(-1))}
	params := sample.Params{Temperature: 0.7, TopK: 2, Seed: 5, LogitBias: bias}

	// A sampler that is no LogprobSource: the engine's log_softmax of the
	// masked logits.
	inner, err := sample.New(params)
	require.NoError(t, err)
	rec := &recorder{inner: inner}
	var calls []lpCall
	onLP := func(tok int32, lp float32, top []sample.TokenLogprob) {
		calls = append(calls, lpCall{tok, lp, slices.Clone(top)})
	}
	s := newStoriesSession(t, m, 128)
	res, err := s.Generate([]int32{1}, GenerateParams{MaxTokens: 12, TokenSampler: rec, Constraint: &setConstraint{set: allowed, minLen: 100},
		OnLogprobs: onLP, TopLogprobs: 4}, nil)
	require.NoError(t, err)
	checkLogprobs(t, calls, rec.seen, res.Generated, 4)

	// *sample.Sampler's own: the same logits plus the bias.
	inner, err = sample.New(params)
	require.NoError(t, err)
	rec = &recorder{inner: inner}
	calls = nil
	s = newStoriesSession(t, m, 128)
	res, err = s.Generate([]int32{1}, GenerateParams{MaxTokens: 12, TokenSampler: recorderLP{rec}, Constraint: &setConstraint{set: allowed, minLen: 100},
		OnLogprobs: onLP, TopLogprobs: 5}, nil)
	require.NoError(t, err)
	biased := make([][]float32, len(rec.seen))
	for i, l := range rec.seen {
		biased[i] = slices.Clone(l)
		for id, b := range bias {
			biased[i][id] += b
		}
	}
	checkLogprobs(t, calls, biased, res.Generated, 5)
	for _, c := range calls {
		for _, alt := range c.top {
			assert.NotEqual(t, allowed[2], alt.Token, "a banned token is no alternative")
		}
	}

	// Out of range.
	_, err = s.Generate([]int32{1}, GenerateParams{TopLogprobs: sample.MaxTopLogprobs + 1}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// With a constraint, logprobs and every sampler stage, a longer generation
// allocates no more than a shorter one.
func TestGenerateConstraintLogprobsNoAllocsPerToken(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 128)
	smp, err := sample.New(sample.Params{Temperature: 0.9, TopK: 40, TypicalP: 0.95, TopP: 0.95, MinP: 0.01,
		XTCProbability: 0.2, XTCThreshold: 0.1, RepeatPenalty: 1.1, PenaltyLastN: 64,
		DRYMultiplier: 0.8, DRYBase: 1.75, DRYAllowedLength: 2, DRYPenaltyLastN: -1,
		DRYSequenceBreakers: sample.DefaultDRYSequenceBreakers(), Seed: 1})
	require.NoError(t, err)
	var set []int32
	for id := int32(3); id < 300; id++ {
		if !m.IsEOG(id) {
			set = append(set, id)
		}
	}
	cons := &setConstraint{set: set, minLen: 1 << 30}
	lps := 0
	onLP := func(int32, float32, []sample.TokenLogprob) { lps++ }
	run := func(tokens int) float64 {
		return testing.AllocsPerRun(5, func() {
			require.NoError(t, s.Rewind(0))
			smp.Reset()
			res, err := s.Generate([]int32{1}, GenerateParams{MaxTokens: tokens, TokenSampler: smp, Constraint: cons,
				OnLogprobs: onLP, TopLogprobs: sample.MaxTopLogprobs}, nil)
			if err != nil || res.Tokens != tokens {
				t.Fatalf("generate: %v, %d tokens", err, res.Tokens)
			}
		})
	}
	run(60)
	short, long := run(10), run(60)
	assert.Equal(t, short, long, "allocations per call with 10 and 60 tokens")
	assert.Positive(t, lps)
}

// Generate gives a sampler the model's vocabulary, so DRY's breakers work
// without the caller's help, and a DRY penalty steers greedy decoding off
// a repeat.
func TestGenerateBindsVocabForDRY(t *testing.T) {
	m := openStories(t, 1)
	smp, err := sample.New(sample.Params{DRYMultiplier: 100, DRYBase: 1.75, DRYAllowedLength: 1, DRYPenaltyLastN: -1,
		DRYSequenceBreakers: []string{"\n", " upon"}})
	require.NoError(t, err)
	require.True(t, smp.NeedsVocab())
	s := newStoriesSession(t, m, 256)
	plain := newStoriesSession(t, m, 256)
	prompt := []int32{1}
	res, err := s.Generate(prompt, GenerateParams{MaxTokens: 60, TokenSampler: smp}, nil)
	require.NoError(t, err)
	assert.False(t, smp.NeedsVocab(), "Generate resolved the breakers")
	ref, err := plain.Generate(prompt, GenerateParams{MaxTokens: 60}, nil)
	require.NoError(t, err)
	// Greedy decoding of this model repeats phrases within 60 tokens; a
	// heavy DRY penalty changes the text.
	assert.NotEqual(t, ref.Generated, res.Generated)
}

// Every Generate call makes no new resolution of DRY's breakers when a
// sampler with the same breakers resolved them on this model before: the
// model keeps one per breaker list.
func TestGenerateReusesDRYBreakers(t *testing.T) {
	m := openStories(t, 1)
	run := func(breakers ...string) {
		smp, err := sample.New(sample.Params{DRYMultiplier: 1, DRYBase: 1.75, DRYPenaltyLastN: -1, DRYSequenceBreakers: breakers})
		require.NoError(t, err)
		s := newStoriesSession(t, m, 64)
		_, err = s.Generate([]int32{1}, GenerateParams{MaxTokens: 4, TokenSampler: smp}, nil)
		require.NoError(t, err)
		require.False(t, smp.NeedsVocab())
	}
	run(sample.DefaultDRYSequenceBreakers()...)
	run(sample.DefaultDRYSequenceBreakers()...)
	assert.Equal(t, 1, m.dryBreakers.Len(), "the second sampler resolved its breakers again")
	run("\n")
	assert.Equal(t, 2, m.dryBreakers.Len())
}

// KeepSpecial renders a control token (here BOS, forced mid-text) as its
// text; by default it renders as nothing.
func TestGenerateKeepSpecial(t *testing.T) {
	m := openStories(t, 1)
	bos := m.Info().BOS
	seq := append(pieceTokens(t, m, " Once"), bos)
	seq = append(seq, pieceTokens(t, m, " up")...)
	for _, keep := range []bool{false, true} {
		s := newStoriesSession(t, m, 128)
		var c collect
		_, err := s.Generate([]int32{bos}, GenerateParams{Constraint: &seqConstraint{seq: seq}, KeepSpecial: keep}, c.piece)
		require.NoError(t, err)
		want := " Once up"
		if keep {
			want = " Once" + string(m.Tokenizer().PieceSpecial(bos)) + " up"
		}
		assert.Equal(t, want, c.text(), "keep %v", keep)
	}
}
