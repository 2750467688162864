package main

/*
#include "moonlm.h"
*/
import "C"

// moonlm_grammar_for_tool_calls(_ex): a grammar that forces a tool call
// (or several) in the template's syntax (tool_choice "required" or a named tool). It is
// built here, in Go from the tools' JSON schemas with engine/grammar's
// converter, so every binding gets the same grammar from one call.

// toolGrammarModel is what a backend model offers for tool-call grammars.
type toolGrammarModel interface {
	// ToolCallGrammar compiles the grammar of one call (with parallel one
	// or more) of a function of tools (only the one named only, if not
	// ""), in the syntax of the template name ("" for the model's).
	ToolCallGrammar(name string, tools []byte, only string, parallel bool) (backendGrammar, error)
}

//export moonlmgo_grammar_for_tool_calls
func moonlmgo_grammar_for_tool_calls(cfn *C.char, mh C.uintptr_t, tmpl, tools, only *C.char, flags C.uint32_t, out *C.uintptr_t) (st C.int) {
	fn := C.GoString(cfn)
	defer guard(fn, &st)
	enter(fn)
	if unknown := uint32(flags) &^ C.MOONLM_TOOL_CALLS_PARALLEL; unknown != 0 {
		return fail(stInvalid, fn, "flags has unknown bits %#x", unknown)
	}
	parallel := flags&C.MOONLM_TOOL_CALLS_PARALLEL != 0
	if tools == nil {
		return fail(stInvalid, fn, "tools_json is NULL")
	}
	tl, st := cStringBounded(fn, "tools_json", tools)
	if st != stOK {
		return st
	}
	var name, tool string
	if tmpl != nil {
		name = C.GoString(tmpl)
	}
	if only != nil {
		b, st := cStringBounded(fn, "tool_name", only)
		if st != stOK {
			return st
		}
		tool = string(b)
	}
	return grammarNew(fn, "tools_json", mh, nil, 0, out, func(m backendModel, _ string) (backendGrammar, error) {
		tg, ok := m.(toolGrammarModel)
		if !ok {
			return nil, errUnsupportedf("this library's backend has no tool-call grammars")
		}
		return tg.ToolCallGrammar(name, tl, tool, parallel)
	})
}
