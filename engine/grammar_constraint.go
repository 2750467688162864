package engine

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/grammar"
)

// GrammarMatcher prepares g for generating with this model: the matcher is
// a sample.Constraint for GenerateParams.Constraint (Reset it before each
// generation). A token reference the vocabulary lacks is
// ErrInvalidArgument.
func (m *Model) GrammarMatcher(g *grammar.Grammar) (*grammar.Matcher, error) {
	mt, err := grammar.NewMatcher(g, m.tok)
	if err != nil {
		return nil, fmt.Errorf("engine: %w: %w", ErrInvalidArgument, err)
	}
	return mt, nil
}
