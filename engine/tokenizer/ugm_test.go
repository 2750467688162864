package tokenizer

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// xlmrVocabPath is llama.cpp's XLM-RoBERTa Unigram test vocabulary
// (models/ggml-vocab-nomic-bert-moe.gguf of its source tree: 250,048
// pieces and a precompiled character map, the vocabulary of bge-m3,
// multilingual-e5 and bge-reranker-v2-m3), which is not ours to commit.
func xlmrVocabPath(tb testing.TB) string {
	tb.Helper()
	// The shared test data's vocab/ folder or llama.cpp's models/
	// (MOONLM_LLAMACPP_DIR, build/llamacpp from `make llamacpp-data`).
	return shareddata.Path(tb, "vocab/ggml-vocab-nomic-bert-moe.gguf")
}

func openGGUFTokenizer(tb testing.TB, path string) *Tokenizer {
	tb.Helper()
	f, err := gguf.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	tok, err := FromGGUF(f)
	require.NoError(tb, err, path)
	return tok
}

// TestUGMVectors checks the Unigram tokenizer against llama.cpp on the
// XLM-RoBERTa vocabulary: testdata/xlmr-ugm.inp's cases (spaces, tabs and
// newlines, compatibility characters the character map rewrites, many
// scripts, emoji, user-defined and control token text, invalid UTF-8),
// testdata/xlmr-ugm.out the ids llama.cpp 0.3.36's llama_tokenize gives
// them (no special tokens added or parsed).
func TestUGMVectors(t *testing.T) {
	tok := openGGUFTokenizer(t, xlmrVocabPath(t))
	require.Equal(t, UGM, tok.Kind())
	cases := readCaseFiles(t, "xlmr-ugm", filepath.Join("testdata", "xlmr-ugm.inp"), filepath.Join("testdata", "xlmr-ugm.out"))
	require.Len(t, cases, 50)
	for i, c := range cases {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
	}
	// With special tokens: <s> ... </s>, as the file asks (add_bos_token,
	// add_eos_token); "<mask>" parsed as its token when asked.
	ids, err := tok.Encode("Hello world", true, false)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 35378, 8999, 2}, ids)
	ids, err = tok.Encode("a<mask>b", false, true)
	require.NoError(t, err)
	assert.Contains(t, ids, tok.Mask())
	assert.Equal(t, "Hello world", tok.Decode([]int32{35378, 8999}))
}

// ugmVocab is a small Unigram vocabulary with a space prefix (which "t5"
// vocabularies only have when the file asks).
func ugmVocab(extra func(v *Vocab)) *Vocab {
	yes := true
	v := &Vocab{
		AddSpacePrefix: &yes,
		Model:          "t5",
		Tokens:         []string{"<pad>", "</s>", "<unk>", "▁", "a", "b", "c", "ab", "abc", "▁a", "<x>", "bc"},
		Scores:         []float32{0, 0, 0, -2, -3, -3, -3, -2, -6, -1, 0, -5},
		Types: []int32{TypeControl, TypeControl, TypeUnknown, TypeNormal, TypeNormal, TypeNormal, TypeNormal,
			TypeNormal, TypeNormal, TypeNormal, TypeUserDefined, TypeNormal},
		Special: map[string]int64{},
	}
	if extra != nil {
		extra(v)
	}
	return v
}

func TestUGMViterbi(t *testing.T) {
	tok, err := New(ugmVocab(nil))
	require.NoError(t, err)
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"abc", []int32{9, 11}},          // "▁a" "bc" (-6) beats "▁" "ab" "c" (-7) and "▁" "abc" (-8)
		{"ab", []int32{3, 7}},            // not "▁a" "b" (-4 against -4: the first found stays)
		{"a", []int32{9}},                // "▁a"
		{"xyz", []int32{3, 2}},           // a run of unknown characters is one UNK
		{"a<x>b", []int32{9, 10, 3, 5}},  // the user-defined token splits the text: each part gets its "▁"
		{"c  c", []int32{3, 6, 3, 3, 6}}, // spaces kept without remove_extra_whitespaces
	} {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "%q", c.text)
	}
	ids, err := tok.Encode("c", true, false)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 6, 1}, ids, "EOS added by default, no BOS")
}

func TestUGMExtraWhitespace(t *testing.T) {
	yes := true
	tok, err := New(ugmVocab(func(v *Vocab) { v.RemoveExtraWhitespaces = &yes }))
	require.NoError(t, err)
	got, err := tok.Encode("  c   c  ", false, false)
	require.NoError(t, err)
	assert.Equal(t, []int32{3, 6, 3, 6}, got, "runs of spaces merged, leading and trailing ones dropped")
}

// A damaged character map is refused at load, or (an index past the end,
// which only a walk finds) by Encode, never with a panic.
func TestUGMBadCharsmap(t *testing.T) {
	for _, cm := range [][]byte{{1, 2}, {8, 0, 0, 0, 1, 2, 3, 4}, {3, 0, 0, 0, 1, 2, 3, 4, 5}} {
		_, err := New(ugmVocab(func(v *Vocab) { v.Charsmap = cm }))
		assert.ErrorIs(t, err, ErrBadVocab, "%v", cm)
	}
	// Root BASE 1 (bits 10+): 'a' ^ 1 = 0x60 lies past the 2 nodes.
	cm := binary.LittleEndian.AppendUint32(nil, 8)
	cm = binary.LittleEndian.AppendUint32(cm, 1<<10)
	cm = binary.LittleEndian.AppendUint32(cm, 0)
	cm = append(cm, 'x', 0)
	tok, err := New(ugmVocab(func(v *Vocab) { v.Charsmap = cm }))
	require.NoError(t, err)
	_, err = tok.Encode("abc", false, false)
	assert.ErrorIs(t, err, errCharsmap)
}
