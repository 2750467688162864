package tokenizer

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// vocabNames are the tokenizer test vocabularies of the shared test data.
var vocabNames = []string{
	"llama-spm", "phi-3", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
	"mpt", "refact", "starcoder", "bert-bge", "smollm2", "qwen3", "llama3", "qwen35",
}

func openTokenizer(tb testing.TB, rel string) *Tokenizer {
	tb.Helper()
	return openGGUFTokenizer(tb, shareddata.Path(tb, rel))
}

type vocabCase struct {
	text string
	ids  []int32
}

// readCases reads NAME.gguf.inp and NAME.gguf.out as llama.cpp's
// test-tokenizer-0 does: inputs are separated by "\n__ggml_vocab_test__\n"
// (the file ends with one), outputs are one line each.
func readCases(tb testing.TB, name string) []vocabCase {
	tb.Helper()
	return readCaseFiles(tb, name, shareddata.Path(tb, "vocab/ggml-vocab-"+name+".gguf.inp"),
		shareddata.Path(tb, "vocab/ggml-vocab-"+name+".gguf.out"))
}

// readCaseFiles reads test vectors in readCases' format from two paths.
func readCaseFiles(tb testing.TB, name, inpPath, outPath string) []vocabCase {
	tb.Helper()
	inp, err := os.ReadFile(inpPath)
	require.NoError(tb, err)
	out, err := os.ReadFile(outPath)
	require.NoError(tb, err)

	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	raw := string(inp)
	for pos := 0; pos < len(raw); {
		next := strings.Index(raw[pos:], sep)
		if next < 0 {
			texts = append(texts, raw[pos:])
			break
		}
		texts = append(texts, raw[pos:pos+next])
		pos += next + len(sep)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Equal(tb, len(lines), len(texts), "%s: cases in .inp and lines in .out", name)

	cases := make([]vocabCase, len(texts))
	for i, text := range texts {
		cases[i].text = text
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(f, 10, 32)
			require.NoError(tb, err, "%s line %d", name, i+1)
			cases[i].ids = append(cases[i].ids, int32(id))
		}
	}
	return cases
}

func TestVocabVectors(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
			cases := readCases(t, name)
			pass := 0
			for i, c := range cases {
				got, err := tok.Encode(c.text, false, false)
				require.NoError(t, err)
				if equalIDs(got, c.ids) {
					pass++
					continue
				}
				t.Errorf("case %d %q:\n got  %v\n want %v", i, c.text, got, c.ids)
			}
			t.Logf("%s: %d/%d cases pass", name, pass, len(cases))
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Decoding what Encode produced gives the text back wherever the vocabulary
// can represent it: byte-level BPE and SentencePiece with byte fallback are
// lossless, except that vocabularies asking for llama.cpp's space cleanup
// (GPT-2 style) come back cleaned. WordPiece lowercases and drops accents
// and spaces, so it cannot round-trip.
func TestVocabRoundTrip(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
			if tok.Kind() == WPM {
				t.Skip("WordPiece normalizes text (lowercase, accents, spaces): no round trip")
			}
			for i, c := range readCases(t, name) {
				ids, err := tok.Encode(c.text, false, false)
				require.NoError(t, err)
				want := c.text
				if tok.cleanSpaces {
					b := []byte(want)
					want = string(b[:cleanSpaces(b)])
				}
				require.Equal(t, want, tok.Decode(ids), "case %d", i)
			}
		})
	}
}

// The public Vocab (plain string slices) builds the same tokenizer as the
// packed form FromGGUF uses.
func TestVocabFromGGUF(t *testing.T) {
	for _, name := range []string{"qwen3", "llama-spm"} {
		path := shareddata.Path(t, "vocab/ggml-vocab-"+name+".gguf")
		f, err := gguf.Open(path)
		require.NoError(t, err)
		v, err := VocabFromGGUF(f)
		require.NoError(t, err)
		packed, err := FromGGUF(f)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		require.Len(t, v.Tokens, packed.VocabSize())
		plain, err := New(v)
		require.NoError(t, err)
		for i := 0; i < len(v.Tokens); i += 997 {
			require.Equal(t, v.Tokens[i], packed.Token(int32(i)))
		}
		for _, c := range readCases(t, name) {
			a, _ := plain.Encode(c.text, true, true)
			b, _ := packed.Encode(c.text, true, true)
			require.Equal(t, a, b, "%s: %q", name, c.text)
		}
	}
}

// Empty tokens are named as llama.cpp names them, so they cannot match text.
func TestEmptyToken(t *testing.T) {
	tok, err := New(&Vocab{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "", "\u2581a"}})
	require.NoError(t, err)
	require.Equal(t, "[EMPTY_3]", tok.Token(3))
	require.Equal(t, int32(3), tok.ID("[EMPTY_3]"))
	require.Equal(t, int32(4), tok.ID("\u2581a"))
}
