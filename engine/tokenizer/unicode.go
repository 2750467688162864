package tokenizer

import (
	"slices"
	"sort"
	"unicode"
	"unicode/utf8"
)

// Code point classes as llama.cpp's pre-tokenizers see them: one general
// category each (Cn is "undefined"), plus the White_Space property.
const (
	fUndef uint16 = 1 << iota
	fNumber
	fLetter
	fSeparator
	fMark
	fPunct
	fSymbol
	fControl
	fSpace
)

// asciiFlags holds the flags of the ASCII code points, the common case.
var asciiFlags [128]uint16

func init() {
	for r := rune(0); r < 128; r++ {
		asciiFlags[r] = slowFlags(r)
	}
}

func slowFlags(r rune) uint16 {
	var f uint16
	switch {
	// Unicode 15.1 additions, which llama.cpp's tables have and Go's
	// (Unicode 15.0) lack.
	case r >= 0x2FFC && r <= 0x2FFF, r == 0x31EF:
		f = fSymbol
	case r >= 0x2EBF0 && r <= 0x2EE5D:
		f = fLetter
	case unicode.Is(unicode.L, r):
		f = fLetter
	case unicode.Is(unicode.N, r):
		f = fNumber
	case unicode.Is(unicode.P, r):
		f = fPunct
	case unicode.Is(unicode.S, r):
		f = fSymbol
	case unicode.Is(unicode.M, r):
		f = fMark
	case unicode.Is(unicode.Z, r):
		f = fSeparator
	case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r):
		// Not unicode.C, which also covers unassigned code points; those
		// are "undefined" for llama.cpp.
		f = fControl
	default:
		f = fUndef
	}
	// unicode.IsSpace is exactly the White_Space property, which is the set
	// llama.cpp uses for \s.
	if unicode.IsSpace(r) {
		f |= fSpace
	}
	return f
}

// cptFlags returns the class flags of a code point; code points past
// U+10FFFF are undefined, as in llama.cpp.
func cptFlags(r rune) uint16 {
	if r >= 0 && r < 128 {
		return asciiFlags[r]
	}
	if r < 0 || r > unicode.MaxRune {
		return fUndef
	}
	return slowFlags(r)
}

const runeError = 0xFFFD

// decodeCpt decodes one code point the way llama.cpp does: it checks only the
// lead byte's length and the continuation bytes' top bits (so overlong forms
// and surrogates pass), and an invalid byte becomes U+FFFD consuming one byte.
func decodeCpt(s string, i int) (rune, int) {
	c := s[i]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c&0x40 == 0:
		return runeError, 1
	case c&0x20 == 0:
		if i+1 >= len(s) || s[i+1]&0xC0 != 0x80 {
			return runeError, 1
		}
		return rune(c&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case c&0x10 == 0:
		if i+2 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 {
			return runeError, 1
		}
		return rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	case c&0x08 == 0:
		if i+3 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
			return runeError, 1
		}
		return rune(c&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
	}
	return runeError, 1
}

// appendCpts appends the code points of s, decoded as decodeCpt does.
func appendCpts(dst []rune, s string) []rune {
	// Grown once to size: appending rune by rune reallocated megabytes of
	// text some twenty times over (about 24 bytes allocated per byte).
	if need := len(dst) + utf8.RuneCountInString(s); need > cap(dst) {
		dst = slices.Grow(dst, need-len(dst))
	}
	for i := 0; i < len(s); {
		r, n := decodeCpt(s, i)
		dst = append(dst, r)
		i += n
	}
	return dst
}

// appendUTF8 encodes r as llama.cpp does: surrogates are encoded like any
// other code point (so text round-trips byte for byte); code points past
// U+10FFFF, which llama.cpp rejects with an exception, become U+FFFD.
func appendUTF8(dst []byte, r rune) []byte {
	switch {
	case r >= 0 && r < 0x80:
		return append(dst, byte(r))
	case r >= 0x80 && r < 0x800:
		return append(dst, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
	case r >= 0x800 && r < 0x10000:
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
	case r >= 0x10000 && r <= 0x10FFFF:
		return append(dst, 0xF0|byte(r>>18), 0x80|byte(r>>12&0x3F), 0x80|byte(r>>6&0x3F), 0x80|byte(r&0x3F))
	}
	return append(dst, 0xEF, 0xBF, 0xBD)
}

// utf8Len is the sequence length announced by a lead byte (1 for stray
// continuation bytes), as SentencePiece splits text into characters.
func utf8Len(c byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[c>>4]
}

// byteLevel maps each byte to the printable character GPT-2's byte-level BPE
// writes for it: printable Latin-1 characters stand for themselves, the others
// take code points from U+0100 up, in byte order.
var byteLevel [256]rune

// byteLevelInv maps those characters back to bytes, +1 (0 for other code
// points); they all lie below U+0144.
var byteLevelInv [0x144]uint16

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteLevel[b] = rune(b)
		} else {
			byteLevel[b] = 256 + n
			n++
		}
		byteLevelInv[byteLevel[b]] = uint16(b) + 1
	}
}

//go:generate sh -c "python3 gen_nfd.py > nfd_table.go"

type nfdRange struct{ first, last, nfd rune }

// nfdFirst returns the first code point of r's canonical decomposition.
func nfdFirst(r rune) rune {
	if r < 0xC0 {
		return r
	}
	i := sort.Search(len(nfdRanges), func(i int) bool { return nfdRanges[i].last >= r })
	if i < len(nfdRanges) && nfdRanges[i].first <= r {
		return nfdRanges[i].nfd
	}
	return r
}

// isSpaceASCII is C's isspace in the "C" locale, used where llama.cpp strips
// spaces around special tokens.
func isSpaceASCII(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
