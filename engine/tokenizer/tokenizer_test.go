package tokenizer

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spmVocab is a tiny SentencePiece vocabulary: the expected ids below follow
// from llama.cpp's rules by hand.
func spmVocab(scoreA, scoreAB float32) *Vocab {
	return &Vocab{
		Model: "llama",
		Tokens: []string{
			"<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab",
			"<X>", "<X>b", "<0x3C>", "<0x58>", "<0x3E>",
		},
		Scores: []float32{0, 0, 0, -5, -5, -5, scoreA, scoreAB, 0, 0, 0, 0, 0},
		Types: []int32{
			TypeUnknown, TypeControl, TypeControl, TypeNormal, TypeNormal, TypeNormal, TypeNormal, TypeNormal,
			TypeControl, TypeUserDefined, TypeByte, TypeByte, TypeByte,
		},
	}
}

const (
	idUnk, idBOS, idEOS, idSpace, idA, idB, idSpaceA, idAB, idX, idXb, idLT, idXChar, idGT = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
)

func encode(t *testing.T, tok *Tokenizer, text string, addSpecial, parseSpecial bool) []int32 {
	t.Helper()
	ids, err := tok.Encode(text, addSpecial, parseSpecial)
	require.NoError(t, err)
	return ids
}

func TestSPMScoresDecideMerges(t *testing.T) {
	// "ab" becomes "▁ab": the better-scoring pair merges first.
	tok, err := New(spmVocab(-1, -2))
	require.NoError(t, err)
	assert.Equal(t, []int32{idSpaceA, idB}, encode(t, tok, "ab", false, false))
	tok, err = New(spmVocab(-2, -1))
	require.NoError(t, err)
	assert.Equal(t, []int32{idSpace, idAB}, encode(t, tok, "ab", false, false))
}

func TestSpecialTokenParsing(t *testing.T) {
	tok, err := New(spmVocab(-1, -2))
	require.NoError(t, err)

	// A user-defined token is matched even without parseSpecial.
	assert.Equal(t, []int32{idXb}, encode(t, tok, "<X>b", false, false))
	// A control token is text unless parsed; its characters fall back to
	// bytes.
	assert.Equal(t, []int32{idSpace, idLT, idXChar, idGT, idA}, encode(t, tok, "<X>a", false, false))
	// Parsed, it is one token, and the text after it gets the space prefix.
	assert.Equal(t, []int32{idX, idSpaceA}, encode(t, tok, "<X>a", false, true))
	// Longest special token first: "<X>b" wins over "<X>".
	assert.Equal(t, []int32{idSpaceA, idXb, idSpaceA}, encode(t, tok, "a<X>ba", false, true))
	assert.Empty(t, encode(t, tok, "", false, true))
}

func TestAddSpecial(t *testing.T) {
	v := spmVocab(-1, -2)
	tok, err := New(v)
	require.NoError(t, err)
	assert.True(t, tok.AddBOS())
	assert.False(t, tok.AddEOS())
	assert.Equal(t, []int32{idBOS, idSpaceA}, encode(t, tok, "a", true, false))
	assert.Equal(t, []int32{idBOS}, encode(t, tok, "", true, false))

	yes, no := true, false
	v.AddBOS, v.AddEOS = &no, &yes
	tok, err = New(v)
	require.NoError(t, err)
	assert.Equal(t, []int32{idSpaceA, idEOS}, encode(t, tok, "a", true, false))

	// Decoding: BOS keeps the space prefix, control tokens are not rendered.
	assert.Equal(t, "a", tok.Decode([]int32{idSpaceA}))
	assert.Equal(t, " a", tok.Decode([]int32{idBOS, idSpaceA}))
	assert.Equal(t, "a<X>b", tok.Decode([]int32{idSpaceA, idX, idXb}))
	assert.Equal(t, "<X>", string(tok.PieceSpecial(idX)))

	// Without the space prefix nothing is added or removed.
	v.AddSpacePrefix = &no
	tok, err = New(v)
	require.NoError(t, err)
	assert.Equal(t, []int32{idAB}, encode(t, tok, "ab", false, false))
	assert.Equal(t, []int32{idSpaceA, idB}, encode(t, tok, " ab", false, false))
	assert.Equal(t, " a", tok.Decode([]int32{idSpaceA}))
}

// Phi-3 (recognized by name, as llama.cpp does) strips whitespace after its
// special tokens.
func TestPhi3RStrip(t *testing.T) {
	v := spmVocab(-1, -2)
	tok, err := New(v)
	require.NoError(t, err)
	assert.Equal(t, []int32{idSpaceA, idXb, idSpace, idSpace, idSpaceA}, encode(t, tok, "a<X>b  a", false, false))
	v.Name = "Phi3"
	tok, err = New(v)
	require.NoError(t, err)
	assert.Equal(t, []int32{idSpaceA, idXb, idSpaceA}, encode(t, tok, "a<X>b  a", false, false))
}

func bpeVocab(pre string, merges ...string) *Vocab {
	return &Vocab{
		Model:  "gpt2",
		Pre:    pre,
		Tokens: []string{"a", "b", "c", "ab", "bc", "abc", "Ġ", "Ġa"},
		Merges: merges,
	}
}

func TestBPEMergeRanks(t *testing.T) {
	const a, b, c, ab, bc, abc = 0, 1, 2, 3, 4, 5
	for _, tc := range []struct {
		merges []string
		want   []int32
	}{
		{[]string{"b c", "a b", "a bc"}, []int32{abc}},
		{[]string{"a b", "b c", "a bc"}, []int32{ab, c}},
		{[]string{"a b", "ab c"}, []int32{abc}},
		{nil, []int32{a, b, c}},
	} {
		tok, err := New(bpeVocab("gpt-2", tc.merges...))
		require.NoError(t, err)
		assert.Equal(t, tc.want, encode(t, tok, "abc", false, false), "merges %q", tc.merges)
	}
	// Llama 3 takes a word that is a token whole, merges or not.
	tok, err := New(bpeVocab("llama-bpe"))
	require.NoError(t, err)
	assert.Equal(t, []int32{abc}, encode(t, tok, "abc", false, false))
	// The space is byte-level "Ġ".
	tok, err = New(bpeVocab("gpt-2", "Ġ a"))
	require.NoError(t, err)
	assert.Equal(t, []int32{7, 0}, encode(t, tok, " aa", false, false))
	assert.Equal(t, " aa", tok.Decode([]int32{7, 0}))
}

func TestNewErrors(t *testing.T) {
	_, err := New(&Vocab{Model: "rwkv", Tokens: []string{"a"}})
	assert.True(t, errors.Is(err, ErrUnsupported), "%v", err)
	_, err = New(bpeVocab("no-such-pre"))
	assert.True(t, errors.Is(err, ErrUnsupported), "%v", err)
	_, err = New(&Vocab{Model: "llama"})
	assert.True(t, errors.Is(err, ErrBadVocab), "%v", err)
	_, err = New(&Vocab{Model: "llama", Tokens: []string{"a"}, Scores: []float32{1, 2}})
	assert.True(t, errors.Is(err, ErrBadVocab), "%v", err)

	// A model that asks for BOS but has none fails to encode with
	// addSpecial. Here the BOS key is out of range, so the gpt2 default (11)
	// would apply, and it is out of range too.
	v := bpeVocab("llama-bpe")
	v.Special = map[string]int64{"bos": 99}
	tok, err := New(v)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), tok.BOS())
	_, err = tok.Encode("abc", true, false)
	assert.True(t, errors.Is(err, ErrBadVocab), "%v", err)
	ids, err := tok.Encode("abc", false, false)
	require.NoError(t, err)
	assert.Equal(t, []int32{5}, ids)
}

func TestSpecialIDsAndEOG(t *testing.T) {
	q := openTokenizer(t, "vocab/ggml-vocab-qwen3.gguf")
	assert.Equal(t, q.ID("<|im_end|>"), q.EOS())
	assert.Equal(t, q.ID("<|endoftext|>"), q.BOS())
	for _, s := range []string{"<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"} {
		id := q.ID(s)
		require.GreaterOrEqual(t, id, int32(0), s)
		assert.True(t, q.IsEOG(id), s)
		assert.True(t, q.IsControl(id), s)
	}
	assert.False(t, q.IsEOG(q.ID("<|im_start|>")))
	assert.Equal(t, q.ID("<|fim_prefix|>"), q.FIMPre())
	assert.False(t, q.AddBOS())

	l := openTokenizer(t, "vocab/ggml-vocab-llama3.gguf")
	assert.Equal(t, l.ID("<|begin_of_text|>"), l.BOS())
	assert.True(t, l.AddBOS())
	// Llama 3.0 has no <|eom_id|>; its EOS is <|eot_id|>, and llama.cpp does
	// not count <|end_of_text|> as an end of generation then.
	assert.Equal(t, []int32{l.ID("<|eot_id|>")}, l.EOGTokens())
	assert.Equal(t, int32(-1), l.EOM())
	assert.False(t, l.IsEOG(l.ID("<|end_of_text|>")))
	assert.False(t, l.IsEOG(-1))
	assert.Equal(t, l.ID("<|eot_id|>"), l.EOT())

	s := openTokenizer(t, "vocab/ggml-vocab-llama-spm.gguf")
	assert.Equal(t, []int32{2}, s.EOGTokens())
	assert.Equal(t, int32(13), s.Newline()) // <0x0A>
	assert.Equal(t, int32(-1), s.EOT())
}

func TestWordPieceFraming(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-bert-bge.gguf")
	plain := encode(t, tok, "Hello world", false, false)
	require.NotEmpty(t, plain)
	framed := encode(t, tok, "Hello world", true, false)
	assert.Equal(t, append(append([]int32{tok.BOS()}, plain...), tok.SEP()), framed)
	assert.Equal(t, int32(101), tok.BOS())
	assert.Equal(t, int32(102), tok.SEP())
	// An unknown character makes its whole word UNK.
	assert.Equal(t, []int32{tok.UNK()}, encode(t, tok, "\U0001F999", false, false))
}

// One tokenizer serves many sessions at once: concurrent encodes and decodes
// give the sequential results.
func TestConcurrentEncode(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-qwen3.gguf")
	cases := readCases(t, "qwen3")
	want := make([][]int32, len(cases))
	for i, c := range cases {
		want[i] = encode(t, tok, c.text, false, true)
	}
	const workers = 4
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			for round := 0; round < 5; round++ {
				for i := range cases {
					c := cases[(i+w)%len(cases)]
					ids, err := tok.Encode(c.text, false, true)
					if err != nil {
						errs <- err
						return
					}
					if !equalIDs(ids, want[(i+w)%len(cases)]) {
						errs <- errors.New("concurrent encode differs for " + c.text)
						return
					}
					_ = tok.Decode(ids)
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errs)
	}
}

// The linear scan for short words and the queue for long ones merge alike.
func TestBPEShortMatchesQueue(t *testing.T) {
	for _, name := range []string{"gpt-2", "qwen3", "falcon"} {
		tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		sc := &scratch{}
		words := []string{"", "a", "Hello", " world", "antidisestablishmentarianism", "\u00e9\u00e9\u00e9", "ZZZZZZZZZZZZ", "\U0001F999\U0001F999"}
		for _, c := range readCases(t, name) {
			words = append(words, c.text)
			words = append(words, strings.Fields(c.text)...)
		}
		for _, w := range words {
			if w == "" {
				continue
			}
			syms := make([]symbol, 0, len(w))
			for i := 0; i < len(w); i++ {
				syms = append(syms, symbol{prev: int32(i) - 1, next: int32(i) + 1, start: int32(i), n: 1, id: tok.byteTok[w[i]]})
			}
			syms[len(syms)-1].next = -1
			syms2 := append([]symbol(nil), syms...)
			short := tok.bpeShort(nil, []byte(w), syms)
			queue := tok.bpeQueue(nil, []byte(w), syms2, sc)
			require.Equal(t, queue, short, "%s: %q", name, w)
		}
	}
}

func TestScoreKeyOrder(t *testing.T) {
	scores := []float32{3.5, 1, 0.25, 0, -0.25, -1, -1e9}
	for i := 1; i < len(scores); i++ {
		assert.Less(t, scoreKey(scores[i-1]), scoreKey(scores[i]), "%v before %v", scores[i-1], scores[i])
	}
	negZero := float32(math.Copysign(0, -1))
	assert.Equal(t, scoreKey(0), scoreKey(negZero))
}

// Jina v2 strips the spaces before <mask>.
func TestJinaMaskLStrip(t *testing.T) {
	v := bpeVocab("jina-v2-code")
	v.Tokens = append(v.Tokens, "<mask>")
	v.Types = make([]int32, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	v.Types[len(v.Tokens)-1] = TypeControl
	tok, err := New(v)
	require.NoError(t, err)
	mask := int32(len(v.Tokens) - 1)
	assert.Equal(t, []int32{0, mask, 6, 0}, encode(t, tok, "a  <mask> a", false, true))
	v.Pre = "gpt-2"
	tok, err = New(v)
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 6, 6, mask, 6, 0}, encode(t, tok, "a  <mask> a", false, true))
}

// add_sep as llama.cpp sets it: on for WordPiece and for the BPE
// pre-tokenizers jina-v1-en, jina-v2-code and roberta-bpe, off for the
// others; tokenizer.ggml.add_sep_token overrides it.
func TestAddSepDefaults(t *testing.T) {
	for pre, want := range map[string]bool{"jina-v1-en": true, "jina-v2-code": true, "roberta-bpe": true, "gpt-2": false, "jina-v2-de": false} {
		tok, err := New(bpeVocab(pre))
		require.NoError(t, err)
		assert.Equal(t, want, tok.AddSep(), pre)
	}
	off := false
	v := bpeVocab("roberta-bpe")
	v.AddSep = &off
	tok, err := New(v)
	require.NoError(t, err)
	assert.False(t, tok.AddSep(), "add_sep_token false")
	wpm := &Vocab{Model: "bert", Tokens: []string{"[PAD]", "a"}}
	tok, err = New(wpm)
	require.NoError(t, err)
	assert.True(t, tok.AddSep(), "WordPiece")
}
