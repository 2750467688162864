package tokenizer

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// withPre is the vocabulary file at rel with tokenizer.ggml.pre set to pre.
func withPre(t *testing.T, rel, pre string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, rel))
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	require.NoError(t, w.Set("tokenizer.ggml.pre", pre))
	for _, ts := range f.Tensors() {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Shape, ts.Data))
	}
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	g, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	tok, err := FromGGUF(g)
	require.NoError(t, err)
	return tok
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
