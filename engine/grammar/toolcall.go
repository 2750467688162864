package grammar

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine/internal/jsonread"
)

// MaxTools bounds the functions a tool-call grammar chooses among.
const MaxTools = 1024

// ToolCall returns GBNF for one tool call written as a JSON object
// {"name": NAME, "arguments": ARGS} between prefix and suffix (the Hermes
// form is prefix "<tool_call>\n", suffix "\n</tool_call>"), where NAME is
// one of the functions in tools (OpenAI's list of {"type": "function",
// "function": {"name", "parameters"}}) and ARGS validates against that
// function's parameters schema. A non-empty only restricts the call to the
// function of that name. Each parameters schema keeps its own local $refs
// (they are rebased onto the combined document); the schema features are
// those of FromJSONSchema.
func ToolCall(tools []byte, only, prefix, suffix string) (string, error) {
	return ToolCalls(tools, only, CallSyntax{Open: GBNFLiteral(prefix), Close: GBNFLiteral(suffix)}, false)
}

// CallSyntax is how a model family writes tool calls, as GBNF pieces (a
// literal such as "\"<tool_call>\"", a token reference such as "<[12]>",
// or a sequence of them; "" for nothing).
type CallSyntax struct {
	// Before and After surround all the calls of a reply; Sep goes
	// between two calls.
	Before, After, Sep string
	// Open and Close surround each call.
	Open, Close string
	// NameOutside writes a call as Open NameBefore NAME NameAfter ARGS
	// Close (NAME bare, ARGS the arguments object); otherwise a call is
	// the JSON object {"name": NAME, ArgsKey: ARGS}.
	NameOutside           bool
	NameBefore, NameAfter string
	// ArgsKey is the arguments' key in a JSON call ("" means "arguments").
	ArgsKey string
}

// ToolCalls returns GBNF for a reply that is one tool call in syntax syn,
// or with parallel one or more, each a call of one of the functions in
// tools (only the one named only, if not "") whose arguments validate
// against its parameters schema (as ToolCall).
func ToolCalls(tools []byte, only string, syn CallSyntax, parallel bool) (string, error) {
	list, err := jsonread.Decode(tools, maxRebaseDepth)
	if err != nil {
		return "", fmt.Errorf("tool call grammar: tools: %w", err)
	}
	if list.Kind != jsonread.Array {
		return "", errors.New("tool call grammar: tools is not a JSON array")
	}
	if len(list.Items) > MaxTools {
		return "", fmt.Errorf("tool call grammar: %d tools; at most %d", len(list.Items), MaxTools)
	}
	argsKey := syn.ArgsKey
	if argsKey == "" {
		argsKey = "arguments"
	}
	var alts [][]byte
	var names []string
	for i, t := range list.Items {
		typ, fn := member(t, "type"), member(t, "function")
		var name, params *jsonread.Value
		if fn != nil {
			name, params = member(*fn, "name"), member(*fn, "parameters")
		}
		if name == nil || name.Kind != jsonread.String || name.Text == "" {
			return "", fmt.Errorf("tool call grammar: tools[%d] has no function name", i)
		}
		if typ != nil && (typ.Kind != jsonread.String || typ.Text != "function") {
			return "", fmt.Errorf("tool call grammar: tools[%d] has type %s; only \"function\" is supported", i, describe(*typ))
		}
		if only != "" && name.Text != only {
			continue
		}
		base := fmt.Sprintf("#/anyOf/%d", len(alts))
		if !syn.NameOutside {
			base += "/properties/" + argsKey
		}
		ps := []byte(`{"type": "object"}`)
		if params != nil && params.Kind != jsonread.Null {
			ps = appendRebased(nil, *params, base, false)
		}
		names = append(names, name.Text)
		if syn.NameOutside {
			alts = append(alts, ps)
			continue
		}
		var b bytes.Buffer
		b.WriteString(`{"type": "object", "properties": {"name": {"const": `)
		b.Write(jsonread.AppendQuoted(nil, name.Text, false))
		b.WriteString(`}, `)
		b.Write(jsonread.AppendQuoted(nil, argsKey, false))
		b.WriteString(`: `)
		b.Write(ps)
		b.WriteString(`}, "required": ["name", `)
		b.Write(jsonread.AppendQuoted(nil, argsKey, false))
		b.WriteString(`], "additionalProperties": false}`)
		alts = append(alts, b.Bytes())
	}
	if len(alts) == 0 {
		if only != "" {
			return "", fmt.Errorf("tool call grammar: no tool named %q", only)
		}
		return "", errors.New("tool call grammar: no tools")
	}
	schema := append([]byte(`{"anyOf": [`), bytes.Join(alts, []byte(", "))...)
	schema = append(schema, "]}"...)
	src, err := callRules(schema, names, syn, parallel)
	if err != nil {
		return "", fmt.Errorf("tool call grammar: %w", err)
	}
	return src, nil
}

// callRules converts each alternative of schema's anyOf (the call object
// or, with NameOutside, the arguments of the function names[i]) into a
// rule of its own, and writes the root: the calls in syn.
func callRules(schema []byte, names []string, syn CallSyntax, parallel bool) (string, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("json schema: %w", err)
	}
	c := &schemaConverter{doc: doc, rules: map[string]string{}, refs: map[string]string{}}
	anyOf, _ := doc.(*object).get("anyOf")
	items := anyOf.([]any)
	// The rule names below are free: the converter's names are those of
	// the schema's paths ("tool-call-N..." cannot be one: it has no such
	// property) and its primitives.
	calls := make([]string, len(items))
	for i, it := range items {
		rule, err := c.visit(it, fmt.Sprintf("tool-call-%d", i), fmt.Sprintf("#/anyOf/%d", i))
		if err != nil {
			return "", fmt.Errorf("json schema: %w", err)
		}
		body := rule
		if syn.NameOutside {
			body = seq(syn.NameBefore, GBNFLiteral(names[i]), syn.NameAfter, rule)
		}
		calls[i] = "( " + seq(syn.Open, body, syn.Close) + " )"
	}
	call := strings.Join(calls, " | ")
	root := seq(syn.Before, "tool-calls-one", syn.After)
	if parallel {
		root = seq(syn.Before, "tool-calls-one", "( "+seq(syn.Sep, "tool-calls-one")+" )*", syn.After)
	}
	var b strings.Builder
	b.WriteString("root ::= " + root + "\n")
	b.WriteString("tool-calls-one ::= " + call + "\n")
	ruleNames := make([]string, 0, len(c.rules))
	for n := range c.rules {
		ruleNames = append(ruleNames, n)
	}
	sort.Strings(ruleNames)
	for _, n := range ruleNames {
		if n == "root" || n == "tool-calls-one" {
			return "", fmt.Errorf("the converted schema has a rule named %s", n)
		}
		b.WriteString(n + " ::= " + c.rules[n] + "\n")
	}
	if b.Len() > MaxSourceBytes {
		return "", fmt.Errorf("the grammar would be %d bytes, more than %d", b.Len(), MaxSourceBytes)
	}
	return b.String(), nil
}

// seq joins the non-empty GBNF pieces with spaces ("" + "" is "\"\"").
func seq(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return `""`
	}
	return strings.Join(out, " ")
}

// GBNFLiteral is s as a GBNF string literal ("" for the empty string).
func GBNFLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// member is the value of key in object v, or nil (also when v is not an
// object; the last of a repeated key, as JSON parsers commonly take).
func member(v jsonread.Value, key string) *jsonread.Value {
	if v.Kind != jsonread.Object {
		return nil
	}
	var m *jsonread.Value
	for i, k := range v.Keys {
		if k == key {
			m = &v.Items[i]
		}
	}
	return m
}

// describe names a JSON value for a message.
func describe(v jsonread.Value) string {
	if v.Kind == jsonread.String {
		return strconv.Quote(v.Text)
	}
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[v.Kind]
}

// maxRebaseDepth bounds the nesting of the tools' JSON.
const maxRebaseDepth = 256

// appendRebased appends v as JSON text in the same key order, with every
// local "$ref" ("#" or "#/...") moved under base (a JSON pointer fragment
// of where v sits in a larger document). isRef says v is the value of a
// "$ref" key (a string there is rewritten; an object or array, as under a
// property named "$ref", is copied as any other).
func appendRebased(b []byte, v jsonread.Value, base string, isRef bool) []byte {
	switch v.Kind {
	case jsonread.Null:
		return append(b, "null"...)
	case jsonread.Bool:
		return strconv.AppendBool(b, v.Bool)
	case jsonread.Number:
		return append(b, v.Text...)
	case jsonread.String:
		s := v.Text
		if isRef && (s == "#" || strings.HasPrefix(s, "#/")) {
			s = base + s[1:]
		}
		return jsonread.AppendQuoted(b, s, false)
	case jsonread.Array:
		b = append(b, '[')
		for i, it := range v.Items {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendRebased(b, it, base, false)
		}
		return append(b, ']')
	}
	b = append(b, '{')
	for i, it := range v.Items {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = jsonread.AppendQuoted(b, v.Keys[i], false)
		b = append(b, ": "...)
		b = appendRebased(b, it, base, v.Keys[i] == "$ref")
	}
	return append(b, '}')
}
