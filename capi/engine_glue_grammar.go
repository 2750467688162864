package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/grammar"
	"github.com/moonlm/moonlm/engine/sample"
)

// engineGrammar is a grammar matcher over an engine model's vocabulary.
type engineGrammar struct{ *grammar.Matcher }

// newGrammar parses GBNF text for m; a syntax error (with line:col) or a
// token the vocabulary lacks is engine.ErrInvalidArgument.
func newGrammar(m backendModel, src string) (backendGrammar, error) {
	return bindGrammar(m, func() (*grammar.Grammar, error) { return grammar.Parse(src) })
}

// newSchemaGrammar converts a JSON schema to a grammar for m; a schema that
// is not JSON or uses a feature the converter lacks is
// engine.ErrInvalidArgument.
func newSchemaGrammar(m backendModel, schema string) (backendGrammar, error) {
	return bindGrammar(m, func() (*grammar.Grammar, error) { return grammar.CompileJSONSchema([]byte(schema)) })
}

func bindGrammar(m backendModel, compile func() (*grammar.Grammar, error)) (backendGrammar, error) {
	em, ok := m.(engineModel)
	if !ok {
		return nil, fmt.Errorf("%w: grammars need an engine model", engine.ErrUnsupported)
	}
	g, err := compile()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", engine.ErrInvalidArgument, err)
	}
	mt, err := em.m.GrammarMatcher(g)
	if err != nil {
		return nil, err
	}
	return engineGrammar{mt}, nil
}

// grammarConstraint starts g from its beginning and returns it as the
// engine's generation constraint.
func grammarConstraint(g backendGrammar) sample.Constraint {
	eg := g.(engineGrammar)
	eg.Reset()
	return eg.Matcher
}
