package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/grammar"
)

// errUnsupportedf is a MOONLM_UNSUPPORTED error.
func errUnsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{engine.ErrUnsupported}, args...)...)
}

func (e engineModel) ToolCallGrammar(name string, tools []byte, only string, parallel bool) (backendGrammar, error) {
	f, err := e.m.ToolCallFormat(name)
	if err != nil {
		return nil, err
	}
	return bindGrammar(e, func() (*grammar.Grammar, error) {
		return e.m.ToolCallGrammar(f, tools, only, parallel)
	})
}
