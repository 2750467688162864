package tokenizer

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// -vocab-variants DIR writes the vocabularies these tests make (their
// names as in the tests) into DIR, to run llama.cpp's tokenizer on them.
var vocabVariantsDir = flag.String("vocab-variants", "", "write the generated test vocabularies into `DIR`")

// The BERT normalizer's variants: tokenizer.ggml.normalizer.lowercase and
// .strip_accents, each set or left out, and the .out file llama.cpp's
// llama_tokenize (llama-cpp-python 0.3.36's build) gives for
// testdata/wpm-normalizer.inp on bert-bge's vocabulary with those keys.
var wpmVariants = []struct {
	name                    string
	lowercase, stripAccents *bool
}{
	{name: "default"},
	{name: "cased", lowercase: ptr(false)},
	{name: "keep-accents", lowercase: ptr(true), stripAccents: ptr(false)},
	{name: "cased-strip", lowercase: ptr(false), stripAccents: ptr(true)},
}

func ptr[T any](v T) *T { return &v }

// TestWPMNormalizer: WordPiece as llama.cpp normalizes its input: accents
// stripped (each code point's first NFD code point, then accent marks
// dropped, so a decomposed "é" is "e") and lowercased by default, each
// switched by its key, stripping following lowercasing unless set apart;
// on bert-bge's vocabulary written again with the keys, against
// llama.cpp's ids.
func TestWPMNormalizer(t *testing.T) {
	src := shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	for _, v := range wpmVariants {
		t.Run(v.name, func(t *testing.T) {
			path := writeVocabVariant(t, src, "wpm-"+v.name+".gguf", func(w *gguf.Writer) {
				if v.lowercase != nil {
					require.NoError(t, w.Set("tokenizer.ggml.normalizer.lowercase", *v.lowercase))
				}
				if v.stripAccents != nil {
					require.NoError(t, w.Set("tokenizer.ggml.normalizer.strip_accents", *v.stripAccents))
				}
			})
			tok := openGGUFTokenizer(t, path)
			cases := readCaseFiles(t, v.name, "testdata/wpm-normalizer.inp", "testdata/wpm-normalizer-"+v.name+".out")
			require.Len(t, cases, 12)
			for i, c := range cases {
				got, err := tok.Encode(c.text, false, false)
				require.NoError(t, err)
				assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
			}
		})
	}
}

// TestWhitespaceTokenizer: the whitespace tokenizer (tokenizer.ggml.model
// and .pre "whitespace", jina-embeddings-v2-base-zh's): the text cut at
// Unicode whitespace, which is dropped; each run merged alone by BPE over
// UTF-8 characters, characters without a token falling back to their
// bytes' <0xXX> tokens where there are such, else dropped; no lowercasing
// unless the normalizer's key asks. The vocabulary is made here
// (whitespaceVocab: Chinese and English text, merges learned on it); the
// .out files are llama.cpp's ids for testdata/whitespace.inp with and
// without tokenizer.ggml.normalizer.lowercase.
func TestWhitespaceTokenizer(t *testing.T) {
	src := shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	for _, lower := range []bool{false, true} {
		name := map[bool]string{false: "whitespace", true: "whitespace-lower"}[lower]
		t.Run(name, func(t *testing.T) {
			path := writeVocabVariant(t, src, name+".gguf", func(w *gguf.Writer) {
				setWhitespaceVocab(t, w)
				if lower {
					require.NoError(t, w.Set("tokenizer.ggml.normalizer.lowercase", true))
				}
			})
			tok := openGGUFTokenizer(t, path)
			cases := readCaseFiles(t, name, "testdata/whitespace.inp", "testdata/"+name+".out")
			require.Len(t, cases, 12)
			fallback, long := 0, false
			for i, c := range cases {
				got, err := tok.Encode(c.text, false, false)
				require.NoError(t, err)
				assert.Equal(t, c.ids, got, "case %d %q", i, c.text)
				for _, id := range got {
					if strings.HasPrefix(tok.Token(id), "<0x") {
						fallback++
					}
				}
				long = long || len([]rune(c.text)) > 2*shortWord
			}
			assert.Positive(t, fallback, "the cases reach the byte fallback")
			assert.True(t, long, "a case takes the merge queue")
			// Specials as the file sets them.
			ids, err := tok.Encode("你好", true, false)
			require.NoError(t, err)
			assert.Equal(t, int32(0), ids[0], "<s>")
			assert.Equal(t, int32(2), ids[len(ids)-1], "</s>")
		})
	}
}

// writeVocabVariant writes src's metadata (a vocabulary file has no
// tensors), edited, as a vocabulary file
// under the test's temporary folder (and under -vocab-variants), and
// returns its path.
func writeVocabVariant(t *testing.T, src, name string, edit func(*gguf.Writer)) string {
	t.Helper()
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	edit(w)
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	if *vocabVariantsDir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(*vocabVariantsDir, name), buf.Bytes(), 0o644))
	}
	sum := sha256.Sum256(buf.Bytes())
	t.Logf("%s: sha256 %s", name, hex.EncodeToString(sum[:]))
	return path
}

// whitespaceCorpus is the text whitespaceVocab learns its merges from.
const whitespaceCorpus = `今天天气很好 我们去公园散步吧 自然语言处理是人工智能领域中的一个重要方向
它研究能实现人与计算机之间用自然语言进行有效通信的各种理论和方法 数字和符号
the quick brown fox jumps over the lazy dog hello world 你好 世界 你好世界
language models embed text into vectors 向量 检索 中文 文本 嵌入 模型
0123456789 ， 。 ！ ？ , . ! ? ( ) 全角 空格`

// setWhitespaceVocab replaces w's tokenizer with a whitespace one: five
// specials, the <0xXX> tokens of 🦙's four bytes, every character of
// whitespaceCorpus (lowercase only), then 160 merges learned on its
// words (the most frequent adjacent pair first, ties by the pair's
// text).
func setWhitespaceVocab(t *testing.T, w *gguf.Writer) {
	t.Helper()
	tokens := []string{"<s>", "<pad>", "</s>", "<unk>", "<mask>"}
	types := []int32{3, 3, 3, 2, 3}
	for _, b := range []byte("🦙") {
		tokens = append(tokens, "<0x"+strings.ToUpper(hex.EncodeToString([]byte{b}))+">")
		types = append(types, 6)
	}
	var words [][]string
	seen := map[string]bool{}
	var chars []string
	for _, word := range strings.Fields(whitespaceCorpus) {
		var syms []string
		for _, r := range word {
			s := string(unicode.ToLower(r))
			syms = append(syms, s)
			if !seen[s] {
				seen[s] = true
				chars = append(chars, s)
			}
		}
		words = append(words, syms)
	}
	slices.Sort(chars)
	for _, c := range chars {
		tokens = append(tokens, c)
		types = append(types, 1)
	}
	var merges []string
	for range 160 {
		count := map[[2]string]int{}
		for _, syms := range words {
			for i := 1; i < len(syms); i++ {
				count[[2]string{syms[i-1], syms[i]}]++
			}
		}
		if len(count) == 0 {
			break
		}
		pairs := make([][2]string, 0, len(count))
		for p := range count {
			pairs = append(pairs, p)
		}
		slices.SortFunc(pairs, func(a, b [2]string) int {
			if c := cmp.Compare(count[b], count[a]); c != 0 {
				return c
			}
			return cmp.Compare(a[0]+" "+a[1], b[0]+" "+b[1])
		})
		best := pairs[0]
		merges = append(merges, best[0]+" "+best[1])
		merged := best[0] + best[1]
		if !seen[merged] {
			seen[merged] = true
			tokens = append(tokens, merged)
			types = append(types, 1)
		}
		for wi, syms := range words {
			var out []string
			for i := 0; i < len(syms); i++ {
				if i+1 < len(syms) && syms[i] == best[0] && syms[i+1] == best[1] {
					out = append(out, merged)
					i++
					continue
				}
				out = append(out, syms[i])
			}
			words[wi] = out
		}
	}
	for _, kv := range []struct {
		k string
		v any
	}{
		{"tokenizer.ggml.model", "whitespace"},
		{"tokenizer.ggml.pre", "whitespace"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(0)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(3)},
		{"tokenizer.ggml.seperator_token_id", uint32(2)},
		{"tokenizer.ggml.padding_token_id", uint32(1)},
		{"tokenizer.ggml.cls_token_id", uint32(0)},
		{"tokenizer.ggml.mask_token_id", uint32(4)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", true},
	} {
		require.NoError(t, w.Set(kv.k, kv.v))
	}
}
