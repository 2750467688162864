package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

type expectedFile struct {
	Cases map[string]struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		AddGenerationPrompt bool `json:"add_generation_prompt"`
	} `json:"cases"`
	Templates map[string]struct {
		BOS   string            `json:"bos_token"`
		EOS   string            `json:"eos_token"`
		Cases map[string]string `json:"cases"`
	} `json:"templates"`
}

// TestSharedTemplates renders the published Qwen3, Llama 3 and Gemma 3
// templates and compares with Hugging Face's Jinja2 output.
func TestSharedTemplates(t *testing.T) {
	path := shareddata.Path(t, "templates/expected.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var exp expectedFile
	require.NoError(t, json.Unmarshal(raw, &exp))
	require.NotEmpty(t, exp.Templates)
	names := make([]string, 0, len(exp.Templates))
	for n := range exp.Templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		tmpl := exp.Templates[name]
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(filepath.Dir(path), name+".jinja"))
			require.NoError(t, err)
			tp, err := Parse(string(src))
			require.NoError(t, err)
			require.NotEmpty(t, tmpl.Cases)
			for cname, want := range tmpl.Cases {
				c, ok := exp.Cases[cname]
				require.True(t, ok, "case %s missing from cases", cname)
				msgs := make([]Message, len(c.Messages))
				for i, m := range c.Messages {
					msgs[i] = Message{Role: m.Role, Content: m.Content}
				}
				got, err := tp.Render(msgs, c.AddGenerationPrompt, tmpl.BOS, tmpl.EOS)
				require.NoError(t, err, "case %s", cname)
				require.Equal(t, want, got, "case %s", cname)
				// Apply must take the template path, not a fallback.
				got2, info, err := Apply(string(src), msgs, c.AddGenerationPrompt, tmpl.BOS, tmpl.EOS)
				require.NoError(t, err)
				require.False(t, info.Fallback(), "case %s fell back: %v", cname, info.Err)
				require.Equal(t, want, got2)
			}
		})
	}
}

// BenchmarkRenderQwen3: the Qwen3 template over a 64-turn conversation.
func BenchmarkRenderQwen3(b *testing.B) {
	src, err := os.ReadFile(shareddata.Path(b, "templates/qwen3.jinja"))
	if err != nil {
		b.Fatal(err)
	}
	tp, err := Parse(string(src))
	if err != nil {
		b.Fatal(err)
	}
	msgs := []Message{{Role: "system", Content: "You are helpful."}}
	for i := 0; i < 32; i++ {
		msgs = append(msgs, Message{Role: "user", Content: "Question number " + strings.Repeat("x", 200)},
			Message{Role: "assistant", Content: "<think>\nreasoning\n</think>\n\nAnswer " + strings.Repeat("y", 300)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.Render(msgs, true, "", "<|im_end|>"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseQwen3 measures parsing the Qwen3 template.
func BenchmarkParseQwen3(b *testing.B) {
	src, err := os.ReadFile(shareddata.Path(b, "templates/qwen3.jinja"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Parse(string(src)); err != nil {
			b.Fatal(err)
		}
	}
}
