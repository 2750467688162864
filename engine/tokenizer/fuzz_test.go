package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// fuzzVocabs cover each algorithm and the main pre-tokenizer families.
var fuzzVocabs = []string{"llama-spm", "gpt-2", "qwen3", "llama3", "deepseek-llm", "deepseek-coder", "falcon", "starcoder", "bert-bge"}

// FuzzEncode checks on arbitrary text that encoding never panics, yields
// only valid ids, that decoding gives the text back where the vocabulary is
// lossless (after llama.cpp's space cleanup where the vocabulary asks for
// it), and that streaming decodes to the same text.
func FuzzEncode(f *testing.F) {
	for _, name := range vocabNames {
		for _, c := range readCases(f, name) {
			f.Add(c.text, false)
		}
	}
	f.Add("<|im_end|>hi<|im_start|>user\n</s><s>", true)
	f.Add("\xff\xfe\xc3(\xed\xa0\x80\xf4\x90\x80\x80 x", false)

	toks := make([]*Tokenizer, len(fuzzVocabs))
	for i, name := range fuzzVocabs {
		toks[i] = openTokenizer(f, "vocab/ggml-vocab-"+name+".gguf")
	}

	f.Fuzz(func(t *testing.T, text string, parseSpecial bool) {
		for i, tok := range toks {
			ids, err := tok.Encode(text, false, parseSpecial)
			require.NoError(t, err)
			for _, id := range ids {
				require.True(t, id >= 0 && int(id) < tok.VocabSize(), "%s: id %d out of range", fuzzVocabs[i], id)
			}
			dec := tok.Decode(ids)

			var sb strings.Builder
			d := NewStreamDecoder(tok)
			for _, id := range ids {
				sb.WriteString(d.Add(id))
			}
			sb.WriteString(d.Flush())
			require.Equal(t, dec, sb.String(), "%s: stream vs Decode", fuzzVocabs[i])

			if parseSpecial || !roundTrips(tok, text) {
				continue
			}
			want := text
			if tok.cleanSpaces {
				b := []byte(want)
				want = string(b[:cleanSpaces(b)])
			}
			require.Equal(t, want, dec, "%s: round trip", fuzzVocabs[i])
		}
	})
}

// roundTrips reports whether Decode(Encode(text)) must give text back.
func roundTrips(tok *Tokenizer, text string) bool {
	switch tok.Kind() {
	case BPE:
		// Invalid UTF-8 is replaced by U+FFFD before byte-level encoding,
		// and a byte whose byte-level character is not in the vocabulary
		// (Falcon lacks some control characters) is dropped.
		if !utf8.ValidString(text) {
			return false
		}
		for i := 0; i < len(text); i++ {
			if tok.byteTok[text[i]] < 0 {
				return false
			}
		}
		return true
	case SPM:
		// Byte fallback keeps every valid character, but '▁' in the text
		// reads back as a space, and an invalid sequence can swallow the
		// first byte of an escaped space, which then stays '▁'.
		return utf8.ValidString(text) && !strings.Contains(text, "\u2581")
	}
	return false
}

// FuzzPreSplit checks every pre-tokenizer on arbitrary text: no panic, and
// the words are non-empty and cover the text exactly.
func FuzzPreSplit(f *testing.F) {
	for _, c := range pretokCases {
		f.Add(c.text)
	}
	f.Add("<sentinel:1>IMGIMGAAAAAZ\r\n\r\n  \t x'S'LL ÀÀb")
	f.Fuzz(func(t *testing.T, text string) {
		cpts := appendCpts(nil, text)
		for p := range preStages {
			segs, _ := preSplit(p, cpts, nil, nil)
			total := 0
			for _, n := range segs {
				require.Positive(t, n, "pre-tokenizer %d: empty word", p)
				total += int(n)
			}
			require.Equal(t, len(cpts), total, "pre-tokenizer %d: words do not cover the text", p)
		}
	})
}
