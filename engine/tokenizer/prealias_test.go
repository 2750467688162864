package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// withPre is the vocabulary file at rel with tokenizer.ggml.pre set to pre.
func withPre(t *testing.T, rel, pre string) *Tokenizer {
	t.Helper()
	path := writeVocabVariant(t, shareddata.Path(t, rel), "pre-"+pre+".gguf", func(w *gguf.Writer) {
		require.NoError(t, w.Set("tokenizer.ggml.pre", pre))
	})
	return openGGUFTokenizer(t, path)
}

// TestPreTokenizerAliases: names llama.cpp maps onto a pre-tokenizer this
// package already has give that one's results: the GPT-2 vocabulary with
// tokenizer.ggml.pre "exaone4" (EXAONE 4.0) tokenizes the GPT-2 test
// vectors as with "gpt-2" (llama.cpp 0.3.36's bundled build, run on the
// same rewritten file, gives the same 46 vectors).
func TestPreTokenizerAliases(t *testing.T) {
	for _, c := range []struct{ pre, vocab string }{{"exaone4", "gpt-2"}} {
		tok := withPre(t, "vocab/ggml-vocab-"+c.vocab+".gguf", c.pre)
		for i, vc := range readCases(t, c.vocab) {
			got, err := tok.Encode(vc.text, false, false)
			require.NoError(t, err)
			require.Equal(t, vc.ids, got, "%s case %d %q", c.pre, i, vc.text)
		}
	}
}

// TestGPT4oPreTokenizer: GPT-4o's pre-tokenizer (Phi-4-mini, Llama 4) on
// the Llama 3 test vocabulary with tokenizer.ggml.pre "gpt-4o", against
// llama.cpp's ids for the Llama 3 test inputs and cases that exercise the
// expression's letter-case splits, contractions, slashes, newlines and
// non-ASCII letters (testdata/gpt-4o.inp; the .out is what llama.cpp,
// llama-cpp-python 0.3.36's build, gives on the same rewritten file).
func TestGPT4oPreTokenizer(t *testing.T) {
	tok := withPre(t, "vocab/ggml-vocab-llama3.gguf", "gpt-4o")
	cases := readCaseFiles(t, "gpt-4o", "testdata/gpt-4o.inp", "testdata/gpt-4o.out")
	require.Len(t, cases, 81)
	llama3 := withPre(t, "vocab/ggml-vocab-llama3.gguf", "llama3")
	differs := 0
	for i, c := range cases {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
		if l3, err := llama3.Encode(c.text, false, false); err == nil && !equalIDs(l3, c.ids) {
			differs++
		}
	}
	// The cases see what GPT-4o's expression changes from Llama 3's.
	t.Logf("%d of %d cases differ from the llama3 pre-tokenizer", differs, len(cases))
	assert.GreaterOrEqual(t, differs, 4)
}
