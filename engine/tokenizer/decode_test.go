package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Expected results worked out by hand from llama.cpp's three cleanup passes.
func TestCleanSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		" ":                " ",
		"Hello , world !":  "Hello, world!",
		" . ? ! ,":         ".?!,",
		"a ' b":            "a'b",
		"a ' ' b":          "a'' b", // the space skipped by the first match no longer counts
		"it 's I 'm":       "it's I'm",
		"you 're we 've":   "you're we've",
		"don 't he 'd 'll": "don 't he 'd 'll",
		"x 'r":             "x 'r", // too short to be " 're"
		"x '":              "x '",
		"a  ,b":            "a ,b", // one space removed per comma
		"' s":              "' s",
	} {
		b := []byte(in)
		assert.Equal(t, want, string(b[:cleanSpaces(b)]), "input %q", in)
	}
}

func streamDecode(t *testing.T, tok *Tokenizer, ids []int32, checkUTF8 bool) string {
	t.Helper()
	d := NewStreamDecoder(tok)
	var sb strings.Builder
	for _, id := range ids {
		s := d.Add(id)
		if checkUTF8 {
			require.True(t, utf8.ValidString(s), "chunk %q after token %d is not whole UTF-8", s, id)
		}
		sb.WriteString(s)
	}
	s := d.Flush()
	if checkUTF8 {
		require.True(t, utf8.ValidString(s), "flushed %q", s)
	}
	sb.WriteString(s)
	return sb.String()
}

// Streaming gives the text Decode gives, never splitting a character, on
// every test case of every vocabulary.
func TestStreamDecoderVocabs(t *testing.T) {
	for _, name := range vocabNames {
		t.Run(name, func(t *testing.T) {
			tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
			for i, c := range readCases(t, name) {
				for _, special := range []bool{false, true} {
					ids, err := tok.Encode(c.text, special, false)
					require.NoError(t, err)
					want := tok.Decode(ids)
					got := streamDecode(t, tok, ids, utf8.ValidString(want))
					require.Equal(t, want, got, "case %d", i)
				}
			}
		})
	}
}

// stories260K has 512 tokens, so most non-ASCII text becomes byte tokens
// whose characters span several tokens.
func TestStreamDecoderByteFallback(t *testing.T) {
	tok := openTokenizer(t, "models/stories260K.gguf")
	text := "Ünïcödé: €100, 日本語 and 🦙🦙 done"
	ids, err := tok.Encode(text, true, false)
	require.NoError(t, err)
	nByte := 0
	for _, id := range ids {
		if tok.Type(id) == TypeByte {
			nByte++
		}
	}
	require.Greater(t, nByte, 10, "the text should need byte fallback")
	assert.Equal(t, " "+text, tok.Decode(ids))
	assert.Equal(t, " "+text, streamDecode(t, tok, ids, true))

	// A three-byte character arrives in three tokens: nothing until whole.
	d := NewStreamDecoder(tok)
	euro := []byte("€")
	for i, c := range euro {
		s := d.Add(tok.byteTok[c])
		if i < len(euro)-1 {
			assert.Empty(t, s)
		} else {
			assert.Equal(t, "€", s)
		}
	}
	assert.Empty(t, d.Flush())

	// An invalid sequence is not held back forever: Flush returns it.
	d.Reset()
	assert.Empty(t, d.Add(tok.byteTok[0xE2]))
	assert.Equal(t, "\xE2", d.Flush())
}

// With space cleanup, text is held only while what follows can change it.
func TestStreamDecoderCleanup(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-gpt-2.gguf")
	require.True(t, tok.cleanSpaces)
	for _, text := range []string{
		"Hello , world ! It 's fine , isn 't it ? a ' b ' c",
		" ' 's ' 're ' 've , , ..",
		"plain text with no cleanup at all",
	} {
		ids, err := tok.Encode(text, false, false)
		require.NoError(t, err)
		assert.Equal(t, tok.Decode(ids), streamDecode(t, tok, ids, true), "text %q", text)
	}
}

func TestPieceAndControl(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-qwen3.gguf")
	im := tok.ID("<|im_end|>")
	require.GreaterOrEqual(t, im, int32(0))
	assert.True(t, tok.IsControl(im))
	assert.True(t, tok.IsEOG(im))
	assert.Empty(t, tok.Piece(im))
	assert.Equal(t, "<|im_end|>", string(tok.PieceSpecial(im)))
	assert.Equal(t, "<|im_end|>", tok.Token(im))

	// Parsing special tokens: with it the marker is one token, without it
	// it is text.
	ids, err := tok.Encode("hi<|im_end|>there", false, true)
	require.NoError(t, err)
	assert.Contains(t, ids, im)
	ids, err = tok.Encode("hi<|im_end|>there", false, false)
	require.NoError(t, err)
	assert.NotContains(t, ids, im)
	assert.Equal(t, "hi<|im_end|>there", tok.Decode(ids))

	// Byte-level characters map back to bytes: "Ġ" is a space.
	sp := tok.ID("Ġ")
	require.GreaterOrEqual(t, sp, int32(0))
	assert.Equal(t, " ", string(tok.Piece(sp)))
	assert.Nil(t, tok.Piece(-1))
	assert.Nil(t, tok.Piece(int32(tok.VocabSize())))
}

// AppendAdd/AppendFlush give what Add/Flush give, and allocate nothing once
// the buffers have grown.
func TestStreamDecoderAppend(t *testing.T) {
	tok := openTokenizer(t, "vocab/ggml-vocab-gpt-2.gguf")
	ids, err := tok.Encode("Hello , world ! It 's 😀 fine", false, false)
	require.NoError(t, err)
	d := NewStreamDecoder(tok)
	var buf []byte
	for _, id := range ids {
		buf = d.AppendAdd(buf, id)
	}
	buf = d.AppendFlush(buf)
	assert.Equal(t, tok.Decode(ids), string(buf))

	allocs := testing.AllocsPerRun(20, func() {
		d.Reset()
		buf = buf[:0]
		for _, id := range ids {
			buf = d.AppendAdd(buf, id)
		}
		buf = d.AppendFlush(buf)
	})
	assert.Zero(t, allocs)
}

// A continuation keeps the first piece's space: stories260K's greedy output
// after BOS alone starts " Once", which llama.cpp's reference text keeps.
func TestContinuationDecoder(t *testing.T) {
	tok := openTokenizer(t, "models/stories260K.gguf")
	ids := encode(t, tok, "Once upon a time", false, false)
	d := NewContinuationDecoder(tok)
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Add(id))
	}
	sb.WriteString(d.Flush())
	assert.Equal(t, " Once upon a time", sb.String())
	assert.Equal(t, "Once upon a time", streamDecode(t, tok, ids, true))
}
