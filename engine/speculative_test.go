package engine

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/moonlm/moonlm/engine/sample"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedDrafter proposes the same tokens every time (mostly wrong ones), so
// the rejection and cache-rewinding paths run at every step.
type fixedDrafter struct{ toks []int32 }

func (f fixedDrafter) Draft(_, dst []int32) (int, error) { return copy(dst, f.toks), nil }

// oracleDrafter proposes the tokens of a known continuation: the tokens
// of want after the part of it already in hist.
type oracleDrafter struct {
	prompt int
	want   []int32
}

func (o oracleDrafter) Draft(hist, dst []int32) (int, error) {
	done := len(hist) - o.prompt
	if done < 0 || done > len(o.want) {
		return 0, nil
	}
	return copy(dst, o.want[done:]), nil
}

func generateTokens(t *testing.T, s *Session, prompt []int32, p GenerateParams) GenerateResult {
	t.Helper()
	res, err := s.Generate(prompt, p, nil)
	require.NoError(t, err)
	return res
}

// Greedy speculative decoding yields the tokens of plain decoding, with
// every drafter, and leaves the cache holding the same sequence.
func TestSpeculativeGreedyMatchesPlain(t *testing.T) {
	m := openStories(t, 2)
	prompt := storiesPrompt(t, m)
	prompt = append(prompt, prompt[1:]...) // something for n-gram lookup to find
	plainS := newStoriesSession(t, m, 512)
	plain := generateTokens(t, plainS, prompt, GenerateParams{MaxTokens: 120})
	require.Len(t, plain.Generated, 120)
	plainHist, err := plainS.Tokens()
	require.NoError(t, err)

	draftS := newStoriesSession(t, m, 512)
	md, err := NewModelDrafter(m, draftS)
	require.NoError(t, err)
	wrong := pieceTokens(t, m, " the", " a", ".")
	cases := []struct {
		name string
		d    Drafter
		k    int
	}{
		{"lookup", DefaultPromptLookup(), 0},
		{"lookup-1", &PromptLookup{MinN: 1, MaxN: 1}, 3},
		{"model", md, 4},
		{"wrong", fixedDrafter{wrong}, 3},
		{"oracle", oracleDrafter{len(prompt), plain.Generated}, 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStoriesSession(t, m, 512)
			res := generateTokens(t, s, prompt, GenerateParams{MaxTokens: 120, Draft: c.d, DraftTokens: c.k})
			assert.Equal(t, plain.Generated, res.Generated)
			assert.Equal(t, FinishLength, res.Finish)
			assert.LessOrEqual(t, res.DraftAccepted, res.Drafted)
			hist, err := s.Tokens()
			require.NoError(t, err)
			assert.Equal(t, plainHist, hist, "the cache holds the prompt and every generated token but the last")
			t.Logf("%s: drafted %d, accepted %d", c.name, res.Drafted, res.DraftAccepted)
			switch c.name {
			case "oracle":
				assert.Equal(t, res.Drafted, res.DraftAccepted, "a perfect drafter has every guess kept")
				assert.Greater(t, res.Drafted, 100)
			case "wrong":
				assert.Positive(t, res.Drafted)
			default:
				assert.Positive(t, res.DraftAccepted)
			}
		})
	}
}

// DecodeLast, stop strings and the context end behave as without drafts.
func TestSpeculativeEnds(t *testing.T) {
	m := openStories(t, 1)
	prompt := storiesPrompt(t, m)
	run := func(p GenerateParams, nCtx int) (GenerateResult, []int32, string) {
		s := newStoriesSession(t, m, nCtx)
		var c collect
		res, err := s.Generate(prompt, p, c.piece)
		require.NoError(t, err)
		hist, err := s.Tokens()
		require.NoError(t, err)
		return res, hist, c.text()
	}
	for _, p := range []GenerateParams{
		{MaxTokens: 30, DecodeLast: true},
		{MaxTokens: 200, Stop: []string{"Lily"}},
		{MaxTokens: 200, Stop: []string{"Lily"}, DecodeLast: true},
		{},
	} {
		nCtx := 512
		if p.MaxTokens == 0 {
			nCtx = len(prompt) + 40 // ends at the context
		}
		want, wantHist, wantText := run(p, nCtx)
		draftS := newStoriesSession(t, m, 512)
		md, err := NewModelDrafter(m, draftS)
		require.NoError(t, err)
		p.Draft, p.DraftTokens = md, 6
		got, gotHist, gotText := run(p, nCtx)
		assert.Equal(t, want.Finish, got.Finish)
		assert.Equal(t, want.Generated, got.Generated)
		assert.Equal(t, want.LastTokenCached, got.LastTokenCached)
		assert.Equal(t, wantHist, gotHist)
		assert.Equal(t, wantText, gotText)
		assert.Positive(t, got.DraftAccepted)
	}
}

// Sampling with drafts follows the model's distribution: the tokens at
// the first positions, over many seeds, are distributed as without drafts
// (a chi-square test of homogeneity at the 0.1% level per position). The
// draft model is the model itself, greedy, so guesses are often kept and
// often rejected.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	m := openStories(t, 1)
	prompt := storiesPrompt(t, m)
	const runs, positions = 1000, 4
	count := func(draft bool, seed0 uint64) []map[int32]int {
		counts := make([]map[int32]int, positions)
		for i := range counts {
			counts[i] = map[int32]int{}
		}
		s := newStoriesSession(t, m, 256)
		var p GenerateParams
		if draft {
			ds := newStoriesSession(t, m, 256)
			md, err := NewModelDrafter(m, ds)
			require.NoError(t, err)
			p.Draft, p.DraftTokens = md, 3
		}
		accepted := 0
		for r := range runs {
			require.NoError(t, s.Rewind(0))
			p.MaxTokens = positions
			p.Sampler = sample.Params{Temperature: 1, Seed: seed0 + uint64(r)}
			res := generateTokens(t, s, prompt, p)
			require.Len(t, res.Generated, positions)
			for i, tok := range res.Generated {
				counts[i][tok]++
			}
			accepted += res.DraftAccepted
		}
		if draft {
			assert.Greater(t, accepted, runs/2, "guesses are kept")
		}
		return counts
	}
	plain, spec := count(false, 1), count(true, 1_000_000)
	for i := range positions {
		stat, df := chiSquareHomogeneity(plain[i], spec[i])
		crit := chiSquareCritical(df)
		t.Logf("position %d: chi2 %.1f, df %d, 0.1%% critical %.1f", i, stat, df, crit)
		assert.Less(t, stat, crit, "position %d", i)
	}
	// The test can fail: a sampler that ignores its draws is caught.
	biased := count(false, 1)
	for k := range biased[1] {
		biased[1][k] = 0
	}
	biased[1][plainTop(plain[1])] = runs
	stat, df := chiSquareHomogeneity(plain[1], biased[1])
	assert.Greater(t, stat, chiSquareCritical(df))
}

func plainTop(c map[int32]int) int32 {
	best, n := int32(-1), -1
	for k, v := range c {
		if v > n || v == n && k < best {
			best, n = k, v
		}
	}
	return best
}

// chiSquareHomogeneity compares two samples' counts over categories,
// pooling categories expected fewer than 5 times into one.
func chiSquareHomogeneity(a, b map[int32]int) (float64, int) {
	na, nb := 0, 0
	for _, v := range a {
		na += v
	}
	for _, v := range b {
		nb += v
	}
	type cell struct{ a, b int }
	var cells []cell
	var rare cell
	keys := map[int32]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		c := cell{a[k], b[k]}
		if float64(c.a+c.b)*float64(min(na, nb))/float64(na+nb) < 5 {
			rare.a += c.a
			rare.b += c.b
			continue
		}
		cells = append(cells, c)
	}
	if rare.a+rare.b > 0 {
		cells = append(cells, rare)
	}
	n := float64(na + nb)
	stat := 0.0
	for _, c := range cells {
		tot := float64(c.a + c.b)
		ea, eb := tot*float64(na)/n, tot*float64(nb)/n
		stat += (float64(c.a)-ea)*(float64(c.a)-ea)/ea + (float64(c.b)-eb)*(float64(c.b)-eb)/eb
	}
	return stat, max(len(cells)-1, 1)
}

// chiSquareCritical is the chi-square quantile at 0.999 for df degrees of
// freedom (Wilson-Hilferty).
func chiSquareCritical(df int) float64 {
	const z = 3.0902 // the normal quantile at 0.999
	k := float64(df)
	h := 2 / (9 * k)
	return k * math.Pow(1-h+z*math.Sqrt(h), 3)
}

// A draft model with another vocabulary is refused, saying why.
func TestModelDrafterRefusesOtherVocabulary(t *testing.T) {
	m := openStories(t, 1)
	other, err := Open(smolLM2Path(t), ModelParams{Kernels: testKernels(t)})
	require.NoError(t, err)
	defer other.Close()
	ds, err := other.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer ds.Close()
	_, err = NewModelDrafter(m, ds)
	require.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "vocabularies differ")
}

// Prompt lookup finds the latest earlier occurrence of the longest suffix.
func TestPromptLookupDraft(t *testing.T) {
	dst := make([]int32, 4)
	p := DefaultPromptLookup()
	n, err := p.Draft([]int32{1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3}, dst)
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 8, 5, 1}, dst[:n], "the latest 3-gram match")
	n, _ = p.Draft([]int32{5, 6, 7, 8}, dst)
	assert.Zero(t, n, "no repeat, no draft")
	n, _ = (&PromptLookup{MinN: 1, MaxN: 1}).Draft([]int32{4, 6, 4}, dst)
	assert.Equal(t, []int32{6, 4}, dst[:n])
}

// Speculative generation allocates nothing per token.
func TestSpeculativeNoAllocsPerToken(t *testing.T) {
	m := openStories(t, 1)
	prompt := storiesPrompt(t, m)
	s := newStoriesSession(t, m, 512)
	ds := newStoriesSession(t, m, 512)
	md, err := NewModelDrafter(m, ds)
	require.NoError(t, err)
	for _, d := range []Drafter{DefaultPromptLookup(), md} {
		run := func(tokens int) float64 {
			return testing.AllocsPerRun(5, func() {
				require.NoError(t, s.Rewind(0))
				res, err := s.Generate(prompt, GenerateParams{MaxTokens: tokens, Draft: d, DraftTokens: 5}, nil)
				if err != nil || res.Tokens != tokens {
					t.Fatalf("generate: %v, %d tokens", err, res.Tokens)
				}
			})
		}
		run(80)
		assert.Equal(t, run(10), run(80), "allocations per call with 10 and 80 tokens (%T)", d)
	}
}

// On the real quantized models, greedy decoding with prompt-lookup drafts
// yields the tokens of plain decoding on the benchmark prompts
// (docs/bench): the batched verification pass computes each token's
// logits exactly as a one-token decode does (batch-invariant products), so
// no near-tie can flip between the two.
func TestSpeculativeRealModelsMatchPlain(t *testing.T) {
	cases := []struct{ name, path, prompt string }{
		{"smollm2-code", smolLM2Path(t), "spec-code.txt"},
		{"smollm2-summary", smolLM2Path(t), "spec-summary.txt"},
		{"gemma3-code", gemma3Path(t), "spec-code.gemma.txt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("..", "docs", "bench", c.prompt))
			require.NoError(t, err)
			m, err := Open(c.path, ModelParams{Kernels: testKernels(t)})
			require.NoError(t, err)
			defer m.Close()
			prompt, err := m.Tokenize(string(text), true, true)
			require.NoError(t, err)
			run := func(d Drafter) GenerateResult {
				s, err := m.NewSession(SessionParams{NCtx: 1024})
				require.NoError(t, err)
				defer s.Close()
				return generateTokens(t, s, prompt, GenerateParams{MaxTokens: 160, Draft: d})
			}
			plain := run(nil)
			spec := run(DefaultPromptLookup())
			require.NotEmpty(t, plain.Generated)
			assert.Equal(t, plain.Generated, spec.Generated)
			assert.Positive(t, spec.DraftAccepted, "the prompts are built for lookup to find copies")
			t.Logf("%d tokens, drafted %d, accepted %d", len(spec.Generated), spec.Drafted, spec.DraftAccepted)
		})
	}
}
