package tokenizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The Unigram tokenizer ("t5" in GGUF files: T5, XLM-RoBERTa and the
// embedders and rerankers built on it, like bge-m3 and multilingual-e5),
// as llama.cpp runs it. The text is normalized piece by piece (SentencePiece's
// precompiled character map, when the file carries one; user-defined tokens
// and valid UTF-8 pass unchanged, invalid bytes become U+FFFD) with its
// spaces escaped as "▁", then segmented by Viterbi: the segmentation into
// vocabulary pieces whose scores sum highest, a character no piece covers
// becoming UNK (scored ten below the lowest normal score), runs of UNK
// merged into one.

// ugm is the Unigram tokenizer's state beyond the vocabulary.
type ugm struct {
	pieces      prefixIndex // normal, user-defined and unused tokens
	userDefined prefixIndex // user-defined tokens, which normalization leaves alone
	charsmap    charsmap
	unkScore    float32
	// Normalization flags: tokenizer.ggml.remove_extra_whitespaces (merge
	// runs of spaces, drop trailing ones) and add_space_prefix.
	mergeSpaces, prependSpace bool
}

// ugmBest is the best segmentation found of the normalized text's first
// end bytes: its last piece (id, starting at start) and its score.
type ugmBest struct {
	id    int32
	start int32
	score float64
}

// errCharsmap reports a precompiled character map that points outside
// itself: a damaged file (llama.cpp throws there).
var errCharsmap = errors.New("tokenizer: precompiled_charsmap: index out of range")

// buildUGM sets up the Unigram tokenizer once the tokens and their
// attributes are known.
func (t *Tokenizer) buildUGM(v *Vocab) error {
	u := &ugm{prependSpace: t.addSpacePrefix}
	if v.RemoveExtraWhitespaces != nil {
		u.mergeSpaces = *v.RemoveExtraWhitespaces
	}
	if len(v.Charsmap) > 0 {
		cm, err := parseCharsmap(v.Charsmap)
		if err != nil {
			return err
		}
		u.charsmap = cm
	}
	minScore := float32(math.MaxFloat32)
	var pieces, user []int32
	for id, a := range t.attrs {
		if a&attrNormal != 0 {
			minScore = min(minScore, t.scores[id])
		}
		if a&(attrNormal|attrUserDefined|attrUnused) != 0 {
			pieces = append(pieces, int32(id))
		}
		if a&attrUserDefined != 0 {
			user = append(user, int32(id))
		}
	}
	u.unkScore = minScore - 10
	u.pieces = newPrefixIndex(&t.text, pieces)
	u.userDefined = newPrefixIndex(&t.text, user)
	t.ugm = u
	return nil
}

// prefixIndex finds the tokens that are prefixes of a text: token ids
// sorted by their text (for equal texts only the highest id is kept, as a
// later token replaces an earlier one in llama.cpp's trie), narrowed byte
// by byte. It needs no memory beyond the ids, where a trie of a 250,000
// token vocabulary would take tens of megabytes.
type prefixIndex struct {
	text *strs
	ids  []int32
}

func newPrefixIndex(text *strs, ids []int32) prefixIndex {
	slices.SortStableFunc(ids, func(a, b int32) int { return strings.Compare(text.at(int(a)), text.at(int(b))) })
	// Equal texts are adjacent, in id order: keep the last of each run.
	out := ids[:0]
	for i, id := range ids {
		if i+1 < len(ids) && text.at(int(ids[i+1])) == text.at(int(id)) {
			continue
		}
		out = append(out, id)
	}
	return prefixIndex{text: text, ids: out}
}

// span is a range of prefixIndex.ids whose texts share a prefix.
type span struct{ lo, hi int }

func (p *prefixIndex) all() span { return span{0, len(p.ids)} }

// narrow keeps, of s (texts sharing their first depth bytes), the texts
// whose byte at depth is c; shorter texts sort first.
func (p *prefixIndex) narrow(s span, depth int, c byte) span {
	key := func(i int) int {
		t := p.text.at(int(p.ids[i]))
		if len(t) <= depth {
			return -1
		}
		return int(t[depth])
	}
	lo, hi := s.lo, s.hi
	for lo < hi { // first with key >= c
		m := int(uint(lo+hi) >> 1)
		if key(m) < int(c) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	first := lo
	hi = s.hi
	for lo < hi { // first with key > c
		m := int(uint(lo+hi) >> 1)
		if key(m) <= int(c) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return span{first, lo}
}

// exact returns the token of s whose text has exactly n bytes (the first
// of s, if any), or -1.
func (p *prefixIndex) exact(s span, n int) int32 {
	if s.lo < s.hi && len(p.text.at(int(p.ids[s.lo]))) == n {
		return p.ids[s.lo]
	}
	return -1
}

// longestPath is the length of the longest prefix of b that begins some
// token's text (not necessarily a whole token: llama.cpp's trie walk).
func (p *prefixIndex) longestPath(b string) int {
	s := p.all()
	n := 0
	for n < len(b) && s.lo < s.hi {
		if s = p.narrow(s, n, b[n]); s.lo == s.hi {
			break
		}
		n++
	}
	return n
}

// charsmap is SentencePiece's precompiled character map: a double array
// (XOR-compressed, as Kanda's compact double arrays) mapping byte strings
// to offsets of NUL-terminated replacements. Each 32-bit node packs BASE
// (bits 10 to 30, shifted left by 8 more when bit 9 is set), LEAF (bit 8)
// and LCHECK (bits 0 to 7 and 31); a leaf's BASE leads to the node whose
// value (bits 0 to 30) is the replacement's offset.
type charsmap struct {
	nodes []uint32
	repl  []byte
}

// parseCharsmap reads the map as GGUF files carry it
// (tokenizer.ggml.precompiled_charsmap): a little-endian u32 byte length
// of the node array, the nodes, then the replacements.
func parseCharsmap(b []byte) (charsmap, error) {
	if len(b) < 4 {
		return charsmap{}, fmt.Errorf("%w: precompiled_charsmap of %d bytes", ErrBadVocab, len(b))
	}
	n := uint64(binary.LittleEndian.Uint32(b))
	if n+4 >= uint64(len(b)) || n%4 != 0 {
		return charsmap{}, fmt.Errorf("%w: precompiled_charsmap: node array of %d bytes in %d", ErrBadVocab, n, len(b))
	}
	nodes := make([]uint32, n/4)
	for i := range nodes {
		nodes[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return charsmap{nodes: nodes, repl: slices.Clone(b[4+n:])}, nil
}

func (c *charsmap) node(i uint32) (uint32, error) {
	if int(i) >= len(c.nodes) {
		return 0, errCharsmap
	}
	return c.nodes[i], nil
}

func xcdaBase(n uint32) uint32 { return (n >> 10) << ((n & (1 << 9)) >> 6) }

// longest returns the replacement of the longest prefix of s the map
// holds and that prefix's length (0: none).
func (c *charsmap) longest(s string) ([]byte, int, error) {
	if len(c.nodes) == 0 {
		return nil, 0, nil
	}
	root, err := c.node(0)
	if err != nil {
		return nil, 0, err
	}
	idx := xcdaBase(root)
	matched, off := 0, uint32(0)
	for i := 0; i < len(s) && s[i] != 0; i++ {
		ch := uint32(s[i])
		idx ^= ch
		n, err := c.node(idx)
		if err != nil {
			return nil, 0, err
		}
		if n&(1<<31|0xFF) != ch {
			break
		}
		leaf := n>>8&1 != 0
		idx ^= xcdaBase(n)
		if leaf {
			v, err := c.node(idx)
			if err != nil {
				return nil, 0, err
			}
			matched, off = i+1, v&(1<<31-1)
		}
	}
	if matched == 0 {
		return nil, 0, nil
	}
	if int(off) >= len(c.repl) {
		return nil, 0, errCharsmap
	}
	r := c.repl[off:]
	end := slices.Index(r, 0)
	if end < 0 {
		return nil, 0, fmt.Errorf("%w: unterminated replacement", errCharsmap)
	}
	return r[:end], matched, nil
}

// ugmNormalize appends text normalized as llama.cpp's Unigram tokenizer
// does to dst: each prefix replaced (user-defined tokens kept, then the
// character map's longest match, then one valid UTF-8 character, else
// U+FFFD for one byte), spaces written as "▁", a "▁" before the first
// non-space run (add_space_prefix) or, with remove_extra_whitespaces,
// before every run and none elsewhere.
func (t *Tokenizer) ugmNormalize(dst []byte, text string) ([]byte, error) {
	u := t.ugm
	prepended, inWord := false, false
	for i := 0; i < len(text); {
		var piece []byte
		var pieceStr string
		n := u.userDefined.longestPath(text[i:])
		if n > 0 {
			pieceStr = text[i : i+n]
		} else {
			r, m, err := u.charsmap.longest(text[i:])
			if err != nil {
				return dst, err
			}
			if m > 0 {
				piece, n = r, m
			} else if _, m := decodeCpt(text, i); m > 1 || text[i] < 0x80 {
				pieceStr, n = text[i:i+m], m
			} else {
				pieceStr, n = "\uFFFD", 1
			}
		}
		for k := 0; k < len(piece)+len(pieceStr); k++ {
			var c byte
			if piece != nil {
				c = piece[k]
			} else {
				c = pieceStr[k]
			}
			if c != ' ' {
				if !inWord {
					inWord = true
					if (u.prependSpace && !prepended) || u.mergeSpaces {
						dst = append(dst, spmSpace...)
						prepended = true
					}
				}
				dst = append(dst, c)
				continue
			}
			inWord = false
			if !u.mergeSpaces {
				dst = append(dst, spmSpace...)
			}
		}
		i += n
	}
	return dst, nil
}

// encodeUGM appends the tokens of one raw-text fragment.
func (t *Tokenizer) encodeUGM(dst []int32, text string, sc *scratch) ([]int32, error) {
	norm, err := t.ugmNormalize(sc.buf[:0], text)
	sc.buf = norm
	if err != nil {
		return dst, err
	}
	if len(norm) == 0 {
		return dst, nil
	}
	if len(norm) > math.MaxInt32 {
		return dst, fmt.Errorf("tokenizer: %d bytes of normalized text", len(norm))
	}
	u := t.ugm
	best := slices.Grow(sc.ugm[:0], len(norm)+1)[:len(norm)+1]
	sc.ugm = best
	for i := range best {
		best[i] = ugmBest{id: t.unk, score: -math.MaxFloat64}
	}
	best[0].score = 0
	for i := 0; i < len(norm); {
		cp := min(utf8Len(norm[i]), len(norm)-i)
		base := best[i].score
		whole := false
		s := u.pieces.all()
		for j := i; j < len(norm); j++ {
			if s = u.pieces.narrow(s, j-i, norm[j]); s.lo == s.hi {
				break
			}
			id := u.pieces.exact(s, j-i+1)
			if id < 0 {
				continue
			}
			if j+1-i == cp {
				whole = true
			}
			score := float64(t.scores[id])
			if t.attrs[id]&attrUserDefined != 0 {
				score = 0
			}
			if b := &best[j+1]; base+score > b.score {
				*b = ugmBest{id: id, start: int32(i), score: base + score}
			}
		}
		if !whole {
			if b := &best[i+cp]; base+float64(u.unkScore) > b.score {
				*b = ugmBest{id: t.unk, start: int32(i), score: base + float64(u.unkScore)}
			}
		}
		i += cp
	}
	// Back from the end, one UNK for a run of them, then reversed.
	mark := len(dst)
	prevUnk := false
	for e := len(norm); ; {
		b := best[e]
		if b.id < 0 {
			return dst[:mark], fmt.Errorf("%w: text needs an UNK token and the vocabulary has none", ErrBadVocab)
		}
		unk := b.id == t.unk
		if !(prevUnk && unk) {
			dst = append(dst, b.id)
		}
		if b.start == 0 {
			break
		}
		prevUnk = unk
		e = int(b.start)
	}
	slices.Reverse(dst[mark:])
	return dst, nil
}
