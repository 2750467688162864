package tokenizer

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// fragment is a piece of the input: raw text [start,end) when tok < 0, or a
// special token found in the text.
type fragment struct {
	tok        int32
	start, end int
}

// symbol is a piece being merged by BPE: a byte span of the
// word, linked to its live neighbours.
type symbol struct {
	prev, next int32
	start, n   int32
	id         int32 // BPE: token id of the span, -1 if none
	rank       int32 // BPE, short words: rank of the merge with next, -1 if none
	merged     int32 // BPE, short words: id that merge makes
}

// bigram is a candidate merge of a symbol with the one after it. key orders
// the queue, lowest first: the BPE rank in the high 32 bits, the left
// symbol's index in the low ones, so ties go to the leftmost pair.
type bigram struct {
	key  uint64
	size int32 // left.n + right.n when queued; a mismatch means stale
	id   int32 // token id of the merged span
}

func (b *bigram) left() int32 { return int32(uint32(b.key)) }

// scoreKey maps an SPM score to 32 bits that sort higher scores first.
func scoreKey(score float32) uint64 {
	if score == 0 {
		score = 0 // -0 and +0 tie, as floats do
	}
	u := math.Float32bits(score)
	if u&(1<<31) != 0 {
		u = ^u
	} else {
		u |= 1 << 31
	}
	return uint64(^u) // ascending order of the key is descending score
}

// Encode tokenizes text. addSpecial adds BOS/EOS as the model asks;
// parseSpecial lets control tokens written in the text (like "<|im_end|>")
// become those tokens. User-defined tokens are always matched, as in
// llama.cpp.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return t.AppendEncode(nil, text, addSpecial, parseSpecial)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	sc, _ := t.pool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer func() {
		sc.trim()
		t.pool.Put(sc)
	}()

	sc.frags, sc.frags2 = t.partition(text, parseSpecial, sc, sc.frags, sc.frags2)
	if len(text) > keepScratch {
		// A long text's tokens: grown once to a usual tokens-per-byte
		// ratio rather than reallocated as they come.
		dst = slices.Grow(dst, len(text)/3)
	}

	var err error
	switch t.kind {
	case SPM:
		if addSpecial && t.addBOS {
			if dst, err = t.appendSpecial(dst, t.bos, "BOS"); err != nil {
				return dst, err
			}
		}
		prevSpecial := true
		for _, f := range sc.frags {
			if f.tok >= 0 {
				dst = append(dst, f.tok)
				prevSpecial = true
				continue
			}
			buf := sc.buf[:0]
			if n := f.end - f.start; n > keepScratch {
				// Sized once: "▁" is three bytes where a space was one.
				buf = slices.Grow(buf, n+2*strings.Count(text[f.start:f.end], " ")+len(spmSpace))
			}
			if t.addSpacePrefix && prevSpecial {
				buf = append(buf, "\u2581"...)
			}
			for i := f.start; i < f.end; i++ {
				if c := text[i]; c == ' ' {
					buf = append(buf, "\u2581"...)
				} else {
					buf = append(buf, c)
				}
			}
			sc.buf = buf
			dst = t.encodeSPMPieces(dst, buf, sc)
			prevSpecial = false
		}
		if addSpecial && t.addEOS {
			if dst, err = t.appendSpecial(dst, t.eos, "EOS"); err != nil {
				return dst, err
			}
		}
	case BPE, UGM:
		if addSpecial && t.addBOS {
			if dst, err = t.appendSpecial(dst, t.bos, "BOS"); err != nil {
				return dst, err
			}
		}
		for _, f := range sc.frags {
			if f.tok >= 0 {
				dst = append(dst, f.tok)
				continue
			}
			if t.kind == UGM {
				if dst, err = t.encodeUGM(dst, text[f.start:f.end], sc); err != nil {
					return dst, err
				}
				continue
			}
			dst = t.encodeBPE(dst, text[f.start:f.end], sc)
		}
		if addSpecial && t.addEOS {
			if dst, err = t.appendSpecial(dst, t.eos, "EOS"); err != nil {
				return dst, err
			}
		}
	case WPM:
		// WordPiece always frames the text with CLS (BOS) and SEP.
		if addSpecial {
			if dst, err = t.appendSpecial(dst, t.bos, "BOS"); err != nil {
				return dst, err
			}
		}
		for _, f := range sc.frags {
			if f.tok >= 0 {
				dst = append(dst, f.tok)
				continue
			}
			dst = t.encodeWPM(dst, text[f.start:f.end], sc)
		}
		if addSpecial {
			if dst, err = t.appendSpecial(dst, t.sep, "SEP"); err != nil {
				return dst, err
			}
		}
	}
	return dst, nil
}

func (t *Tokenizer) appendSpecial(dst []int32, id int32, what string) ([]int32, error) {
	if id < 0 {
		return dst, fmt.Errorf("%w: the model asks for a %s token but has none", ErrBadVocab, what)
	}
	return append(dst, id), nil
}

// partition splits text at special tokens as llama.cpp's
// tokenizer_st_partition: each special token in turn, longest first, is
// looked for in the raw pieces left by the previous ones.
func (t *Tokenizer) partition(text string, parseSpecial bool, sc *scratch, frags, tmp []fragment) ([]fragment, []fragment) {
	frags = frags[:0]
	if text == "" {
		return frags, tmp
	}
	frags = append(frags, fragment{tok: -1, start: 0, end: len(text)})
	if len(t.special) == 0 {
		return frags, tmp
	}
	// Vocabularies can have thousands of special tokens: a set of the byte
	// pairs in the text rules most of them out without a search.
	if sc.pairs == nil {
		sc.pairs = new([1 << 16 / 64]uint64)
	}
	pairs := sc.pairs
	for i := 1; i < len(text); i++ {
		p := uint(text[i-1])<<8 | uint(text[i])
		pairs[p/64] |= 1 << (p % 64)
	}
	defer func() {
		if len(text) > len(pairs) {
			*pairs = [len(pairs)]uint64{}
			return
		}
		for i := 1; i < len(text); i++ {
			p := uint(text[i-1])<<8 | uint(text[i])
			pairs[p/64] = 0
		}
	}()
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.text.at(int(id))
		if len(tok) > len(text) {
			continue
		}
		if len(tok) >= 2 {
			if p := uint(tok[0])<<8 | uint(tok[1]); pairs[p/64]&(1<<(p%64)) == 0 {
				continue
			}
		}
		if !strings.Contains(text, tok) {
			continue
		}
		tmp = tmp[:0]
		for _, f := range frags {
			if f.tok >= 0 {
				tmp = append(tmp, f)
				continue
			}
			off, end := f.start, f.end
			for off < end {
				k := strings.Index(text[off:end], tok)
				if k < 0 {
					break
				}
				m := off + k
				if m > off {
					l := m
					if a&attrLStrip != 0 {
						for l > off && isSpaceASCII(text[l-1]) {
							l--
						}
					}
					if l > off {
						tmp = append(tmp, fragment{tok: -1, start: off, end: l})
					}
				}
				tmp = append(tmp, fragment{tok: id})
				off = m + len(tok)
				if a&attrRStrip != 0 {
					for off < end && isSpaceASCII(text[off]) {
						off++
					}
				}
			}
			if off < end {
				tmp = append(tmp, fragment{tok: -1, start: off, end: end})
			}
		}
		frags, tmp = tmp, frags
	}
	return frags, tmp
}

// push adds a bigram to the queue, a binary heap.
func push(h []bigram, b bigram) []bigram {
	h = append(h, b)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// pop removes the first bigram from the queue.
func pop(h []bigram) (bigram, []bigram) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].less(&h[l]) {
			m = r
		}
		if !h[m].less(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

func (b *bigram) less(o *bigram) bool { return b.key < o.key }

// keepScratch is the most elements a pooled scratch buffer keeps: one long
// text's buffers are dropped after it, not held for the tokenizer's life.
const keepScratch = 1 << 16

func (sc *scratch) trim() {
	if cap(sc.frags) > keepScratch {
		sc.frags = nil
	}
	if cap(sc.frags2) > keepScratch {
		sc.frags2 = nil
	}
	if cap(sc.buf) > 4*keepScratch {
		sc.buf = nil
	}
	if cap(sc.cpts) > keepScratch {
		sc.cpts = nil
	}
	if cap(sc.segs) > keepScratch {
		sc.segs = nil
	}
	if cap(sc.segs2) > keepScratch {
		sc.segs2 = nil
	}
	if cap(sc.syms) > 4*keepScratch {
		sc.syms = nil
	}
	if cap(sc.heap) > 4*keepScratch {
		sc.heap = nil
	}
	if cap(sc.spans) > 4*keepScratch {
		sc.spans = nil
	}
	if cap(sc.keys) > 4*keepScratch {
		sc.keys = nil
	}
	if cap(sc.word) > keepScratch {
		sc.word = nil
	}
	if cap(sc.ugm) > keepScratch {
		sc.ugm = nil
	}
}

// spmPiece is the length from which SentencePiece text is merged in pieces:
// the merge keeps some 4 bytes per byte and a queue of 8 bytes per
// character, and on megabytes of text the queue's depth is most of the time.
const spmPiece = 1 << 16

const spmSpace = "\u2581"

// encodeSPMPieces is encodeSPM over text cut into pieces of about
// spmPiece bytes, where that gives the same tokens: each cut is before a
// "▁" that follows another character, and when no token contains such a
// pair (spmCutSafe) no merge can cross it, so merging each piece alone
// makes the same merges, in the same order within each piece.
func (t *Tokenizer) encodeSPMPieces(dst []int32, text []byte, sc *scratch) []int32 {
	if !t.spmCutSafe {
		return t.encodeSPM(dst, text, sc)
	}
	for len(text) > 2*spmPiece {
		cut := spmCut(text, spmPiece)
		if cut < 0 {
			break
		}
		dst = t.encodeSPM(dst, text[:cut], sc)
		text = text[cut:]
	}
	return t.encodeSPM(dst, text, sc)
}

// spmCut is the first offset >= from where text continues with "▁" after a
// character other than "▁", or -1.
func spmCut(text []byte, from int) int {
	for i := from; i < len(text); {
		j := bytes.Index(text[i:], []byte(spmSpace))
		if j < 0 {
			return -1
		}
		i += j
		if i >= len(spmSpace) && string(text[i-len(spmSpace):i]) != spmSpace {
			return i
		}
		i += len(spmSpace)
	}
	return -1
}

// spmCutSafe reports whether every "▁" inside a token follows another "▁"
// (or starts the token), so that no token spans a cut made before a "▁"
// that follows another character.
func spmCutSafe(toks *strs) bool {
	for i := 0; i < toks.len(); i++ {
		s := toks.at(i)
		for j := strings.Index(s, spmSpace); j >= 0; {
			if j > 0 && (j < len(spmSpace) || s[j-len(spmSpace):j] != spmSpace) {
				return false
			}
			k := strings.Index(s[j+len(spmSpace):], spmSpace)
			if k < 0 {
				break
			}
			j += len(spmSpace) + k
		}
	}
	return true
}

// encodeSPM is llama.cpp's SentencePiece BPE: start from characters, merge
// the adjacent pair forming the highest-scoring token until none is left,
// and spell what is not a token with byte tokens.
//
// The state is kept small, since a text without safe cuts is merged whole:
// spans holds each symbol's length at its first byte and, negated, at its
// last (for one-byte symbols the two are the same cell), which gives both
// neighbours without links, 4 bytes per byte. The queue holds bare keys,
// score then left offset, 8 bytes each; a key is acted on iff the pair now
// at its offset makes a token of the same score, so its entry needs no
// size or id: where a stale key matches, the live pair's own key is equal
// and queued too, so the merges and their order are those of llama.cpp.
// The queue is capped near the symbol count and stale keys are dropped
// when it fills (live keys are at most one per symbol).
func (t *Tokenizer) encodeSPM(dst []int32, text []byte, sc *scratch) []int32 {
	n := len(text)
	if n == 0 {
		return dst
	}
	spans := slices.Grow(sc.spans[:0], n)[:n]
	chars := 0
	for off := 0; off < n; {
		c := min(utf8Len(text[off]), n-off)
		spans[off] = int32(c)
		for k := off + 1; k < off+c; k++ {
			spans[k] = 0
		}
		if c > 1 {
			spans[off+c-1] = -int32(c)
		}
		off += c
		chars++
	}
	// key is the queue key of merging the symbols starting at l and r.
	key := func(l, r int) (uint64, bool) {
		id := t.ids.getBytes(text[l : r+int(spans[r])])
		if id < 0 {
			return 0, false
		}
		return scoreKey(t.scores[id])<<32 | uint64(l), true
	}
	// live reports whether k is the key of the pair now at its offset.
	live := func(k uint64) bool {
		l := int(uint32(k))
		nl := spans[l]
		if nl <= 0 || l+int(nl) >= n {
			return false
		}
		cur, ok := key(l, l+int(nl))
		return ok && cur == k
	}
	h := sc.keys[:0]
	if limit := chars + chars/8 + 16; cap(h) < limit {
		h = make([]uint64, 0, limit)
	}
	add := func(l, r int) {
		k, ok := key(l, r)
		if !ok {
			return
		}
		if len(h) == cap(h) {
			// Full: drop the stale keys.
			kept := h[:0]
			for _, x := range h {
				if live(x) {
					kept = append(kept, x)
				}
			}
			h = kept
			heapify(h)
		}
		h = pushKey(h, k)
	}
	for l := 0; l < n; {
		r := l + int(spans[l])
		if r >= n {
			break
		}
		if k, ok := key(l, r); ok {
			h = append(h, k)
		}
		l = r
	}
	heapify(h)
	for len(h) > 0 {
		k := h[0]
		h = popKey(h)
		if !live(k) {
			continue
		}
		l := int(uint32(k))
		nl := spans[l]
		r := l + int(nl)
		m := nl + spans[r]
		spans[r] = 0
		spans[l] = m
		spans[l+int(m)-1] = -m
		if l > 0 {
			p := l - 1
			if v := spans[p]; v < 0 {
				p = l + int(v)
			}
			add(p, l)
		}
		if e := l + int(m); e < n {
			add(l, e)
		}
	}
	for i := 0; i < n; i += int(spans[i]) {
		piece := text[i : i+int(spans[i])]
		if id := t.ids.getBytes(piece); id >= 0 {
			dst = append(dst, id)
			continue
		}
		// Every merged span is a token, so this is a single character
		// missing from the vocabulary: byte fallback.
		for _, c := range piece {
			if id := t.byteTok[c]; id >= 0 {
				dst = append(dst, id)
			} else if t.unk >= 0 {
				dst = append(dst, t.unk)
			}
		}
	}
	sc.spans, sc.keys = spans, h
	return dst
}

// heapify orders h as a binary heap of keys, lowest first.
func heapify(h []uint64) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
}

func siftDown(h []uint64, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r] < h[l] {
			m = r
		}
		if h[m] >= h[i] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// pushKey adds k to the heap h.
func pushKey(h []uint64, k uint64) []uint64 {
	h = append(h, k)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[i] >= h[p] {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// popKey removes the lowest key from the heap h.
func popKey(h []uint64) []uint64 {
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	siftDown(h, 0)
	return h
}

// encodeBPE pre-tokenizes text and runs BPE on each word (byte-level,
// or on UTF-8 characters for rawBPE).
func (t *Tokenizer) encodeBPE(dst []int32, text string, sc *scratch) []int32 {
	if t.spmBPE && strings.IndexByte(text, ' ') >= 0 {
		text = strings.ReplaceAll(text, " ", spmSpace)
	}
	sc.cpts = appendCpts(sc.cpts[:0], text)
	if t.splitSpaces {
		return t.encodeSpaceSplit(dst, sc)
	}
	return t.encodeWords(dst, sc.cpts, sc)
}

// encodeSpaceSplit is the whitespace tokenizer's session: the text is cut
// at whitespace, which is dropped, and each run of the rest (lowercased
// where the normalizer says) is encoded alone.
func (t *Tokenizer) encodeSpaceSplit(dst []int32, sc *scratch) []int32 {
	all := sc.cpts
	for i := 0; i < len(all); {
		if cptFlags(all[i])&fSpace != 0 {
			i++
			continue
		}
		j := i
		for j < len(all) && cptFlags(all[j])&fSpace == 0 {
			j++
		}
		run := append(sc.cpts2[:0], all[i:j]...)
		if t.lowercase {
			for k, r := range run {
				run[k] = unicode.ToLower(r)
			}
		}
		sc.cpts2 = run
		dst = t.encodeWords(dst, run, sc)
		i = j
	}
	return dst
}

// encodeWords pre-tokenizes cpts and merges each word.
func (t *Tokenizer) encodeWords(dst []int32, cpts []rune, sc *scratch) []int32 {
	sc.segs, sc.segs2 = preSplit(t.pre, cpts, sc.segs, sc.segs2)
	s := 0
	for _, n := range sc.segs {
		w := sc.word[:0]
		for _, r := range cpts[s : s+int(n)] {
			w = appendUTF8(w, r)
		}
		sc.word = w
		s += int(n)
		dst = t.bpeWord(dst, w, sc)
	}
	return dst
}

// bpeWord merges the bytes of one word by merge rank.
func (t *Tokenizer) bpeWord(dst []int32, w []byte, sc *scratch) []int32 {
	if len(w) == 0 {
		return dst
	}
	if t.ignoreMerges {
		// A word that is a token as a whole is taken as is (Llama 3).
		enc := sc.buf[:0]
		for _, c := range w {
			enc = appendUTF8(enc, byteLevel[c])
		}
		sc.buf = enc
		if id := t.ids.getBytes(enc); id >= 0 {
			return append(dst, id)
		}
	}
	if t.rawBPE {
		return t.bpeWordUTF8(dst, w, sc)
	}
	if len(w) == 1 {
		if id := t.byteTok[w[0]]; id >= 0 {
			return append(dst, id)
		}
	}
	syms := sc.syms[:0]
	for i, c := range w {
		syms = append(syms, symbol{prev: int32(i) - 1, next: int32(i) + 1, start: int32(i), n: 1, id: t.byteTok[c]})
	}
	syms[len(syms)-1].next = -1
	return t.bpeMerge(dst, w, syms, sc)
}

// bpeWordUTF8 is bpeWord for SentencePiece-style BPE: the symbols start
// as the word's UTF-8 characters, and a word of newlines alone that is a
// token is taken whole (as llama.cpp's Gemma 4 tokenizer does).
func (t *Tokenizer) bpeWordUTF8(dst []int32, w []byte, sc *scratch) []int32 {
	if t.pre == preGemma4 && w[0] == '\n' && bytes.IndexFunc(w, func(r rune) bool { return r != '\n' }) < 0 {
		if id := t.ids.getBytes(w); id >= 0 {
			return append(dst, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(w); {
		_, n := utf8.DecodeRune(w[i:])
		syms = append(syms, symbol{prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, start: int32(i), n: int32(n), id: t.ids.getBytes(w[i : i+n])})
		i += n
	}
	syms[len(syms)-1].next = -1
	return t.bpeMerge(dst, w, syms, sc)
}

// bpeMerge merges the symbols syms of word w by merge rank.
func (t *Tokenizer) bpeMerge(dst []int32, w []byte, syms []symbol, sc *scratch) []int32 {
	sc.syms = syms
	if len(syms) <= shortWord {
		return t.bpeShort(dst, w, syms)
	}
	return t.bpeQueue(dst, w, syms, sc)
}

// bpeQueue merges a long word through a priority queue of candidate pairs
// ordered by rank, then position, as llama.cpp does.
func (t *Tokenizer) bpeQueue(dst []int32, w []byte, syms []symbol, sc *scratch) []int32 {
	h := sc.heap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		li, ri := syms[l].id, syms[r].id
		if li < 0 || ri < 0 {
			return
		}
		m, ok := t.merges.get(pairKey(li, ri))
		if !ok {
			return
		}
		h = push(h, bigram{key: m&^0xFFFFFFFF | uint64(l), size: syms[l].n + syms[r].n, id: int32(uint32(m))})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		var b bigram
		b, h = pop(h)
		// The pair is still as queued iff the sizes add up: symbols only
		// grow, and the left one's next changes only by absorbing it.
		left := b.left()
		ls := &syms[left]
		if ls.n == 0 || ls.next < 0 {
			continue
		}
		rs := &syms[ls.next]
		if ls.n+rs.n != b.size {
			continue
		}
		ls.n += rs.n
		ls.id = b.id
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = left
		}
		try(ls.prev, left)
		try(left, ls.next)
	}
	sc.heap = h
	return t.bpeEmit(dst, w, syms)
}

// shortWord is the length up to which bpeShort, a linear scan, beats the
// queue.
const shortWord = 24

// bpeShort merges a short word by scanning for the adjacent pair with the
// lowest rank (the leftmost on ties), which is the pair the queue would
// give: every adjacent pair is in the queue, and stale entries are skipped.
func (t *Tokenizer) bpeShort(dst []int32, w []byte, syms []symbol) []int32 {
	setRank := func(l int32) {
		s := &syms[l]
		s.rank = -1
		if s.next < 0 || s.id < 0 || syms[s.next].id < 0 {
			return
		}
		if m, ok := t.merges.get(pairKey(s.id, syms[s.next].id)); ok {
			s.rank, s.merged = int32(m>>32), int32(uint32(m))
		}
	}
	for i := range syms {
		setRank(int32(i))
	}
	for {
		best, bestRank := int32(-1), int32(0)
		for i := int32(0); i != -1; i = syms[i].next {
			if r := syms[i].rank; r >= 0 && (best < 0 || r < bestRank) {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		ls := &syms[best]
		rs := &syms[ls.next]
		ls.n += rs.n
		ls.id = ls.merged
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = best
		}
		setRank(best)
		if ls.prev >= 0 {
			setRank(ls.prev)
		}
	}
	return t.bpeEmit(dst, w, syms)
}

// bpeEmit writes the ids of the merged symbols.
func (t *Tokenizer) bpeEmit(dst []int32, w []byte, syms []symbol) []int32 {
	for i := int32(0); i != -1; i = syms[i].next {
		s := &syms[i]
		if s.id >= 0 {
			dst = append(dst, s.id)
			continue
		}
		if t.rawBPE {
			// Its bytes' <0xXX> tokens, skipping those that are not tokens.
			for _, c := range w[s.start : s.start+s.n] {
				if id := t.byteTok[c]; id >= 0 {
					dst = append(dst, id)
				}
			}
			continue
		}
		// Not a token: llama.cpp emits the tokens of the single bytes of
		// its byte-level spelling, skipping those that are not tokens.
		var tmp [4]byte
		for _, c := range w[s.start : s.start+s.n] {
			for _, x := range appendUTF8(tmp[:0], byteLevel[c]) {
				if id := t.rawByteTok[x]; id >= 0 {
					dst = append(dst, id)
				}
			}
		}
	}
	return dst
}
