package grammar

import (
	"strings"
	"testing"
)

const weatherTools = `[
 {"type": "function", "function": {"name": "get_weather", "parameters": {
   "type": "object",
   "properties": {"city": {"type": "string"}, "unit": {"$ref": "#/$defs/unit"}},
   "required": ["city", "unit"],
   "$defs": {"unit": {"enum": ["c", "f"]}}}}},
 {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
]`

func TestToolCallAcceptsValidCallsOnly(t *testing.T) {
	src, err := ToolCall([]byte(weatherTools), "", "<tool_call>\n", "\n</tool_call>")
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	ok := []string{
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
	}
	bad := []string{
		"{\"name\": \"now\", \"arguments\": {}}",
		"<tool_call>\n{\"name\": \"later\", \"arguments\": {}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"k\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
	}
	for _, s := range ok {
		if !completeOK(g, s) {
			t.Errorf("refused %q\n%s", s, src)
		}
	}
	for _, s := range bad {
		if completeOK(g, s) {
			t.Errorf("accepted %q", s)
		}
	}
	named, err := ToolCall([]byte(weatherTools), "now", "<tool_call>\n", "\n</tool_call>")
	if err != nil {
		t.Fatal(err)
	}
	gn, err := Parse(named)
	if err != nil {
		t.Fatal(err)
	}
	if !completeOK(gn, ok[1]) || completeOK(gn, ok[0]) {
		t.Errorf("the named tool's grammar does not admit only that tool:\n%s", named)
	}
}

func TestToolCallErrors(t *testing.T) {
	for _, c := range []struct{ tools, only, want string }{
		{`{}`, "", "tools"},
		{`[]`, "", "no tools"},
		{weatherTools, "later", `no tool named "later"`},
		{`[{"type": "function", "function": {}}]`, "", "no function name"},
		{`[{"type": "retrieval", "function": {"name": "x"}}]`, "", "only \"function\""},
		{`[{"function": {"name": "x", "parameters": {"type": "object", "frobnicate": 1}}}]`, "", "frobnicate"},
	} {
		_, err := ToolCall([]byte(c.tools), c.only, "", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ToolCall(%s, %q): error %v, want one containing %q", c.tools, c.only, err, c.want)
		}
	}
}

// $refs move with their schema; a property named "$ref" is a property.
func TestToolCallRebasesRefs(t *testing.T) {
	tools := `[{"type": "function", "function": {"name": "f", "parameters": {
	  "type": "object", "properties": {"$ref": {"type": "integer"}, "self": {"$ref": "#/$defs/s"}},
	  "required": ["$ref", "self"], "additionalProperties": false,
	  "$defs": {"s": {"enum": ["a"]}}}}}]`
	src, err := ToolCall([]byte(tools), "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	if !completeOK(g, `{"name": "f", "arguments": {"$ref": 5, "self": "a"}}`) {
		t.Errorf("refused a valid call\n%s", src)
	}
	if completeOK(g, `{"name": "f", "arguments": {"$ref": 5, "self": "b"}}`) {
		t.Errorf("accepted a value the $ref excludes\n%s", src)
	}
}

// The XML parameter form (Qwen3-Coder): one block per parameter in the
// schema's order, required ones present, string values raw, others JSON.
func TestToolCallsXMLParams(t *testing.T) {
	tools := `[{"type": "function", "function": {"name": "f", "parameters": {
	  "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"$ref": "#/$defs/u"},
	    "n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
	  "required": ["city", "n"], "$defs": {"u": {"enum": ["c", "f"]}}}}},
	  {"type": "function", "function": {"name": "now"}}]`
	syn := CallSyntax{NameOutside: true, XMLParams: true, Open: GBNFLiteral("<tool_call>\n<function="),
		NameAfter: GBNFLiteral(">\n"), Close: GBNFLiteral("</function>\n</tool_call>"), Sep: GBNFLiteral("\n")}
	src, err := ToolCalls([]byte(tools), "", syn, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	call := func(params string) string {
		return "<tool_call>\n<function=f>\n" + params + "</function>\n</tool_call>"
	}
	p := func(name, v string) string { return "<parameter=" + name + ">\n" + v + "\n</parameter>\n" }
	ok := []string{
		call(p("city", "New York") + p("n", "3")),
		call(p("city", "Oslo") + p("unit", "c") + p("n", "-2") + p("tags", `["a", "b"]`)),
		call(p("city", "Oslo")+p("n", "1")) + "\n<tool_call>\n<function=now>\n</function>\n</tool_call>",
	}
	bad := []string{
		call(p("city", "Oslo")),                                // n is required
		call(p("n", "3") + p("city", "Oslo")),                  // out of order
		call(p("city", "Oslo") + p("unit", "k") + p("n", "1")), // not in the enum
		call(p("city", "Amsterdam") + p("n", "1")),             // longer than maxLength
		call(p("city", "42") + p("n", "1")),                    // would read back as a number
		call(p("city", "a<b") + p("n", "1")),                   // "<" ends the value
		call(p("city", "Oslo") + p("n", "1.5")),                // not an integer
		call(p("city", "Oslo") + p("n", "1") + p("x", "1")),    // no such parameter
	}
	checkComplete(t, g, src, ok, bad)
}

// Gemma 4's argument syntax: sorted keys, required ones present, strings
// between quote markers that do not start like a number.
func TestToolCallsGemma4Args(t *testing.T) {
	tools := `[{"type": "function", "function": {"name": "f", "parameters": {
	  "type": "object", "properties": {"unit": {"$ref": "#/$defs/u"}, "city": {"type": "string", "maxLength": 8},
	    "n": {"type": "integer"}, "opts": {"type": "object"}},
	  "required": ["n", "unit"], "$defs": {"u": {"enum": ["c", "f"]}}}}}]`
	q := GBNFLiteral(`<|"|>`)
	syn := CallSyntax{NameOutside: true, Gemma4Args: true, Quote: q, Open: GBNFLiteral("<|tool_call>call:"),
		NameAfter: GBNFLiteral("{"), Close: GBNFLiteral("}<tool_call|>")}
	src, err := ToolCalls([]byte(tools), "", syn, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	call := func(args string) string { return "<|tool_call>call:f{" + args + "}<tool_call|>" }
	ok := []string{
		call(`n:3,unit:<|"|>c<|"|>`),
		call(`city:<|"|>Oslo<|"|>,n:-2,opts:{a:<|"|>x<|"|>,b:[1,true]},unit:<|"|>f<|"|>`),
		call(`n:1,unit:<|"|>c<|"|>`) + call(`city:<|"|>Rome<|"|>,n:0,unit:<|"|>c<|"|>`),
	}
	bad := []string{
		call(`n:3`),                  // unit is required
		call(`unit:<|"|>c<|"|>,n:3`), // not sorted
		call(`n:3,unit:<|"|>k<|"|>`), // not in the enum
		call(`city:<|"|>Amsterdam<|"|>,n:3,unit:<|"|>c<|"|>`), // longer than maxLength
		call(`city:<|"|>42<|"|>,n:3,unit:<|"|>c<|"|>`),        // would read as a number unquoted
		call(`city:<|"|>a,b<|"|>,n:3,unit:<|"|>c<|"|>`),       // "," ends a bare value
		call(`,n:3,unit:<|"|>c<|"|>`),
		call(`n:1.5,unit:<|"|>c<|"|>`),
	}
	checkComplete(t, g, src, ok, bad)
}

// checkComplete checks that grammar g (made from src) completes on every
// string of ok and on none of bad.
func checkComplete(t *testing.T, g *Grammar, src string, ok, bad []string) {
	t.Helper()
	for _, s := range ok {
		if !completeOK(g, s) {
			t.Errorf("refused %q\n%s", s, src)
		}
	}
	for _, s := range bad {
		if completeOK(g, s) {
			t.Errorf("accepted %q\n%s", s, src)
		}
	}
}
