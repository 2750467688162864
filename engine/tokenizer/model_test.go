package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

type refPrompt struct {
	Prompt     string  `json:"prompt"`
	Tokens     []int32 `json:"tokens"`
	Greedy     []int32 `json:"greedy"`
	GreedyText string  `json:"greedy_text"`
}

func readRefs(tb testing.TB, name string) ([]string, []refPrompt) {
	tb.Helper()
	raw, err := os.ReadFile(shareddata.Path(tb, "reference/"+name+".prompts.txt"))
	require.NoError(tb, err)
	var prompts []string
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		prompts = append(prompts, strings.ReplaceAll(line, `\n`, "\n"))
	}
	f, err := os.Open(shareddata.Path(tb, "reference/"+name+".ref.jsonl"))
	require.NoError(tb, err)
	defer f.Close()
	var refs []refPrompt
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r refPrompt
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &r))
		refs = append(refs, r)
	}
	require.NoError(tb, sc.Err())
	require.Len(tb, refs, len(prompts), "%s: prompts and references", name)
	return prompts, refs
}

// The models' prompts tokenize, with BOS, as llama.cpp tokenized them, and
// the pieces of the greedy continuations spell llama.cpp's text for them.
func TestModelPrompts(t *testing.T) {
	for _, name := range []string{"stories260K", "tiny-random-llama"} {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "models/"+name+".gguf")
			prompts, refs := readRefs(t, name)
			for i, p := range prompts {
				require.Equal(t, refs[i].Prompt, p, "prompt %d", i)
				got, err := tok.Encode(p, true, false)
				require.NoError(t, err)
				assert.Equal(t, refs[i].Tokens, got, "prompt %q", p)

				var text []byte
				for _, id := range refs[i].Greedy {
					text = append(text, tok.Piece(id)...)
				}
				assert.Equal(t, refs[i].GreedyText, string(text), "greedy text after %q", p)

				// Decoding the prompt gives it back; with BOS first the
				// SentencePiece space prefix stays, as in llama.cpp.
				assert.Equal(t, p, tok.Decode(got[1:]))
				if p != "" {
					assert.Equal(t, " "+p, tok.Decode(got))
				}
			}
		})
	}
}
