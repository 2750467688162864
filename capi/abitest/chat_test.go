package abitest

import (
	"encoding/json"
	"os"
	"path/filepath"
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
