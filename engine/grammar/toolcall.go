package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	var list []struct {
		Type     string `json:"type"`
		Function *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(tools, &list); err != nil {
		return "", fmt.Errorf("tool call grammar: tools: %w", err)
	}
	if len(list) > MaxTools {
		return "", fmt.Errorf("tool call grammar: %d tools; at most %d", len(list), MaxTools)
	}
	var alts [][]byte
	for i, t := range list {
		if t.Function == nil || t.Function.Name == "" {
			return "", fmt.Errorf("tool call grammar: tools[%d] has no function name", i)
		}
		if t.Type != "" && t.Type != "function" {
			return "", fmt.Errorf("tool call grammar: tools[%d] has type %q; only \"function\" is supported", i, t.Type)
		}
		if only != "" && t.Function.Name != only {
			continue
		}
		base := fmt.Sprintf("#/anyOf/%d/properties/arguments", len(alts))
		params := []byte(`{"type": "object"}`)
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			var err error
			if params, err = rebaseRefs(p, base); err != nil {
				return "", fmt.Errorf("tool call grammar: tools[%d] (%s) parameters: %w", i, t.Function.Name, err)
			}
		}
		name, _ := json.Marshal(t.Function.Name)
		var b bytes.Buffer
		b.WriteString(`{"type": "object", "properties": {"name": {"const": `)
		b.Write(name)
		b.WriteString(`}, "arguments": `)
		b.Write(params)
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

// rebaseRefs re-encodes the JSON text p in the same key order, with every
// local "$ref" ("#" or "#/...") moved under base (a JSON pointer fragment
// of where p sits in a larger document).
func rebaseRefs(p []byte, base string) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var out bytes.Buffer
	if err := rebaseValue(d, &out, base, 0, false); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return out.Bytes(), nil
}

const maxRebaseDepth = 256

// rebaseValue copies one value; isRef says it is the value of a "$ref" key
// (a string there is rewritten; an object or array, as under a property
// named "$ref", is copied as any other).
func rebaseValue(d *json.Decoder, out *bytes.Buffer, base string, depth int, isRef bool) error {
	if depth > maxRebaseDepth {
		return fmt.Errorf("nested deeper than %d", maxRebaseDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			out.WriteByte('{')
			for n := 0; d.More(); n++ {
				k, err := d.Token()
				if err != nil {
					return err
				}
				key, _ := k.(string)
				if n > 0 {
					out.WriteString(", ")
				}
				kb, _ := json.Marshal(key)
				out.Write(kb)
				out.WriteString(": ")
				if err := rebaseValue(d, out, base, depth+1, key == "$ref"); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil {
				return err
			}
			out.WriteByte('}')
		case '[':
			out.WriteByte('[')
			for n := 0; d.More(); n++ {
				if n > 0 {
					out.WriteString(", ")
				}
				if err := rebaseValue(d, out, base, depth+1, false); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil {
				return err
			}
			out.WriteByte(']')
		default:
			return fmt.Errorf("unexpected %v", t)
		}
	default:
		if s, ok := t.(string); ok && isRef && (s == "#" || strings.HasPrefix(s, "#/")) {
			t = base + s[1:]
		}
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		out.Write(b)
	}
	return nil
}
