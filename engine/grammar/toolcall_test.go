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
