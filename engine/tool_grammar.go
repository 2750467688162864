package engine

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/grammar"
)

// ToolCallGrammar compiles the grammar of a reply that calls tools in
// format f (see ToolCallFormat): one call, or with parallel one or more
// where the format can write several (not harmony, whose call ends the
// message), each of a function of tools (only the one named only, if not
// "") with arguments valid against its parameters schema. Every output it
// admits is read back by chat.ParseToolCalls(f, ...), also when the
// detokenizer drops the format's control tokens. Bad tools are
// ErrInvalidArgument.
func (m *Model) ToolCallGrammar(f chat.ToolFormat, tools []byte, only string, parallel bool) (*grammar.Grammar, error) {
	syn, ok := toolCallSyntax(f, m.specialRef)
	if !ok {
		return nil, fmt.Errorf("engine: tool call grammar: %w: no call syntax for format %q", ErrInvalidArgument, f)
	}
	if f == chat.ToolFormatHarmony {
		parallel = false
	}
	src, err := grammar.ToolCalls(tools, only, syn, parallel)
	if err != nil {
		return nil, fmt.Errorf("engine: %w: %w", ErrInvalidArgument, err)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("engine: tool call grammar: %w: %w", ErrInvalidArgument, err)
	}
	return g, nil
}

// toolCallSyntax is how format f writes calls; ref turns a marker's text
// into GBNF (the token, if the vocabulary has it as one, else the text).
func toolCallSyntax(f chat.ToolFormat, ref func(text string) string) (grammar.CallSyntax, bool) {
	lit := grammar.GBNFLiteral
	switch f {
	case chat.ToolFormatHermes, chat.ToolFormatGemma:
		// Gemma's template has no tool syntax: it is told the Hermes form.
		return grammar.CallSyntax{Open: lit("<tool_call>\n"), Close: lit("\n</tool_call>"), Sep: lit("\n")}, true
	case chat.ToolFormatLlama3:
		// Llama 3.1-3.3's JSON tool calling: a bare object per call.
		return grammar.CallSyntax{ArgsKey: "parameters", Sep: lit("\n")}, true
	case chat.ToolFormatMistral:
		return grammar.CallSyntax{Before: ref("[TOOL_CALLS]") + " " + lit("["), After: lit("]"), Sep: lit(", ")}, true
	case chat.ToolFormatPhi4:
		return grammar.CallSyntax{
			Before: ref("<|tool_call|>") + " " + lit("["), After: lit("]") + " " + ref("<|/tool_call|>"), Sep: lit(", "),
		}, true
	case chat.ToolFormatQwenXML:
		return grammar.CallSyntax{
			NameOutside: true, XMLParams: true, Sep: lit("\n"),
			Open: lit("<tool_call>\n<function="), NameAfter: lit(">\n"), Close: lit("</function>\n</tool_call>"),
		}, true
	case chat.ToolFormatGemma4:
		return grammar.CallSyntax{
			NameOutside: true, Gemma4Args: true, Quote: ref(`<|"|>`),
			Open: ref("<|tool_call>") + " " + lit("call:"), NameAfter: lit("{"), Close: lit("}") + " " + ref("<tool_call|>"),
		}, true
	case chat.ToolFormatHarmony:
		return grammar.CallSyntax{
			NameOutside: true,
			Open:        ref("<|channel|>") + " " + lit("commentary to=functions."),
			NameAfter:   lit(" ") + " " + ref("<|constrain|>") + " " + lit("json") + " " + ref("<|message|>"),
		}, true
	}
	return grammar.CallSyntax{}, false
}

// specialRef is the GBNF of a marker: a reference to the token whose text
// it is (a control token renders as nothing, so only a reference can make
// the model write it), else the text as a literal.
func (m *Model) specialRef(text string) string {
	ids, err := m.tok.Encode(text, false, true)
	if err == nil && len(ids) == 1 && string(m.tok.PieceSpecial(ids[0])) == text {
		return fmt.Sprintf("<[%d]>", ids[0])
	}
	return grammar.GBNFLiteral(text)
}
