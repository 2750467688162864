package abitest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withTemplate writes a copy of the GGUF model at src with
// tokenizer.chat_template set to tmpl.
func withTemplate(t *testing.T, src, tmpl string) string {
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v), "copying %s", k)
	}
	require.NoError(t, w.Set("tokenizer.chat_template", tmpl))
	for _, ts := range f.Tensors() {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Shape, ts.Data), "copying %s", ts.Name)
	}
	dst := filepath.Join(t.TempDir(), "with-template.gguf")
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = w.WriteTo(out)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

// Conversations rendered through the ABI match Hugging Face's rendering of
// the Qwen3 template (which uses neither bos_token nor eos_token, so the
// model's own special tokens do not matter).
func TestChatTemplate(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	tmpl, err := os.ReadFile(shareddata.Path(t, "templates/qwen3.jinja"))
	require.NoError(t, err)
	raw, err := os.ReadFile(shareddata.Path(t, "templates/expected.json"))
	require.NoError(t, err)
	var exp struct {
		Cases map[string]struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			AddGenerationPrompt bool `json:"add_generation_prompt"`
		} `json:"cases"`
		Templates map[string]struct {
			Cases map[string]string `json:"cases"`
		} `json:"templates"`
	}
	require.NoError(t, json.Unmarshal(raw, &exp))
	path := withTemplate(t, shareddata.Path(t, stories), string(tmpl))
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(path, nil, &m), "open the model with a template")
	defer l.ModelFree(m)

	var n uintptr
	requireStatus(t, l, BufferTooSmall, l.ModelChatTemplate(m, nil, 0, &n), "template size")
	got := make([]byte, n+1)
	requireStatus(t, l, OK, l.ModelChatTemplate(m, &got[0], n+1, &n), "template")
	assert.Equal(t, string(tmpl), string(got[:n]))

	require.NotEmpty(t, exp.Cases)
	for name, c := range exp.Cases {
		want, ok := exp.Templates["qwen3"].Cases[name]
		require.True(t, ok, name)
		msgs := make([]Message, len(c.Messages))
		for i, m := range c.Messages {
			msgs[i] = Message{cstr(m.Role), cstr(m.Content)}
		}
		add := int32(0)
		if c.AddGenerationPrompt {
			add = 1
		}
		requireStatus(t, l, BufferTooSmall, l.ChatApply(m, &msgs[0], uintptr(len(msgs)), add, nil, 0, &n), name+": size query")
		require.Equal(t, uintptr(len(want)), n, name)
		buf := make([]byte, n+1)
		requireStatus(t, l, OK, l.ChatApply(m, &msgs[0], uintptr(len(msgs)), add, &buf[0], n+1, &n), name)
		assert.Equal(t, want, string(buf[:n]), name)
		assert.Equal(t, byte(0), buf[n], "%s: NUL-terminated", name)
	}
}

// applyNamed calls moonlm_chat_apply_template_named (name nil is NULL) with
// the size protocol and returns the status, the text and the last error.
func applyNamed(l *Lib, m uintptr, name *byte, msgs []Message, add int32) (int32, string, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var n uintptr
	st := l.ChatApplyNamed(m, name, &msgs[0], uintptr(len(msgs)), add, nil, 0, &n)
	if st != BufferTooSmall {
		return st, "", l.LastError()
	}
	buf := make([]byte, n+1)
	st = l.ChatApplyNamed(m, name, &msgs[0], uintptr(len(msgs)), add, &buf[0], n+1, &n)
	if st != OK {
		return st, "", l.LastError()
	}
	return st, string(buf[:n]), ""
}

// builtinTemplates returns moonlm_chat_builtin_templates, split.
func builtinTemplates(t *testing.T, l *Lib) []string {
	var n uintptr
	requireStatus(t, l, BufferTooSmall, l.ChatBuiltins(nil, 0, &n), "builtin templates size query")
	buf := make([]byte, n+1)
	requireStatus(t, l, OK, l.ChatBuiltins(&buf[0], n+1, &n), "builtin templates")
	require.Equal(t, byte(0), buf[n], "NUL-terminated")
	requireStatus(t, l, InvalidArg, l.ChatBuiltins(nil, 4, &n), "NULL buffer with cap")
	return strings.Split(string(buf[:n]), ",")
}

// A model without a chat template: moonlm_chat_apply_template and the named
// form with NULL or "" are UNSUPPORTED with a message naming every built-in
// template and the call that takes one; each built-in name renders; an
// unknown name is INVALID_ARGUMENT listing the names.
func TestChatWithoutTemplate(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	names := builtinTemplates(t, l)
	require.Contains(t, names, "chatml")
	assert.True(t, sort.StringsAreSorted(names), "%v", names)
	msgs := []Message{{cstr("system"), cstr("Be brief.")}, {cstr("user"), cstr("Hi")}}

	var n uintptr
	buf := make([]byte, 256)
	runtime.LockOSThread()
	st := l.ChatApply(m, &msgs[0], 2, 1, &buf[0], uintptr(len(buf)), &n)
	msg := l.LastError()
	runtime.UnlockOSThread()
	require.Equal(t, Unsupported, st, msg)
	assert.Contains(t, msg, "moonlm_chat_apply_template: ")
	assert.Contains(t, msg, "no chat template")
	assert.Contains(t, msg, "moonlm_chat_apply_template_named")
	for _, name := range names {
		assert.Contains(t, msg, name)
	}
	for _, name := range []*byte{nil, cstr("")} {
		st, _, msg := applyNamed(l, m, name, msgs, 1)
		require.Equal(t, Unsupported, st, msg)
		assert.Contains(t, msg, "moonlm_chat_apply_template_named: ")
		assert.Contains(t, msg, "no chat template")
	}
	for _, name := range names {
		st, text, msg := applyNamed(l, m, cstr(name), msgs, 1)
		require.Equal(t, OK, st, "%s: %s", name, msg)
		assert.Contains(t, text, "Be brief.", name)
		assert.Contains(t, text, "Hi", name)
	}
	// ChatML's format, as Hugging Face's ChatML templates write it.
	_, text, _ := applyNamed(l, m, cstr("chatml"), msgs, 1)
	assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", text)
	_, text, _ = applyNamed(l, m, cstr("chatml"), msgs, 0)
	assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n", text)

	st, _, msg = applyNamed(l, m, cstr("ChatML"), msgs, 1)
	require.Equal(t, InvalidArg, st, msg)
	assert.Contains(t, msg, `"ChatML"`)
	for _, name := range names {
		assert.Contains(t, msg, name)
	}
	bad := []Message{{cstr("user"), nil}}
	st, _, msg = applyNamed(l, m, cstr("chatml"), bad, 1)
	assert.Equal(t, InvalidArg, st, msg)
}

// With a template, the named form with "" or NULL is the template itself
// and a built-in name overrides it.
func TestChatNamedWithTemplate(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	path := withTemplate(t, shareddata.Path(t, stories), "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}")
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(path, nil, &m), "open the model with a template")
	defer l.ModelFree(m)
	msgs := []Message{{cstr("user"), cstr("Hi")}}
	for _, name := range []*byte{nil, cstr("")} {
		st, text, msg := applyNamed(l, m, name, msgs, 1)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, "[user:Hi]", text)
	}
	st, text, msg := applyNamed(l, m, cstr("chatml"), msgs, 1)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", text)
}
