package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

type toolCases struct {
	Tools     json.RawMessage `json:"tools"`
	Templates map[string]struct {
		SHA256 string `json:"sha256"`
		BOS    string `json:"bos_token"`
		EOS    string `json:"eos_token"`
		Cases  []struct {
			Name     string          `json:"name"`
			Messages json.RawMessage `json:"messages"`
			Gen      bool            `json:"gen"`
			Out      *string         `json:"out"`
			Err      *string         `json:"err"`
		} `json:"cases"`
	} `json:"templates"`
}

func loadToolCases(t *testing.T) toolCases {
	raw, err := os.ReadFile("testdata/tools/tools_cases.json")
	require.NoError(t, err)
	var tc toolCases
	require.NoError(t, json.Unmarshal(raw, &tc))
	require.NotEmpty(t, tc.Templates)
	return tc
}

// toolTemplate reads a template of the tool cases: this folder's, or the
// shared test data's (skipping when that is absent).
func toolTemplate(t *testing.T, name string) string {
	p := filepath.Join("testdata", "tools", name+".jinja")
	if _, err := os.Stat(p); err != nil {
		p = shareddata.Path(t, "templates/"+name+".jinja")
	}
	src, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(src)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fixDate puts the reference's date (its strftime_now gives a fixed one)
// in place of today's, in the two formats the templates ask for.
func fixDate(s string) string {
	now := time.Now()
	s = strings.ReplaceAll(s, now.Format("2006-01-02"), "2026-01-02")
	return strings.ReplaceAll(s, now.Format("02 Jan 2006"), "02 Jan 2026")
}

// TestToolTemplatesMatchJinja renders conversations with tools, tool calls
// and tool results through the published templates that have tool syntax,
// messages and tools given as JSON, and compares with the reference Jinja2
// rendering (testdata/tools/gen_tools.py).
func TestToolTemplatesMatchJinja(t *testing.T) {
	tc := loadToolCases(t)
	for _, name := range sortedKeys(tc.Templates) {
		tmpl := tc.Templates[name]
		t.Run(name, func(t *testing.T) {
			src := toolTemplate(t, name)
			sum := sha256.Sum256([]byte(src))
			require.Equal(t, tmpl.SHA256, hex.EncodeToString(sum[:]), "template changed; rerun gen_tools.py")
			require.True(t, HasToolSyntax(src))
			for _, c := range tmpl.Cases {
				msgs, err := ParseMessagesJSON(c.Messages)
				require.NoError(t, err, c.Name)
				out, info, err := ApplyTools(src, msgs, JSON(tc.Tools), c.Gen, tmpl.BOS, tmpl.EOS)
				if c.Err != nil {
					require.Error(t, err, c.Name)
					require.Contains(t, err.Error(), *c.Err, c.Name)
					continue
				}
				require.NoError(t, err, c.Name)
				require.False(t, info.Fallback(), "%s: rendered by the %s fallback: %v", c.Name, info.Family, info.Err)
				out = fixDate(out)
				require.Equal(t, *c.Out, out, c.Name)
			}
		})
	}
}

var weatherTools = JSON(`[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
 {"type": "function", "function": {"name": "add", "description": "Adds numbers", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}]`)

// The ends of an assistant turn as the templates write them; the model
// stops at these, so the text it returns does not hold them.
var turnEnds = []string{"<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>", "<|end|>"}

func assistantText(full, prefix string) string {
	s := strings.TrimPrefix(full, prefix)
	for changed := true; changed; {
		changed = false
		t := strings.TrimRight(s, "\n")
		for _, e := range turnEnds {
			if strings.HasSuffix(t, e) {
				s, changed = strings.TrimSuffix(t, e), true
			}
		}
	}
	return s
}

// roundTrip renders calls as the assistant's turn with the template (or
// the built-in family), takes the text the model would have generated, and
// parses it back with the format chosen for the template.
func roundTrip(t *testing.T, src, family string, calls []ToolCall, content string) Parsed {
	t.Helper()
	head := []Message{{Role: "system", Content: "Be helpful."}, {Role: "user", Content: "Weather in Paris and 2+3?"}}
	if ToolFormatOf(src) == ToolFormatMistral {
		// Mistral's templates put the system message into the last user
		// turn only: the prompt and the history differ there.
		head = head[1:]
	}
	full := append(append([]Message{}, head...), Message{Role: "assistant", Content: content, ToolCalls: calls})
	render := func(msgs []Message, gen bool) string {
		var out string
		var err error
		if family != "" {
			out, err = RenderFamilyTools(family, msgs, weatherTools, gen, "<s>", "</s>")
		} else {
			var info Info
			out, info, err = ApplyTools(src, msgs, weatherTools, gen, "<s>", "</s>")
			require.False(t, info.Fallback(), "fallback: %v", info.Err)
		}
		require.NoError(t, err)
		return out
	}
	prefix, whole := render(head, true), render(full, false)
	require.True(t, strings.HasPrefix(whole, prefix), "the prompt is not a prefix of the conversation:\n%q\n%q", prefix, whole)
	f := ToolFormatHermes
	if family == "" {
		f = ToolFormatOf(src)
	}
	return ParseToolCalls(f, assistantText(whole, prefix))
}

// requireCalls checks the calls came back; their ids too where the format
// writes them (Mistral's), else the parser's own nine-character ones.
func requireCalls(t *testing.T, want []ToolCall, got Parsed) {
	t.Helper()
	require.Empty(t, got.Err)
	require.Len(t, got.Calls, len(want), "%+v", got)
	for i, w := range want {
		require.Equal(t, w.Name, got.Calls[i].Name)
		require.JSONEq(t, w.Arguments, got.Calls[i].Arguments)
		if got.Format == ToolFormatMistral {
			require.Equal(t, w.ID, got.Calls[i].ID)
		} else {
			require.Equal(t, callID(i), got.Calls[i].ID)
		}
	}
}

// TestToolCallRoundTrip: per family, a call rendered by the family's real
// template comes back from ParseToolCalls as the same call.
func TestToolCallRoundTrip(t *testing.T) {
	one := []ToolCall{{ID: "call00007", Name: "get_weather", Arguments: `{"city": "Paris"}`}}
	two := []ToolCall{one[0], {ID: "call00008", Name: "add", Arguments: `{"a": 2, "b": 3.5}`}}
	cases := []struct {
		template string
		format   ToolFormat
		parallel bool // the template renders more than one call
		content  bool // the template renders content beside calls
	}{
		{"qwen2.5", ToolFormatHermes, true, true},
		{"qwen3", ToolFormatHermes, true, true},
		{"hermes3", ToolFormatHermes, true, false},
		{"llama3.1", ToolFormatLlama3, false, false},
		{"llama3.2", ToolFormatLlama3, false, false},
		{"mistral-nemo", ToolFormatMistral, true, false},
		{"mistral-small-3.2", ToolFormatMistral, true, false},
		{"gpt-oss", ToolFormatHarmony, false, false},
		// Qwen3-Coder's and Qwen 3.5's XML parameters.
		{"qwen3-coder", ToolFormatQwenXML, true, true},
		{"qwen3.5", ToolFormatQwenXML, true, true},
		// Phi-4-mini's published template: tools on the system message.
		{"phi4-mini", ToolFormatPhi4, true, true},
		// Templates without tool syntax: Hermes tags through the template.
		{"gemma3", ToolFormatGemma, true, true},
		{"llama3", ToolFormatHermes, true, true},
	}
	for _, c := range cases {
		t.Run(c.template, func(t *testing.T) {
			src := toolTemplate(t, c.template)
			require.Equal(t, c.format, ToolFormatOf(src))
			requireCalls(t, one, roundTrip(t, src, "", one, ""))
			if c.parallel {
				requireCalls(t, two, roundTrip(t, src, "", two, ""))
			}
			if c.content {
				p := roundTrip(t, src, "", one, "Let me check.")
				requireCalls(t, one, p)
				// A thinking model's content keeps its (here empty) think block.
				require.True(t, strings.HasSuffix(p.Content, "Let me check."), p.Content)
				require.NotContains(t, p.Content, "tool_call")
			}
		})
	}
	for _, fam := range Families() {
		t.Run("family "+fam, func(t *testing.T) {
			requireCalls(t, two, roundTrip(t, "", fam, two, ""))
			p := roundTrip(t, "", fam, one, "Checking.")
			requireCalls(t, one, p)
			require.Equal(t, "Checking.", p.Content)
		})
	}
}

// TestToolTemplatesWithoutToolSyntax: Gemma 3's template gets the tools in
// its first user turn (where it puts the system message), tool results
// come back as user turns, and the roles still alternate.
func TestToolTemplatesWithoutToolSyntax(t *testing.T) {
	src := toolTemplate(t, "gemma3")
	require.False(t, HasToolSyntax(src))
	msgs := []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: "tool", Content: `{"temp": 21}`, ToolCallID: "call00000"},
		{Role: "tool", Content: `{"temp": 19}`},
	}
	out, info, err := ApplyTools(src, msgs, weatherTools, true, "<bos>", "<eos>")
	require.NoError(t, err)
	require.False(t, info.Fallback())
	require.Contains(t, out, "<start_of_turn>user\n# Tools\n")
	require.Contains(t, out, `{"type": "function", "function": {"name": "get_weather"`)
	require.Contains(t, out, "<start_of_turn>model\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><end_of_turn>\n")
	require.Contains(t, out, "<start_of_turn>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n{\"temp\": 19}\n</tool_response><end_of_turn>\n<start_of_turn>model\n")

	// Without tools nor tool messages, ApplyTools is Apply.
	plain := []Message{{Role: "user", Content: "Hi"}}
	a, _, err := Apply(src, plain, true, "<bos>", "<eos>")
	require.NoError(t, err)
	b, _, err := ApplyTools(src, plain, nil, true, "<bos>", "<eos>")
	require.NoError(t, err)
	require.Equal(t, a, b)
}

func TestParseToolCallsForms(t *testing.T) {
	cases := []struct {
		f       ToolFormat
		text    string
		content string
		calls   []ToolCall
	}{
		// The special-token marker dropped by the detokenizer.
		{ToolFormatMistral, ` [{"name": "add", "arguments": {"a": 1}}]`, "", []ToolCall{{Name: "add", Arguments: `{"a": 1}`}}},
		{ToolFormatLlama3, `<|python_tag|>{"name": "add", "parameters": {"a": 1}}; {"name": "add", "parameters": {"a": 2}}`, "",
			[]ToolCall{{Name: "add", Arguments: `{"a": 1}`}, {Name: "add", Arguments: `{"a": 2}`}}},
		{ToolFormatLlama3, `{"name" is how you call it}`, `{"name" is how you call it}`, nil},
		// Phi-4-mini: a JSON array between its tags, or bare.
		{ToolFormatPhi4, `Sure.<|tool_call|>[{"name": "add", "arguments": {"a": 1, "b": 2}}]<|/tool_call|>`, "Sure.",
			[]ToolCall{{Name: "add", Arguments: `{"a": 1, "b": 2}`}}},
		{ToolFormatPhi4, `[{"type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]`, "",
			[]ToolCall{{Name: "add", Arguments: `{"a": 1}`}}},
		// Gemma: Python calls in a tool_code block, JSON in a json block.
		{ToolFormatGemma, "I'll look.\n```tool_code\nget_weather(city=\"Paris\", days=[1, 2], metric=True)\nadd(a=1.5, b=None)\n```", "I'll look.",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "days": [1, 2], "metric": true}`}, {Name: "add", Arguments: `{"a": 1.5, "b": null}`}}},
		{ToolFormatGemma, "```json\n{\"name\": \"add\", \"parameters\": {\"a\": 1}}\n```", "", []ToolCall{{Name: "add", Arguments: `{"a": 1}`}}},
		{ToolFormatGemma, "No tools needed.", "No tools needed.", nil},
		// Harmony: reasoning, a call, and a final answer.
		{ToolFormatHarmony, `<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`, "",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{ToolFormatHarmony, `<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>`, "Hello!", nil},
		// Harmony detokenized without its control tokens.
		{ToolFormatHarmony, `analysisNeed weather.assistantcommentary to=functions.get_weather json{"city":"Paris"}`, "",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		// A tag mentioned in prose is not a call.
		{ToolFormatHermes, "Write calls in <tool_call></tool_call> tags: <tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n</tool_call>",
			"Write calls in <tool_call></tool_call> tags:", []ToolCall{{Name: "add", Arguments: `{}`}}},
		{ToolFormatHermes, "Use <tool_call> tags.", "Use <tool_call> tags.", nil},
		// Qwen3-Coder: parallel calls; values typed as JSON where they are
		// JSON text (or Python's True/False/None), else raw strings.
		{ToolFormatQwenXML, "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n[1, 2]\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=add>\n<parameter=a>\n-1.5\n</parameter>\n<parameter=b>\nnull\n</parameter>\n<parameter=opts>\n{\"x\": \"y\"}\n</parameter>\n<parameter=note>\nline one\n  line <two>\n</parameter>\n</function>\n</tool_call>", "Checking.",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city": "New York", "days": [1, 2], "metric": true}`},
				{Name: "add", Arguments: `{"a": -1.5, "b": null, "opts": {"x": "y"}, "note": "line one\n  line <two>"}`}}},
		// A call without parameters, without the wrapper, cut off at the end.
		{ToolFormatQwenXML, "<function=now>\n</function>", "", []ToolCall{{Name: "now", Arguments: `{}`}}},
		{ToolFormatQwenXML, "<tool_call>\n<function=add>\n<parameter=a>\n2", "", []ToolCall{{Name: "add", Arguments: `{"a": 2}`}}},
		{ToolFormatQwenXML, "No call here.", "No call here.", nil},
		// Hermes with the last closing tag cut off by the end of generation.
		{ToolFormatHermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}\n", "", []ToolCall{{Name: "add", Arguments: `{}`}}},
	}
	for _, c := range cases {
		p := ParseToolCalls(c.f, c.text)
		require.Empty(t, p.Err, c.text)
		require.Equal(t, c.content, p.Content, c.text)
		require.Len(t, p.Calls, len(c.calls), c.text)
		for i, w := range c.calls {
			require.Equal(t, w.Name, p.Calls[i].Name, c.text)
			require.JSONEq(t, w.Arguments, p.Calls[i].Arguments, c.text)
		}
	}
}

// A call that cannot be read leaves the text as content, with the reason.
func TestParseToolCallsMalformed(t *testing.T) {
	for _, c := range []struct {
		f    ToolFormat
		text string
		want string
	}{
		{ToolFormatHermes, "Sure <tool_call>{\"name\": \"add\", \"arguments\": {\"a\": }</tool_call>", "<tool_call>"},
		{ToolFormatHermes, "<tool_call>{\"arguments\": {}}</tool_call>", "name"},
		{ToolFormatHermes, "<tool_call>{\"name\": \"add\", \"arguments\": [1]}</tool_call>", "object"},
		{ToolFormatMistral, "[TOOL_CALLS]add", "[ARGS]"},
		{ToolFormatGemma, "```tool_code\nadd(1, 2)\n```", "positional"},
		{ToolFormatGemma, "```tool_code\nadd(a=os.system)\n```", "literal"},
		{ToolFormatHarmony, "<|channel|>commentary to=functions.add<|message|>{oops<|call|>", "add"},
		{ToolFormatQwenXML, "<tool_call>\n<function=add\n", "name"},
		{ToolFormatQwenXML, "<tool_call>\n<function=add>\n<param=a>1</param>", "expected <parameter="},
		{ToolFormat("xml"), "<call/>", "unknown tool call format"},
	} {
		p := ParseToolCalls(c.f, c.text)
		require.Contains(t, p.Err, c.want, c.text)
		require.Empty(t, p.Calls)
		require.Equal(t, strings.TrimSpace(c.text), p.Content)
	}
}

func TestParseMessagesJSON(t *testing.T) {
	msgs, err := ParseMessagesJSON([]byte(`[{"role": "user", "content": "Hi"},
	 {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}},
	   {"function": {"name": "add", "arguments": {"b": [1, {"c": null}]}}}]},
	 {"role": "tool", "content": "3", "tool_call_id": "c1", "name": "add"}]`))
	require.NoError(t, err)
	require.Equal(t, []Message{
		{Role: "user", Content: "Hi"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "add", Arguments: `{"a": 1}`}, {Name: "add", Arguments: `{"b": [1, {"c": null}]}`}}},
		{Role: "tool", Content: "3", ToolCallID: "c1", Name: "add"},
	}, msgs)
	for _, c := range []struct{ src, want string }{
		{`{"role": "user"}`, "must be a JSON array"},
		{`[{"role": "user", "content": "x", "extra": 1}]`, `messages[0]: unknown key 'extra'`},
		{`[{"content": "x"}]`, "has no role"},
		{`[{"role": "user", "content": [{"type": "text", "text": "x"}]}]`, "content must be a string or null"},
		{`[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{bad"}}]}]`, "tool_calls[0]: function.arguments"},
		{`[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]`, "must be a JSON object"},
		{`[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}, "index": 0}]}]`, `unknown key 'index'`},
		{`[{"role": "assistant", "tool_calls": [{"type": "code", "function": {"name": "f"}}]}]`, `type must be "function"`},
		{`[{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]`, "has no function.name"},
		{`[{"role": "user", "content": "x"}] trailing`, "trailing data"},
	} {
		_, err := ParseMessagesJSON([]byte(c.src))
		require.ErrorContains(t, err, c.want, c.src)
	}
	// A template's tools must be an array of function specs.
	for _, c := range []struct{ tools, want string }{
		{`{"type": "function"}`, "must be a JSON array"},
		{`[{"type": "function", "function": {"description": "x"}}]`, "function.name"},
		{`[{"type": "function", "function": {"name": "f"}, "strict": true}]`, `unknown key 'strict'`},
		{`[{"name": "f"}]`, `unknown key 'name'`},
	} {
		_, _, err := ApplyTools("{{ messages }}", []Message{{Role: "user", Content: "x"}}, JSON(c.tools), true, "", "")
		require.ErrorContains(t, err, c.want, c.tools)
	}
}

// The parse result as JSON has the OpenAI message shape.
func TestToolCallsJSON(t *testing.T) {
	p := ParseToolCalls(ToolFormatHermes, "Hi <tool_call>{\"name\": \"add\", \"arguments\": {\"a\": \"é\"}}</tool_call>")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(ToolCallsJSON(p)), &got))
	require.Equal(t, map[string]any{
		"format": "hermes", "content": "Hi",
		"tool_calls": []any{map[string]any{"id": "call00000", "type": "function",
			"function": map[string]any{"name": "add", "arguments": `{"a": "é"}`}}},
	}, got)
	bad := ParseToolCalls(ToolFormatHermes, "<tool_call>{</tool_call>")
	require.NoError(t, json.Unmarshal([]byte(ToolCallsJSON(bad)), &got))
	require.Contains(t, got["error"], "<tool_call>")
	require.Empty(t, got["tool_calls"])
}

// FuzzToolCalls: any text, in any format, parses without a panic, and
// what it returns is consistent: calls with names and object arguments, or
// an error with the whole text as content.
func FuzzToolCalls(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "[TOOL_CALLS]f[CALL_ID]x[ARGS]{}",
		"<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "```tool_code\nf(a=[1, {'b': None}])\n```",
		"<|tool_call|>[{\"name\": \"f\"}]<|/tool_call|>", "<|channel|>commentary to=functions.f<|message|>{}<|call|>",
		"to=functions.", "{", "[", "```json\n", "<tool_call>", "```tool_code\nf(",
		"<tool_call>\n<function=f>\n<parameter=a>\n[1, {\"b\": 2}]\n</parameter>\n</function>\n</tool_call>", "<function=f><parameter=",
		"<|tool_call>call:f{a:<|\"|>x<|\"|>,b:[1,{c:None}]}<tool_call|>", "call:f{a:x,b:[", "<|channel>thought\n",
	} {
		for i := range ToolFormats() {
			f.Add(s, i)
		}
	}
	f.Fuzz(func(t *testing.T, text string, fi int) {
		fs := ToolFormats()
		format := fs[(fi%len(fs)+len(fs))%len(fs)]
		p := ParseToolCalls(format, text)
		if p.Err != "" {
			require.Empty(t, p.Calls)
			require.Equal(t, strings.TrimSpace(text), p.Content)
			return
		}
		for _, c := range p.Calls {
			require.NotEmpty(t, c.Name)
			require.NotEmpty(t, c.ID)
			v, err := decodeJSON([]byte(c.Arguments))
			require.NoError(t, err)
			require.IsType(t, &dict{}, v)
		}
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(ToolCallsJSON(p)), &got))
	})
}

// FuzzMessagesJSON: any JSON text is read or refused without a panic,
// and what is read renders.
func FuzzMessagesJSON(f *testing.F) {
	f.Add(`[{"role": "user", "content": "Hi"}]`)
	f.Add(`[{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]`)
	f.Add(`[{"role": "tool", "content": "3", "tool_call_id": "c", "name": "f"}]`)
	f.Fuzz(func(t *testing.T, src string) {
		msgs, err := ParseMessagesJSON([]byte(src))
		if err != nil {
			return
		}
		_, err = HermesMessages(msgs, weatherTools)
		require.NoError(t, err)
		_, err = messagesValue(msgs)
		require.NoError(t, err)
	})
}

// Parsing is linear in the text: a reply of many calls, or of many call
// openings, does not copy the rest of the text per call.
func TestParseToolCallsLongText(t *testing.T) {
	call := "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"
	many := strings.Repeat(call, 50000) // 2.4 MB, 50k calls
	start := time.Now()
	p := ParseToolCalls(ToolFormatHermes, many)
	require.Empty(t, p.Err)
	require.Len(t, p.Calls, 50000)
	for _, f := range ToolFormats() {
		ParseToolCalls(f, strings.Repeat("<tool_call>{", 100000))
		ParseToolCalls(f, strings.Repeat("{\"name\": \"f\"};", 100000))
		ParseToolCalls(f, strings.Repeat("to=functions.f {}", 100000))
	}
	// Quadratic copying would take minutes here; linear work takes well under a second.
	require.Less(t, time.Since(start), 30*time.Second)
}
