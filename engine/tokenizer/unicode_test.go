package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Categories as llama.cpp's Unicode 15.1 tables give them (checked in full
// against them when written; these are the cases Go's tables get otherwise).
func TestCptFlags(t *testing.T) {
	for r, want := range map[rune]uint16{
		'a': fLetter, '7': fNumber, '~': fSymbol, '!': fPunct, ' ': fSeparator | fSpace,
		'\n': fControl | fSpace, 0x85: fControl | fSpace, 0x3000: fSeparator | fSpace,
		0x00AD: fControl, // soft hyphen, Cf
		0x0378: fUndef,   // unassigned: undefined, not control
		0xE000: fControl, // private use
		0xD800: fControl, // surrogate
		0x0301: fMark,
		0x2FFC: fSymbol, 0x31EF: fSymbol, 0x2EBF0: fLetter, // Unicode 15.1
		0x110000: fUndef, -1: fUndef,
	} {
		assert.Equal(t, want, cptFlags(r), "%U", r)
	}
}

func TestDecodeCpt(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []rune
	}{
		{"aé€😀", []rune{'a', 0xE9, 0x20AC, 0x1F600}},
		{"\xff\x80a", []rune{runeError, runeError, 'a'}},
		{"\xc3", []rune{runeError}},                // truncated
		{"\xe2\x82", []rune{runeError, runeError}}, // truncated: each byte replaced
		{"\xc0\x80", []rune{0}},                    // overlong accepted, as llama.cpp
		{"\xed\xa0\x80", []rune{0xD800}},           // surrogate accepted
	} {
		assert.Equal(t, c.want, appendCpts(nil, c.in), "%q", c.in)
	}
	assert.Equal(t, "\xed\xa0\x80", string(appendUTF8(nil, 0xD800)))
	assert.Equal(t, "\uFFFD", string(appendUTF8(nil, 0x110000)))
}
