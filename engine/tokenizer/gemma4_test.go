package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemma4Tokenizer: Gemma 4's tokenizer (tokenizer.ggml.model
// "gemma4": SentencePiece-style BPE over UTF-8 characters with "▁" for
// spaces, <0xXX> byte fallback, whole newline runs) on llama.cpp's test
// vocabulary, against llama.cpp's ids for the GPT-4o cases and cases of
// its own (testdata/gemma4.inp: newline runs, CRLF, byte fallback for
// characters without a token, CJK, chat markers as plain text; the .out
// is what llama.cpp, llama-cpp-python 0.3.36's build, gives). Decoding
// gives llama.cpp's text (testdata/gemma4.detok.jsonl: its
// llama_detokenize of those ids, which cleans spaces before punctuation
// and reads "▁" as a space), BOS is added (llama.cpp forces it for Gemma
// 4) and <turn|> ends generation.
//
// The vocabulary is llama.cpp's models/ggml-vocab-gemma-4.gguf (with its
// own 46 vectors, .inp and .out), read from the shared test data's vocab/
// folder or llama.cpp's models/ (MOONLM_LLAMACPP_DIR; `make llamacpp-data`
// fetches it into build/llamacpp); the test is skipped without it. (It is not in vocabNames,
// whose every file FuzzEncode needs.)
func TestGemma4Tokenizer(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-gemma-4.gguf")
	for i, c := range readCases(t, "gemma-4") {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.ids, got, "llama.cpp's case %d %q", i, c.text)
		for _, special := range []bool{false, true} {
			ids, err := tok.Encode(c.text, special, false)
			require.NoError(t, err)
			want := tok.Decode(ids)
			assert.Equal(t, want, streamDecode(t, tok, ids, utf8.ValidString(want)), "llama.cpp's case %d streamed", i)
		}
	}
	cases := readCaseFiles(t, "gemma4", "testdata/gemma4.inp", "testdata/gemma4.out")
	require.Len(t, cases, 100)
	raw, err := os.ReadFile("testdata/gemma4.detok.jsonl")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	require.Len(t, lines, len(cases))
	fallback := 0
	for i, c := range cases {
		got, err := tok.Encode(c.text, false, false)
		require.NoError(t, err)
		assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
		var want string
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &want))
		assert.Equal(t, want, tok.Decode(c.ids), "case %d decodes as llama.cpp does", i)
		for _, id := range got {
			if tok.attrs[id]&attrByte != 0 {
				fallback++
			}
		}
	}
	assert.Positive(t, fallback, "the cases reach the byte fallback")
	assert.True(t, tok.AddBOS())
	ids, err := tok.Encode("hi", true, false)
	require.NoError(t, err)
	assert.Equal(t, tok.BOS(), ids[0])
	for _, s := range []string{"<turn|>", "<eos>"} {
		id := tok.ID(s)
		require.GreaterOrEqual(t, id, int32(0), s)
		assert.True(t, tok.IsEOG(id), s)
	}
}
