package grammar

import (
	"bytes"
	"errors"
	"fmt"
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
	var alts [][]byte
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
		base := fmt.Sprintf("#/anyOf/%d/properties/arguments", len(alts))
		ps := []byte(`{"type": "object"}`)
		if params != nil && params.Kind != jsonread.Null {
			ps = appendRebased(nil, *params, base, false)
		}
		var b bytes.Buffer
		b.WriteString(`{"type": "object", "properties": {"name": {"const": `)
		b.Write(jsonread.AppendQuoted(nil, name.Text, false))
		b.WriteString(`}, "arguments": `)
		b.Write(ps)
		b.WriteString(`}, "required": ["name", "arguments"], "additionalProperties": false}`)
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
	src, err := FromJSONSchema(schema)
	if err != nil {
		return "", fmt.Errorf("tool call grammar: %w", err)
	}
	// The schema's root becomes a rule of a free name under the new root.
	call := "tool-call"
	for i := 2; strings.Contains(src, "\n"+call+" ::= "); i++ {
		call = "tool-call-" + strconv.Itoa(i)
	}
	body, ok := strings.CutPrefix(src, "root ::= ")
	if !ok {
		return "", errors.New("tool call grammar: the converted schema has no root rule first")
	}
	return "root ::= " + gbnfLiteral(prefix) + " " + call + " " + gbnfLiteral(suffix) + "\n" + call + " ::= " + body, nil
}

// gbnfLiteral is s as a GBNF string literal ("" for nothing).
func gbnfLiteral(s string) string {
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
