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
	// XMLParams (with NameOutside) writes the arguments as one
	// <parameter=PNAME>\nVALUE\n</parameter>\n block per parameter, in the
	// schema's property order, each required one present (the Qwen3-Coder
	// form). VALUE is raw text for a parameter of type string (see
	// rawString), else JSON valid against the parameter's schema.
	XMLParams bool
	// Gemma4Args (with NameOutside) writes the arguments as Gemma 4 does,
	// key:VALUE joined by "," in sorted key order, required ones present
	// (see gemma4Args); Quote is the GBNF of its string delimiter.
	Gemma4Args bool
	Quote      string
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
		var rule string
		switch {
		case syn.XMLParams:
			rule, err = xmlParams(c, it, i)
		case syn.Gemma4Args:
			rule, err = gemma4Args(c, it, i, syn.Quote)
		default:
			rule, err = c.visit(it, fmt.Sprintf("tool-call-%d", i), fmt.Sprintf("#/anyOf/%d", i))
		}
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

// xmlParams is the GBNF of the parameter blocks of the i-th function,
// whose parameters schema is params (an object schema; its properties are
// the parameters, each optional unless listed in required).
func xmlParams(c *schemaConverter, params any, i int) (string, error) {
	obj, ok := params.(*object)
	if !ok {
		return "", fmt.Errorf("#/anyOf/%d: the parameters schema must be an object", i)
	}
	props, required, err := paramsOf(obj, i)
	if err != nil || props == nil {
		return "", err
	}
	var parts []string
	for k, name := range props.keys {
		path := fmt.Sprintf("#/anyOf/%d/properties/%s", i, name)
		rule := fmt.Sprintf("tool-call-%d-param-%d", i, k)
		value, isRaw, err := rawString(c, props.vals[name], rule)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		if !isRaw {
			if value, err = c.visit(props.vals[name], rule, path); err != nil {
				return "", err
			}
		}
		block := "( " + seq(GBNFLiteral("<parameter="+name+">\n"), value, GBNFLiteral("\n</parameter>\n")) + " )"
		if !required[name] {
			block += "?"
		}
		parts = append(parts, block)
	}
	return seq(parts...), nil
}

// rawString is the GBNF of a string parameter's value written as raw text,
// for a schema (after local $refs) that is {"type": "string"} with
// minLength and maxLength at most, or an enum or const of strings: text
// without "<" (it would start the closing tag) whose first character
// cannot start a JSON value (a quote, digit, minus sign, bracket or brace)
// and is not white space, so that the parser, which reads a value that is
// JSON text as JSON, reads it back as this string. Other schemas are
// false: their values are written as JSON. (A string that is exactly
// true, false, null, True, False or None still reads back as that value.)
func rawString(c *schemaConverter, s any, name string) (string, bool, error) {
	obj, err := c.resolveShallow(s, name)
	if err != nil {
		return "", false, nil // visit reports it
	}
	var words []string
	for _, k := range obj.keys {
		switch v := obj.vals[k]; {
		case annotationKeywords[k], k == "minLength", k == "maxLength":
		case k == "type":
			if v != "string" {
				return "", false, nil
			}
		case k == "const":
			w, ok := v.(string)
			if !ok {
				return "", false, nil
			}
			words = append(words, w)
		case k == "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return "", false, nil
			}
			for _, it := range list {
				w, ok := it.(string)
				if !ok {
					return "", false, nil
				}
				words = append(words, w)
			}
		default:
			return "", false, nil
		}
	}
	if t, _ := obj.get("type"); t != "string" && words == nil {
		return "", false, nil
	}
	if words != nil {
		_, hasMin := obj.vals["minLength"]
		_, hasMax := obj.vals["maxLength"]
		if hasMin || hasMax {
			return "", false, nil
		}
		alts := make([]string, len(words))
		for i, w := range words {
			if !rawSafe(w) {
				return "", false, nil
			}
			alts[i] = GBNFLiteral(w)
		}
		return c.addRule(name, strings.Join(alts, " | ")), true, nil
	}
	lo, err := count(obj, "minLength", name, 0)
	if err != nil {
		return "", false, err
	}
	hi, err := count(obj, "maxLength", name, -1)
	if err != nil {
		return "", false, err
	}
	if hi >= 0 && hi < lo {
		return "", false, fmt.Errorf("maxLength %d below minLength %d", hi, lo)
	}
	if hi == 0 {
		return c.addRule(name, `""`), true, nil
	}
	restLo, restHi := 0, -1
	if lo > 0 {
		restLo = lo - 1
	}
	if hi > 0 {
		restHi = hi - 1
	}
	body := seq(`[^<"{[0-9\- \t\r\n]`, repeat(`[^<]`, restLo, restHi))
	if lo == 0 {
		body = "( " + body + " )?"
	}
	return c.addRule(name, body), true, nil
}

// rawSafe says the raw text w reads back as the string w (see rawString).
func rawSafe(w string) bool {
	switch w {
	case "", "true", "false", "null", "True", "False", "None":
		return false
	}
	return !strings.ContainsRune(w, '<') && !strings.ContainsRune("\"{[0123456789- \t\r\n", rune(w[0])) &&
		strings.TrimRight(w, " \t\r\n") == w
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
