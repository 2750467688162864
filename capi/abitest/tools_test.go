package abitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// toolFuncs are the tool-calling entry points, registered from the same
// library lib() loaded.
type toolFuncs struct {
	apply func(m uintptr, name, messages, tools *byte, add int32, buf *byte, cap uintptr, nOut *uintptr) int32
	parse func(m uintptr, name, text *byte, n uintptr, buf *byte, cap uintptr, nOut *uintptr) int32
}

func tools(t *testing.T, l *Lib) toolFuncs {
	h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	var f toolFuncs
	purego.RegisterLibFunc(&f.apply, h, "moonlm_chat_apply_template_json")
	purego.RegisterLibFunc(&f.parse, h, "moonlm_chat_parse_tool_calls")
	return f
}

// call runs a (buf, cap, n_out) function twice, sizing the buffer from the
// first call, on one OS thread so the last error is this call's.
func textCall(l *Lib, fn func(buf *byte, cap uintptr, nOut *uintptr) int32) (int32, string, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n uintptr
	st := fn(nil, 0, &n)
	if st != BufferTooSmall {
		return st, "", l.LastError()
	}
	buf := make([]byte, n+1)
	if st = fn(&buf[0], n+1, &n); st != OK {
		return st, "", l.LastError()
	}
	if buf[n] != 0 {
		return Internal, "", "not NUL-terminated"
	}
	return st, string(buf[:n]), ""
}

// A conversation with a tool call and its result, rendered through the ABI
// with Qwen 2.5's template, is what Jinja2 renders (the chat package's
// reference cases), and a generated call parses back.
func TestChatTools(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	f := tools(t, l)
	root, err := repoRoot()
	require.NoError(t, err)
	dir := filepath.Join(root, "engine", "chat", "testdata", "tools")
	tmpl, err := os.ReadFile(filepath.Join(dir, "qwen2.5.jinja"))
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(dir, "tools_cases.json"))
	require.NoError(t, err)
	var cases struct {
		Tools     json.RawMessage `json:"tools"`
		Templates map[string]struct {
			Cases []struct {
				Name     string          `json:"name"`
				Messages json.RawMessage `json:"messages"`
				Gen      bool            `json:"gen"`
				Out      string          `json:"out"`
			} `json:"cases"`
		} `json:"templates"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	path := withTemplate(t, shareddata.Path(t, stories), string(tmpl))
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(path, nil, &m), "open the model with a template")
	defer l.ModelFree(m)

	qwen := cases.Templates["qwen2.5"].Cases
	require.NotEmpty(t, qwen)
	for _, c := range qwen {
		add := int32(0)
		if c.Gen {
			add = 1
		}
		st, text, msg := textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
			return f.apply(m, nil, cstr(string(c.Messages)), cstr(string(cases.Tools)), add, buf, cap, nOut)
		})
		require.Equal(t, OK, st, "%s: %s", c.Name, msg)
		assert.Equal(t, c.Out, text, c.Name)
	}

	gen := "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	st, js, msg := textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
		return f.parse(m, nil, cstr(gen), uintptr(len(gen)), buf, cap, nOut)
	})
	require.Equal(t, OK, st, msg)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(js), &got))
	assert.Equal(t, map[string]any{
		"format": "hermes", "content": "Let me check.",
		"tool_calls": []any{map[string]any{"id": "call00000", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city": "Paris"}`}}},
	}, got)

	// A built-in format gets the tools Hermes-style; its calls parse as Hermes.
	msgs := `[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": null,
	  "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]}]`
	st, text, msg := textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
		return f.apply(m, cstr("chatml"), cstr(msgs), cstr(string(cases.Tools)), 0, buf, cap, nOut)
	})
	require.Equal(t, OK, st, msg)
	assert.Contains(t, text, "<|im_start|>system\n# Tools\n")
	assert.Contains(t, text, "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>\n")
	st, js, msg = textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
		return f.parse(m, cstr("gemma"), cstr(gen), uintptr(len(gen)), buf, cap, nOut)
	})
	require.Equal(t, OK, st, msg)
	assert.Contains(t, js, `"format": "hermes"`)
}

func TestChatToolsErrors(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories) // no chat template
	f := tools(t, l)
	apply := func(name *byte, msgs, tl *byte) (int32, string) {
		st, _, msg := textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
			return f.apply(m, name, msgs, tl, 1, buf, cap, nOut)
		})
		return st, msg
	}
	user := cstr(`[{"role": "user", "content": "Hi"}]`)
	st, msg := apply(nil, user, nil)
	assert.Equal(t, Unsupported, st)
	assert.Contains(t, msg, "no chat template")
	st, msg = apply(cstr("chatml"), nil, nil)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "messages_json is NULL")
	for _, c := range []struct{ msgs, tools, want string }{
		{`[{"role": "user", "content": "Hi", "images": []}]`, "", "unknown key 'images'"},
		{`[{"role": "user", "content": "Hi"}`, "", "messages"},
		{`[{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]`, "", "arguments"},
		{`[{"role": "user", "content": "Hi"}]`, `[{"type": "function"}]`, "function must be an object"},
		{`[{"role": "user", "content": "Hi"}]`, `{}`, "tools must be a JSON array"},
	} {
		var tl *byte
		if c.tools != "" {
			tl = cstr(c.tools)
		}
		st, msg := apply(cstr("chatml"), cstr(c.msgs), tl)
		assert.Equal(t, InvalidArg, st, c.msgs)
		assert.Contains(t, msg, c.want, c.msgs)
		assert.Contains(t, msg, "moonlm_chat_apply_template_json", c.msgs)
	}
	st, msg = apply(cstr("nope"), user, nil)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "unknown template family")

	parse := func(name, text *byte, n uintptr) (int32, string) {
		st, _, msg := textCall(l, func(buf *byte, cap uintptr, nOut *uintptr) int32 {
			return f.parse(m, name, text, n, buf, cap, nOut)
		})
		return st, msg
	}
	st, msg = parse(nil, cstr("hi"), 2)
	assert.Equal(t, Unsupported, st, "the model's own template, which it lacks")
	assert.Contains(t, msg, "no chat template")
	st, msg = parse(cstr("chatml"), nil, 5)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "text is NULL")
	st, _ = parse(cstr("chatml"), nil, 0)
	assert.Equal(t, OK, st, "an empty text has no calls")
	st, msg = parse(cstr("chatml"), cstr("x"), 1<<40)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "64 MiB")
	for _, h := range foreignHandles {
		var n uintptr
		assert.Equal(t, InvalidArg, f.parse(h, cstr("chatml"), cstr("x"), 1, nil, 0, &n))
		assert.Equal(t, InvalidArg, f.apply(h, cstr("chatml"), user, nil, 1, nil, 0, &n))
	}
}
