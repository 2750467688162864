package tokenizer

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// longText is about n bytes of prose, digits, punctuation and a few
// non-ASCII words.
func longText(n int) string {
	const para = "The quick brown fox jumps over the lazy dog, and 42 cats ran away! Ünïcödé façade — naïve 東京 2024.\n"
	return strings.Repeat(para, n/len(para)+1)
}

// Encoding megabytes of text allocates a small multiple of the text, in
// total (so its peak is no more): SentencePiece merges in pieces instead of
// one heap over the whole text (10 MB allocated 2.2 GB), and BPE sizes its
// code point buffer once (it reallocated 24 bytes per byte).
func TestEncodeMemoryBounded(t *testing.T) {
	text := longText(2 << 20)
	for _, name := range []string{"llama-spm", "gpt-2", "llama3", "bert-bge"} {
		tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		_, err := tok.Encode("warm up", false, false)
		require.NoError(t, err)
		runtime.GC()
		before := totalAlloc()
		ids, err := tok.Encode(text, false, false)
		allocated := totalAlloc() - before
		require.NoError(t, err)
		require.NotEmpty(t, ids)
		t.Logf("%s: %d bytes, %d tokens, %.1f bytes allocated per byte", name, len(text), len(ids), float64(allocated)/float64(len(text)))
		assert.Less(t, allocated, uint64(16*len(text)), "%s: %d bytes allocated for %d bytes of text", name, allocated, len(text))
	}
}

// Merging SentencePiece text in pieces gives exactly the tokens of merging
// it whole, for each SentencePiece vocabulary whose tokens allow the cuts.
func TestSPMPiecesSameTokens(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3"} {
		tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		require.True(t, tok.spmCutSafe, "%s: no token holds ▁ after another character", name)
		var b strings.Builder
		for b.Len() < 5*spmPiece {
			for _, c := range readCases(t, name) {
				b.WriteString(c.text)
				b.WriteString(" ")
			}
		}
		text := b.String()
		pieces, err := tok.Encode(text, true, false)
		require.NoError(t, err)
		whole := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		whole.spmCutSafe = false
		want, err := whole.Encode(text, true, false)
		require.NoError(t, err)
		require.Equal(t, want, pieces, name)
	}
	// A vocabulary with a token spanning "x▁" is not cut.
	v := &Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "a", "\u2581", "a\u2581"}}
	tok, err := New(v)
	require.NoError(t, err)
	assert.False(t, tok.spmCutSafe)
}
