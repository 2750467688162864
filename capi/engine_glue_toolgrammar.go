package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/grammar"
)

// errUnsupportedf is a MOONLM_UNSUPPORTED error.
func errUnsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{engine.ErrUnsupported}, args...)...)
}

// The text around a call's JSON in the Hermes format, as the templates
// and ApplyTools write it.
const (
	hermesCallOpen  = "<tool_call>\n"
	hermesCallClose = "\n</tool_call>"
)

func (e engineModel) ToolCallGrammar(name string, tools []byte, only string) (backendGrammar, error) {
	f, err := e.m.ToolCallFormat(name)
	if err != nil {
		return nil, err
	}
	if f != chat.ToolFormatHermes {
		return nil, errUnsupportedf("tool-call grammars cover the hermes format; this template writes calls in the %s format", f)
	}
	return bindGrammar(e, func() (*grammar.Grammar, error) {
		src, err := grammar.ToolCall(tools, only, hermesCallOpen, hermesCallClose)
		if err != nil {
			return nil, err
		}
		return grammar.Parse(src)
	})
}
