package abitest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	toolGrammarOnce sync.Once
	toolGrammar     func(m uintptr, tmpl, tools, name *byte, out *uintptr) int32
)

func cstrOrNil(s string) *byte {
	if s == "\x00" {
		return nil
	}
	b := append([]byte(s), 0)
	return &b[0]
}

// newToolGrammar calls moonlm_grammar_for_tool_calls ("\x00" for NULL).
func newToolGrammar(t testing.TB, l *Lib, m uintptr, tmpl, tools, name string) (uintptr, int32, string) {
	toolGrammarOnce.Do(func() { registerLibFunc(l, &toolGrammar, "moonlm_grammar_for_tool_calls") })
	return grammarCall(t, l, func(out *uintptr) int32 {
		return toolGrammar(m, cstrOrNil(tmpl), cstrOrNil(tools), cstrOrNil(name), out)
	})
}

const abiTools = `[
 {"type": "function", "function": {"name": "get_weather", "parameters": {
   "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"$ref": "#/$defs/unit"}},
   "required": ["city", "unit"], "additionalProperties": false,
   "$defs": {"unit": {"enum": ["c", "f"]}}}}},
 {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}
]`

// Every completed sample at temperature 1.5 is one Hermes call of a listed
// function whose arguments fit its schema; a named tool is always that one.
func TestGrammarForToolCalls(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	for _, only := range []string{"\x00", "get_weather"} {
		g, st, msg := newToolGrammar(t, l, m, "chatml", abiTools, only)
		require.Equal(t, OK, st, msg)
		complete := 0
		for seed := uint64(1); seed <= 6; seed++ {
			s := newSession(t, l, m, 512, 0)
			r, rec, st, msg := generateWithGrammar(t, l, s, hotSampler(t, l, seed), g, []int32{info.BOS}, 200, nil)
			require.Equal(t, OK, st, msg)
			if r.FinishReason == FinishLength {
				continue
			}
			complete++
			text := rec.text.String()
			body, ok := strings.CutPrefix(text, "<tool_call>\n")
			require.True(t, ok, "%q", text)
			body, ok = strings.CutSuffix(body, "\n</tool_call>")
			require.True(t, ok, "%q", text)
			var call struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &call), "%q", text)
			if only != "\x00" {
				assert.Equal(t, only, call.Name)
			}
			var args map[string]string
			require.NoError(t, json.Unmarshal(call.Arguments, &args), "%q", text)
			switch call.Name {
			case "get_weather":
				assert.Contains(t, []string{"c", "f"}, args["unit"], text)
				assert.Len(t, args, 2, text)
			case "now":
				assert.Empty(t, args, text)
			default:
				t.Errorf("unknown function in %q", text)
			}
		}
		assert.Positive(t, complete, "some samples complete within 200 tokens")
	}

	for _, bad := range []struct {
		tools, name string
		want        int32
		why         string
	}{
		{abiTools, "later", InvalidArg, "a name the tools lack"},
		{`[]`, "\x00", InvalidArg, "no tools"},
		{`{"type": "function"`, "\x00", InvalidArg, "not JSON"},
		{"\x00", "\x00", InvalidArg, "NULL tools"},
	} {
		_, st, msg := newToolGrammar(t, l, m, "chatml", bad.tools, bad.name)
		assert.Equal(t, bad.want, st, "%s: %s", bad.why, msg)
		assert.Contains(t, msg, "moonlm_grammar_for_tool_calls", bad.why)
	}
}
