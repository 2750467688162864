package engine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rewriteGGUF copies the GGUF file src into a temporary file with edit
// applied to its metadata (key -> value; a nil value keeps the original).
func rewriteGGUF(t *testing.T, src string, edit func(key string, v gguf.Value) any) string {
	t.Helper()
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		var nv any = v
		if e := edit(k, v); e != nil {
			nv = e
		}
		require.NoError(t, w.Set(k, nv), "setting %s", k)
	}
	for _, ts := range f.Tensors() {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Shape, ts.Data), "copying %s", ts.Name)
	}
	return writeTempGGUF(t, w, filepath.Base(src))
}

var familyMsgs = []chat.Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Hi"},
}

// renderWith opens path (a model without a chat template), checks that its
// own template is refused with ErrUnsupported naming the built-in formats,
// its likely one (ChatFamily) first, and renders familyMsgs in that format.
func renderWith(t *testing.T, path string) (string, *Model) {
	t.Helper()
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.Empty(t, m.Info().ChatTemplate, "the test needs a model without a template")
	_, err = m.ApplyChatTemplate(familyMsgs, true)
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "no chat template")
	assert.Contains(t, err.Error(), m.ChatFamily()+" (likely for this model), ")
	for _, n := range chat.Families() {
		assert.Contains(t, err.Error(), n)
	}
	s, err := m.ApplyChatTemplateNamed(m.ChatFamily(), familyMsgs, true)
	require.NoError(t, err)
	return s, m
}

// Without a template nothing is guessed; named, the built-in formats render:
// ChatFamily suggests ChatML for a llama model with a SentencePiece
// vocabulary, Gemma's turns for a gemma3 model, and Llama 3's format for a
// vocabulary with Llama 3's header tokens.
func TestChatFamilyWithoutTemplate(t *testing.T) {
	t.Run("chatml", func(t *testing.T) {
		s, m := renderWith(t, shareddata.Path(t, "models/stories260K.gguf"))
		assert.Equal(t, "chatml", m.ChatFamily())
		assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", s)
	})
	t.Run("gemma", func(t *testing.T) {
		s, m := renderWith(t, shareddata.Path(t, "synth/synth-gemma3-f32.gguf"))
		assert.Equal(t, "gemma", m.ChatFamily())
		bos := m.Tokenizer().Token(m.Info().BOS)
		assert.Equal(t, bos+"<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n", s)
	})
	t.Run("llama3", func(t *testing.T) {
		// stories260K with its last token renamed to Llama 3's header token.
		path := rewriteGGUF(t, shareddata.Path(t, "models/stories260K.gguf"), func(k string, v gguf.Value) any {
			if k != "tokenizer.ggml.tokens" {
				return nil
			}
			a, err := v.Array()
			require.NoError(t, err)
			toks := make([]string, a.Len())
			for i := range toks {
				toks[i], err = a.String(i)
				require.NoError(t, err)
			}
			toks[len(toks)-1] = "<|start_header_id|>"
			return toks
		})
		s, m := renderWith(t, path)
		assert.Equal(t, "llama3", m.ChatFamily())
		assert.True(t, strings.HasSuffix(s, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"), "%q", s)
	})
	t.Run("unusable template without markers", func(t *testing.T) {
		// A template that fails to parse and names no family is refused
		// too, with the parse error; a named format still renders.
		path := withChatTemplate(t, shareddata.Path(t, "synth/synth-gemma3-f32.gguf"), "{% for m in messages %}{{ m.content | no_such_filter }}{% endfor %}")
		m, err := Open(path, ModelParams{Threads: 1})
		require.NoError(t, err)
		defer m.Close()
		_, err = m.ApplyChatTemplate(familyMsgs, true)
		require.ErrorIs(t, err, ErrUnsupported)
		assert.Contains(t, err.Error(), "no_such_filter")
		assert.Contains(t, err.Error(), "gemma (likely for this model)")
		s, err := m.ApplyChatTemplateNamed("gemma", familyMsgs, true)
		require.NoError(t, err)
		assert.Contains(t, s, "<start_of_turn>model\n")
	})
	t.Run("unusable template with markers", func(t *testing.T) {
		// One that names its family falls back to that family's format.
		path := withChatTemplate(t, shareddata.Path(t, "synth/synth-gemma3-f32.gguf"), "{% include 'x' %}<|im_start|>")
		m, err := Open(path, ModelParams{Threads: 1})
		require.NoError(t, err)
		defer m.Close()
		s, err := m.ApplyChatTemplate(familyMsgs, true)
		require.NoError(t, err)
		assert.Equal(t, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", s)
	})
}

// An unknown name is ErrInvalidArgument listing the built-in names; a named
// format wins over the model's own template.
func TestApplyChatTemplateNamed(t *testing.T) {
	path := withChatTemplate(t, shareddata.Path(t, "models/stories260K.gguf"), "{% for m in messages %}[{{ m.content }}]{% endfor %}")
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	own, err := m.ApplyChatTemplate(familyMsgs, false)
	require.NoError(t, err)
	assert.Equal(t, "[Be brief.][Hi]", own)
	named, err := m.ApplyChatTemplateNamed("", familyMsgs, false)
	require.NoError(t, err)
	assert.Equal(t, own, named)
	z, err := m.ApplyChatTemplateNamed("zephyr", familyMsgs, true)
	require.NoError(t, err)
	eos := m.Tokenizer().Token(m.Info().EOS)
	assert.Equal(t, "<|system|>\nBe brief."+eos+"\n<|user|>\nHi"+eos+"\n<|assistant|>\n", z)
	_, err = m.ApplyChatTemplateNamed("ChatML", familyMsgs, true)
	require.ErrorIs(t, err, ErrInvalidArgument)
	for _, n := range chat.Families() {
		assert.Contains(t, err.Error(), n)
	}
}

// withChatTemplate copies src with tokenizer.chat_template set to tmpl.
func withChatTemplate(t *testing.T, src, tmpl string) string {
	t.Helper()
	return withKey(t, src, "tokenizer.chat_template", tmpl)
}

// withKey writes a copy of the GGUF file src, in a test folder, with the
// metadata key set to value, and returns its path.
func withKey(t *testing.T, src, key string, value any) string {
	t.Helper()
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	require.NoError(t, w.Set(key, value))
	for _, ts := range f.Tensors() {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Shape, ts.Data))
	}
	return writeTempGGUF(t, w, "edited.gguf")
}

// Gemma 3 270M as CI uses it is a base model without a chat template: its
// own template is refused naming gemma first, and the named gemma format
// renders Gemma's turns with its BOS.
func TestChatGemma3BaseModel(t *testing.T) {
	// Rendering needs no packed weights (and so writes no cache).
	m, err := Open(gemma3Path(t), ModelParams{Threads: 1, Pack: PackOff})
	require.NoError(t, err)
	defer m.Close()
	require.Empty(t, m.Info().ChatTemplate, "Gemma 3 270M (the base model) has no tokenizer.chat_template")
	_, err = m.ApplyChatTemplate(familyMsgs, true)
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "gemma (likely for this model)")
	s, err := m.ApplyChatTemplateNamed("gemma", familyMsgs, true)
	require.NoError(t, err)
	assert.Equal(t, "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n", s)
}
