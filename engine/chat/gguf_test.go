package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

func ggufTemplate(t *testing.T, path string) string {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	v, ok := f.Lookup("tokenizer.chat_template")
	require.True(t, ok, "%s has no tokenizer.chat_template", path)
	s, err := v.String()
	require.NoError(t, err)
	return s
}

// TestShippedGGUFTemplates renders templates of the shared test data (as
// shipped inside GGUF files, and the published Qwen3, Llama 3 and Gemma 3
// templates on paths expected.json does not reach: tools, tool calls,
// reasoning, enable_thinking, role errors) and compares with Jinja2's
// outputs for them (testdata/gguf_cases.json, made by gen_cases.py).
func TestShippedGGUFTemplates(t *testing.T) {
	raw, err := os.ReadFile("testdata/gguf_cases.json")
	require.NoError(t, err)
	var files map[string]struct {
		SHA256 string `json:"sha256"`
		Cases  []struct {
			jinjaCase
			// Vars keep their JSON so object key order survives.
			Vars map[string]json.RawMessage `json:"vars"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &files))
	require.NotEmpty(t, files)
	for rel, entry := range files {
		t.Run(rel, func(t *testing.T) {
			path := shareddata.Path(t, rel)
			var src string
			if filepath.Ext(rel) == ".gguf" {
				src = ggufTemplate(t, path)
			} else {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				src = string(b)
			}
			sum := sha256.Sum256([]byte(src))
			require.Equal(t, entry.SHA256, hex.EncodeToString(sum[:]), "template changed; rerun gen_cases.py")
			tp, err := Parse(src)
			require.NoError(t, err)
			require.NotEmpty(t, entry.Cases)
			for _, c := range entry.Cases {
				gen, bos, eos := c.params()
				vars := map[string]any{}
				for k, v := range c.Vars {
					vars[k] = JSON(v)
				}
				got, err := tp.RenderVars(c.Messages, gen, bos, eos, vars)
				if c.Err != "" {
					var ex *ExceptionError
					require.ErrorAs(t, err, &ex, c.Name)
					assert.Equal(t, c.Err, ex.Message, c.Name)
					continue
				}
				require.NoError(t, err, c.Name)
				assert.Equal(t, *c.Out, got, c.Name)
			}
		})
	}
}

// TestSmolLM2ShippedTemplate checks that the template inside the SmolLM2
// model is the one the reference cases (tmpl_smollm2_*) were rendered from.
// The model is optional: scripts/fetch-model.sh fetches it.
func TestSmolLM2ShippedTemplate(t *testing.T) {
	path := shareddata.Model(t, shareddata.SmolLM2)
	src := ggufTemplate(t, path)
	n := 0
	for _, c := range loadJinjaCases(t) {
		if c.Family != "smollm2" {
			continue
		}
		require.Equal(t, c.Src, src, "the model's template differs from the one in the reference cases")
		n++
	}
	require.Greater(t, n, 0)
	out, info, err := Apply(src, []Message{{Role: "user", Content: "Hi"}}, true, "", "<|im_end|>")
	require.NoError(t, err)
	assert.False(t, info.Fallback())
	assert.Equal(t, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", out)
}
