package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQwen35CombiningMarks: Qwen3.5's pre-tokenizer keeps combining marks
// in the word of the letters they follow ([\p{L}\p{M}]+), where Qwen2's
// splits them off. The ids are llama.cpp's (0.3.36) for its Qwen3.5 test
// vocabulary, with no BOS and special tokens not parsed.
func TestQwen35CombiningMarks(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-qwen35.gguf")
	for _, c := range []struct {
		text string
		ids  []int32
	}{
		{"caf\u0301e na\u0308ive re\u0301sume\u0301", []int32{68796, 53839, 68, 4317, 136, 230, 533, 312, 53839, 31323, 53839}},
		{" \u0301\u0301abc \u0915\u093F\u0924\u093E\u092C", []int32{220, 53839, 53839, 13683, 47809, 42311, 97, 31411, 105}},
		{"bi\u00EA\u0301t m\u01A1\u0301i c\u00E2\u0301u", []int32{8221, 132515, 83, 134796, 53839, 72, 47824, 53839, 84}},
		{"Z\u0351\u034Da\u0300\u0301lgo 12\u0301", []int32{57, 137, 239, 137, 235, 64, 96549, 53839, 75, 3346, 220, 16, 17, 53839}},
	} {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.ids, got, "%q", c.text)
	}
}
