package engine

import (
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// collect records what a generation streams: the calls, in order.
type collect struct {
	texts  []string
	tokens []int32
	stopAt int // return false on this call (1-based); 0: never
}

func (c *collect) piece(text []byte, tok int32) bool {
	c.texts = append(c.texts, string(text))
	c.tokens = append(c.tokens, tok)
	return c.stopAt == 0 || len(c.texts) < c.stopAt
}

func (c *collect) text() string { return strings.Join(c.texts, "") }

// scripted is a TokenSampler that ignores the logits and returns its
// script, then end-of-sequence.
type scripted struct {
	script   []int32
	eos      int32
	accepted []int32
	i        int
}

func (s *scripted) Sample([]float32) int32 {
	if s.i < len(s.script) {
		s.i++
		return s.script[s.i-1]
	}
	return s.eos
}

func (s *scripted) Accept(t int32) { s.accepted = append(s.accepted, t) }

// pieceTokens maps each text to a token whose piece it is exactly.
func pieceTokens(t *testing.T, m *Model, texts ...string) []int32 {
	t.Helper()
	out := make([]int32, len(texts))
	for i, s := range texts {
		found := false
		for id := int32(0); int(id) < m.Info().VocabSize; id++ {
			if string(m.TokenPiece(id)) == s && !m.IsEOG(id) {
				out[i], found = id, true
				break
			}
		}
		require.True(t, found, "no token has the piece %q", s)
	}
	return out
}

func byteTokens(t *testing.T, m *Model, s string) []int32 {
	var parts []string
	for i := 0; i < len(s); i++ {
		parts = append(parts, s[i:i+1])
	}
	return pieceTokens(t, m, parts...)
}

func newStoriesSession(t *testing.T, m *Model, nCtx int) *Session {
	s, err := m.NewSession(SessionParams{NCtx: nCtx})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestGenerateGreedyGolden(t *testing.T) {
	m := openStories(t, 2)
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	s := newStoriesSession(t, m, 512)
	var c collect
	res, err := s.Generate([]int32{m.Info().BOS}, GenerateParams{MaxTokens: 100}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishLength, res.Finish)
	assert.Equal(t, "length", res.Finish.String())
	assert.Equal(t, 1, res.PromptTokens)
	assert.Equal(t, 100, res.Tokens)
	assert.Len(t, res.Generated, 100)
	assert.Equal(t, res.Generated, c.tokens[:100], "one call per generated token, in order")
	assert.False(t, res.LastTokenCached)
	assert.Equal(t, res.Generated[99], res.LastToken)
	assert.Equal(t, 1+99, s.Pos(), "all generated tokens but the last are cached")
	text := strings.TrimPrefix(c.text(), " ")
	assert.True(t, strings.HasPrefix(string(golden), text), "generated %q", text)
	assert.Equal(t, m.Detokenize(append([]int32{m.Info().BOS}, res.Generated...)), c.text())
}

func TestGenerateDecodeLast(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 512)
	res, err := s.Generate([]int32{m.Info().BOS}, GenerateParams{MaxTokens: 20, DecodeLast: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishLength, res.Finish)
	assert.True(t, res.LastTokenCached)
	assert.Equal(t, 1+20, s.Pos(), "every generated token is cached")
}

func TestGenerateStopStringFromModel(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 512)
	var c collect
	res, err := s.Generate([]int32{1}, GenerateParams{MaxTokens: 200, Stop: []string{"Lily"}}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishStop, res.Finish)
	assert.Equal(t, " Once upon a time, there was a little girl named ", c.text())
	assert.Equal(t, res.Generated, c.tokens, "no final call after a stop")
}

func TestGenerateCallbackStops(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 512)
	c := collect{stopAt: 3}
	res, err := s.Generate([]int32{1}, GenerateParams{}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishCancelled, res.Finish)
	assert.Len(t, c.texts, 3)
	assert.Equal(t, 3, res.Tokens)
	assert.Equal(t, 1+2, s.Pos())
}

func TestGenerateEOG(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	sc := &scripted{script: pieceTokens(t, m, " Once", " upon"), eos: m.Info().EOS}
	var c collect
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Equal(t, "eog", res.Finish.String())
	assert.Equal(t, sc.script, res.Generated, "the end-of-generation token is not part of the result")
	assert.Equal(t, sc.script, c.tokens)
	assert.Equal(t, []int32{1, sc.script[0], sc.script[1]}, sc.accepted, "prompt and generated tokens accepted, EOS not")
	assert.Equal(t, " Once upon", c.text())
	assert.Equal(t, 1+2, s.Pos(), "the last text token is decoded before EOS is sampled")
}

func TestGenerateStopStringSplitAcrossTokens(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	sc := &scripted{script: pieceTokens(t, m, " Once", " up", "on", " a"), eos: m.Info().EOS}
	var c collect
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc, Stop: []string{"upon"}}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishStop, res.Finish)
	assert.Equal(t, []string{" Once", " ", ""}, c.texts, "\" up\" may start the stop string: \"up\" is held back, then dropped")
	assert.Equal(t, sc.script[:3], res.Generated)
}

func TestGenerateStopStringAtStart(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	sc := &scripted{script: pieceTokens(t, m, " Once", " upon"), eos: m.Info().EOS}
	var c collect
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc, Stop: []string{" On"}}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishStop, res.Finish)
	assert.Equal(t, []string{""}, c.texts)
	assert.Equal(t, 1, res.Tokens)
}

func TestGenerateMultiByteSplitAcrossTokens(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	text := "é🦙!"
	sc := &scripted{script: byteTokens(t, m, text), eos: m.Info().EOS}
	var c collect
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Equal(t, []string{"", "é", "", "", "", "🦙", "!"}, c.texts)
	for _, p := range c.texts {
		assert.True(t, utf8.ValidString(p), "%q", p)
	}
}

func TestGenerateStopStringWithMultiByteStart(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	sc := &scripted{script: byteTokens(t, m, "aéb"), eos: m.Info().EOS}
	var c collect
	// "é" and "éx" share the lead byte; the stop string never completes.
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc, Stop: []string{"éx"}}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, FinishEOG, res.Finish)
	assert.Equal(t, []string{"a", "", "", "éb"}, c.texts)
}

func TestGenerateHoldbackReleasedAtEnd(t *testing.T) {
	m := openStories(t, 1)
	for _, tc := range []struct {
		name string
		p    GenerateParams
		eos  bool
		want FinishReason
	}{
		{"length", GenerateParams{MaxTokens: 2}, false, FinishLength},
		{"eog", GenerateParams{}, true, FinishEOG},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStoriesSession(t, m, 64)
			sc := &scripted{script: pieceTokens(t, m, " Once", " up"), eos: m.Info().EOS}
			p := tc.p
			p.TokenSampler, p.Stop = sc, []string{"upon"}
			var c collect
			res, err := s.Generate([]int32{1}, p, c.piece)
			require.NoError(t, err)
			assert.Equal(t, tc.want, res.Finish)
			assert.Equal(t, []string{" Once", " ", "up"}, c.texts)
			assert.Equal(t, []int32{sc.script[0], sc.script[1], -1}, c.tokens, "the held-back text comes with token -1")
		})
	}
	// An unfinished character is released as its bytes.
	s := newStoriesSession(t, m, 64)
	sc := &scripted{script: byteTokens(t, m, "a🦙"[:3]), eos: m.Info().EOS}
	var c collect
	_, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: sc}, c.piece)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "", "", "🦙"[:2]}, c.texts)
}

func TestGenerateContextFull(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 10)
	res, err := s.Generate([]int32{1, 403, 407}, GenerateParams{}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishContext, res.Finish)
	assert.Equal(t, 10, s.Pos())
	assert.Equal(t, 8, res.Tokens)
	_, err = s.Generate([]int32{1}, GenerateParams{}, nil)
	assert.ErrorIs(t, err, ErrContextFull)

	// With DecodeLast every counted token is cached; the token sampled into
	// a full context is dropped.
	s2 := newStoriesSession(t, m, 10)
	res, err = s2.Generate([]int32{1, 403, 407}, GenerateParams{DecodeLast: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishContext, res.Finish)
	assert.Equal(t, 7, res.Tokens)
	assert.Equal(t, 10, s2.Pos())
	assert.True(t, res.LastTokenCached)
}

func TestGenerateSeedReproducible(t *testing.T) {
	m := openStories(t, 1)
	run := func(seed uint64) []int32 {
		s := newStoriesSession(t, m, 256)
		res, err := s.Generate([]int32{1, 403}, GenerateParams{MaxTokens: 30, Sampler: sample.Params{Temperature: 1, TopK: 40, TopP: 0.95, Seed: seed}}, nil)
		require.NoError(t, err)
		return res.Generated
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c, "different seeds should (almost surely) differ over 30 tokens at temperature 1")
}

func TestGenerateInvalid(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 64)
	_, err := s.Generate(nil, GenerateParams{}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.Generate([]int32{1}, GenerateParams{MaxTokens: -1}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	res, err := s.Generate([]int32{1}, GenerateParams{TokenSampler: &scripted{script: []int32{1 << 20}}}, nil)
	assert.ErrorIs(t, err, ErrInternal)
	assert.Equal(t, FinishNone, res.Finish)
}

// TestGenerateNoAllocsPerToken: a longer generation allocates no more than
// a shorter one (the session's scratch is warm; the per-call allocations,
// such as the result's token slice, are the same).
func TestGenerateNoAllocsPerToken(t *testing.T) {
	m := openStories(t, 1)
	s := newStoriesSession(t, m, 128)
	smp, err := sample.New(sample.Params{})
	require.NoError(t, err)
	n := 0
	onPiece := func([]byte, int32) bool { n++; return true }
	run := func(tokens int) float64 {
		return testing.AllocsPerRun(5, func() {
			require.NoError(t, s.Rewind(0))
			res, err := s.Generate([]int32{1}, GenerateParams{MaxTokens: tokens, TokenSampler: smp, Stop: []string{"zzz", "Lily went to the moon"}}, onPiece)
			if err != nil || res.Tokens != tokens {
				t.Fatalf("generate: %v, %d tokens", err, res.Tokens)
			}
		})
	}
	run(60) // warm the scratch and the cache
	short, long := run(10), run(60)
	assert.Equal(t, short, long, "allocations per call with 10 and 60 tokens")
	assert.LessOrEqual(t, long, 8.0, "allocations per call (the stop strings, the result)")
	assert.Positive(t, n)
}

// TestGenerateCancelAndCloseWhileRunning cancels a generation from another
// goroutine, then closes a session while it generates. The first emitted
// piece waits until the cancel (or close) was issued, so the generation
// cannot finish first.
func TestGenerateCancelAndCloseWhileRunning(t *testing.T) {
	m := openStories(t, 2)
	s, err := m.NewSession(SessionParams{NCtx: 2048})
	require.NoError(t, err)
	run := func(seed uint64, issued func() bool) chan error {
		started := make(chan struct{})
		done := make(chan error, 1)
		first := true
		go func() {
			res, err := s.Generate([]int32{1}, GenerateParams{Sampler: sample.Params{Temperature: 1, Seed: seed}}, func([]byte, int32) bool {
				if first {
					first = false
					close(started)
					for !issued() {
						time.Sleep(50 * time.Microsecond)
					}
				}
				return true
			})
			if err != nil && res.Finish != FinishCancelled {
				t.Errorf("finish %v with %v", res.Finish, err)
			}
			done <- err
		}()
		<-started
		return done
	}

	done := run(1, func() bool { return s.cancel.Load() })
	s.Cancel()
	assert.ErrorIs(t, <-done, ErrCancelled)

	done = run(2, func() bool { return s.closed.Load() && s.cancel.Load() })
	s.Close() // cancels the running call and waits for it
	assert.ErrorIs(t, <-done, ErrCancelled)
	_, err = s.Generate([]int32{1}, GenerateParams{}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument, "a closed session refuses calls")
}
