package engine

import (
	"regexp"
	"testing"

	"github.com/moonlm/moonlm/engine/grammar"
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func grammarMatcher(t *testing.T, m *Model, src string) *grammar.Matcher {
	t.Helper()
	g, err := grammar.Parse(src)
	require.NoError(t, err)
	mt, err := m.GrammarMatcher(g)
	require.NoError(t, err)
	return mt
}

// A grammar that allows one string yields exactly it at a high
// temperature, and generation ends where the grammar does.
func TestGenerateGrammarOneString(t *testing.T) {
	m := openStories(t, 1)
	mt := grammarMatcher(t, m, `root ::= " Once upon a time, " [0-9] [0-9] " cats"`)
	re := regexp.MustCompile(`^ Once upon a time, [0-9]{2} cats$`)
	for seed := uint64(0); seed < 6; seed++ {
		mt.Reset()
		s := newStoriesSession(t, m, 128)
		var c collect
		res, err := s.Generate([]int32{1}, GenerateParams{
			Sampler:    sample.Params{Temperature: 1.5, Seed: seed},
			Constraint: mt,
		}, c.piece)
		require.NoError(t, err)
		assert.Equal(t, FinishEOG, res.Finish)
		assert.Regexp(t, re, c.text())
		assert.True(t, mt.CanEnd())
	}
}

// A grammar with a repetition: every sample parses, and ends only where the
// grammar can (an EOG token is allowed exactly there).
func TestGenerateGrammarList(t *testing.T) {
	m := openStories(t, 1)
	mt := grammarMatcher(t, m, `root ::= "[" num ("," num)* "]"
num ::= [0-9] [0-9]?`)
	re := regexp.MustCompile(`^\[[0-9]{1,2}(,[0-9]{1,2})*\]$`)
	prefix := regexp.MustCompile(`^\[([0-9]{1,2},)*[0-9]{0,2}$`)
	ended := 0
	closing := pieceTokens(t, m, "]")[0]
	for seed := uint64(0); seed < 8; seed++ {
		mt.Reset()
		s := newStoriesSession(t, m, 256)
		var c collect
		res, err := s.Generate([]int32{1}, GenerateParams{
			MaxTokens:  200,
			Sampler:    sample.Params{Temperature: 1.5, Seed: seed, LogitBias: map[int32]float32{closing: 12}},
			Constraint: mt,
		}, c.piece)
		require.NoError(t, err)
		if res.Finish == FinishLength {
			assert.Regexp(t, prefix, c.text(), "seed %d: an open list", seed)
			continue
		}
		assert.Equal(t, FinishEOG, res.Finish)
		assert.Regexp(t, re, c.text(), "seed %d", seed)
		ended++
	}
	assert.Positive(t, ended, "some lists end (\"]\" is favoured)")
}
