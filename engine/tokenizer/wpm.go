package tokenizer

import "unicode"

// encodeWPM is llama.cpp's WordPiece: where the normalizer strips accents,
// the first code point of each one's NFD form without accent marks; where
// it lowercases, lowercase; split at whitespace and around punctuation and
// CJK ideographs, then cover each word, prefixed with '▁', by longest
// matches; a word that cannot be covered becomes UNK.
func (t *Tokenizer) encodeWPM(dst []int32, text string, sc *scratch) []int32 {
	sc.cpts = appendCpts(sc.cpts[:0], text)
	w := append(sc.word[:0], "\u2581"...)
	flush := func() {
		if len(w) > len("\u2581") {
			dst = t.wpmWord(dst, w)
		}
		w = w[:len("\u2581")]
	}
	for _, r := range sc.cpts {
		if t.stripAccents {
			r = nfdFirst(r)
		}
		f := cptFlags(r)
		if f&fSpace != 0 {
			flush()
			continue
		}
		if r == 0 || r == runeError || f&fControl != 0 {
			continue
		}
		if t.stripAccents && f&fMark != 0 {
			continue
		}
		lr := r
		if t.lowercase {
			lr = unicode.ToLower(r)
		}
		if f&fPunct != 0 || (r < 0x7F && f&fSymbol != 0) || isChineseChar(r) {
			flush()
			w = appendUTF8(w, lr)
			flush()
			continue
		}
		w = appendUTF8(w, lr)
	}
	flush()
	sc.word = w
	return dst
}

func (t *Tokenizer) wpmWord(dst []int32, w []byte) []int32 {
	n := len(w)
	mark := len(dst)
	for i := 0; i < n; i++ {
		matched := false
		for j := min(n, i+t.maxTokenLen+1); j > i; j-- {
			if id := t.ids.getBytes(w[i:j]); id >= 0 {
				dst = append(dst, id)
				matched = true
				i = j - 1
				break
			}
		}
		if !matched {
			dst = dst[:mark]
			break
		}
	}
	if len(dst) == mark && t.unk >= 0 {
		dst = append(dst, t.unk)
	}
	return dst
}

// isChineseChar is BERT's CJK ideograph test (with its 0x2B920 quirk).
func isChineseChar(r rune) bool {
	return (r >= 0x04E00 && r <= 0x09FFF) ||
		(r >= 0x03400 && r <= 0x04DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0x0F900 && r <= 0x0FAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
