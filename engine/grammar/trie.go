package grammar

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

// Vocab is what the matcher needs to know about a tokenizer vocabulary.
// *tokenizer.Tokenizer satisfies it.
type Vocab interface {
	// VocabSize is the number of token ids, 0..VocabSize()-1.
	VocabSize() int
	// Piece is the bytes the token adds to the output, possibly part of a
	// UTF-8 character; nil or empty for tokens that render nothing (control
	// tokens), which only token references in the grammar can match.
	Piece(id int32) []byte
	// PieceSpecial is the token's text with control tokens rendered (like
	// "<think>"), used to resolve <name> references.
	PieceSpecial(id int32) []byte
	// IsEOG reports whether the token ends generation; it is allowed only
	// where the grammar can end.
	IsEOG(id int32) bool
}

// Limits on the vocabulary: longer tokens are never allowed by characters.
const (
	MaxVocab       = 1 << 22
	maxTokenLength = 1024
)

// trie is the byte trie of a vocabulary's pieces, in depth-first order
// with the tokens sorted by their bytes, so a subtree is a contiguous range
// of both nodes and tokens. It depends only on the vocabulary and is shared
// by every matcher over it.
type trie struct {
	nVocab   int
	sorted   []int32 // token ids with a piece, by piece bytes
	b        []byte  // per node: its byte (root: 0)
	depth    []uint16
	end      []int32 // node after the subtree
	lo, hi   []int32 // tokens of the subtree: sorted[lo:hi]
	nEnd     []int32 // tokens ending at the node: sorted[lo:lo+nEnd]
	sum      []int32 // index in sums, or -1 for small subtrees
	sums     []summary
	maxDepth int
	eog      []int32
	eogBits  []uint64
	byLen    []int32  // the ids of sorted, longest piece first
	lens     []uint16 // their piece lengths
}

// summary describes the bytes below a node, to accept a whole subtree
// whose bytes all loop on a matcher state without walking it.
type summary struct {
	ascii   [2]uint64 // ASCII bytes below the node
	high    bool      // some byte >= 0x80 below the node
	invalid bool      // some token of the subtree is not (truncated) UTF-8
	maxLen  uint16    // the longest piece of the subtree
}

// minSummaryTokens is the smallest subtree worth a summary.
const minSummaryTokens = 4

func buildTrie(v Vocab) (*trie, error) {
	n := v.VocabSize()
	if n <= 0 || n > MaxVocab {
		return nil, fmt.Errorf("grammar: vocabulary of %d tokens (limit %d)", n, MaxVocab)
	}
	t := &trie{nVocab: n, eogBits: make([]uint64, (n+63)/64)}
	pieces := make([][]byte, n)
	for id := int32(0); id < int32(n); id++ {
		if v.IsEOG(id) {
			t.eog = append(t.eog, id)
			t.eogBits[id>>6] |= 1 << (id & 63)
			continue
		}
		p := v.Piece(id)
		if len(p) == 0 || len(p) > maxTokenLength {
			continue
		}
		pieces[id] = p
		t.sorted = append(t.sorted, id)
	}
	slices.SortFunc(t.sorted, func(a, b int32) int {
		if c := bytes.Compare(pieces[a], pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	t.byLen = slices.Clone(t.sorted)
	slices.SortStableFunc(t.byLen, func(a, b int32) int { return len(pieces[b]) - len(pieces[a]) })
	t.lens = make([]uint16, len(t.byLen))
	for i, id := range t.byLen {
		t.lens[i] = uint16(len(pieces[id]))
	}
	invalid := make([]bool, len(t.sorted))
	for k, id := range t.sorted {
		invalid[k] = !truncatedUTF8(pieces[id])
	}

	// root
	t.addNode(0, 0, 0)
	path := []int32{0} // node at each depth
	var prev []byte
	for k, id := range t.sorted {
		p := pieces[id]
		l := 0
		for l < len(p) && l < len(prev) && p[l] == prev[l] {
			l++
		}
		for len(path)-1 > l { // close nodes deeper than the common prefix
			t.close(path[len(path)-1], int32(k))
			path = path[:len(path)-1]
		}
		for d := l; d < len(p); d++ {
			path = append(path, t.addNode(p[d], d+1, int32(k)))
		}
		t.nEnd[path[len(path)-1]]++
		if len(p) > t.maxDepth {
			t.maxDepth = len(p)
		}
		prev = p
	}
	for len(path) > 0 {
		t.close(path[len(path)-1], int32(len(t.sorted)))
		path = path[:len(path)-1]
	}

	// summaries, children before parents
	nn := len(t.b)
	t.sum = make([]int32, nn)
	acc := make([]summary, nn)
	parent := make([]int32, nn)
	var st []int32
	for i := 0; i < nn; i++ {
		for len(st) > 0 && t.end[st[len(st)-1]] <= int32(i) {
			st = st[:len(st)-1]
		}
		if len(st) > 0 {
			parent[i] = st[len(st)-1]
		} else {
			parent[i] = -1
		}
		st = append(st, int32(i))
	}
	pre := make([]int32, len(t.sorted)+1)
	for k := range t.sorted {
		pre[k+1] = pre[k]
		if invalid[k] {
			pre[k+1]++
		}
	}
	for i := nn - 1; i >= 1; i-- {
		par := parent[i]
		s := &acc[par]
		c := t.b[i]
		if c < 128 {
			s.ascii[c>>6] |= 1 << (c & 63)
		} else {
			s.high = true
		}
		s.ascii[0] |= acc[i].ascii[0]
		s.ascii[1] |= acc[i].ascii[1]
		s.high = s.high || acc[i].high
	}
	for i := 0; i < nn; i++ {
		t.sum[i] = -1
		if t.hi[i]-t.lo[i] >= minSummaryTokens {
			s := acc[i]
			s.invalid = pre[t.hi[i]] > pre[t.lo[i]]
			s.maxLen = uint16(t.maxDepthBelow(int32(i)))
			t.sum[i] = int32(len(t.sums))
			t.sums = append(t.sums, s)
		}
	}
	return t, nil
}

// maxDepthBelow returns the depth of the deepest node of i's subtree.
func (t *trie) maxDepthBelow(i int32) int {
	d := int(t.depth[i])
	for j := i; j < t.end[i]; j++ {
		d = max(d, int(t.depth[j]))
	}
	return d
}

func (t *trie) addNode(b byte, depth int, lo int32) int32 {
	t.b = append(t.b, b)
	t.depth = append(t.depth, uint16(depth))
	t.end = append(t.end, 0)
	t.lo = append(t.lo, lo)
	t.hi = append(t.hi, 0)
	t.nEnd = append(t.nEnd, 0)
	return int32(len(t.b) - 1)
}

func (t *trie) close(node, hi int32) {
	t.end[node] = int32(len(t.b))
	t.hi[node] = hi
}

// truncatedUTF8 reports whether p decodes as UTF-8 under the matcher's
// rules, allowing the last character to be cut short.
func truncatedUTF8(p []byte) bool {
	var d utf8State
	for _, c := range p {
		var ok bool
		if d, _, ok = d.push(c); !ok {
			return false
		}
	}
	return true
}

// utf8State is a partial UTF-8 character: the bits so far and how many
// continuation bytes are missing.
type utf8State struct {
	val    uint32
	remain uint8
}

// push adds a byte. It returns the new state; complete is true when the
// byte finishes a character, which is then the state's val; ok is false
// for a byte that cannot continue. The decoding is strict UTF-8: NUL,
// stray continuation bytes, overlong forms, surrogates and code points
// above U+10FFFF are invalid, so every accepted output is valid UTF-8.
func (d utf8State) push(c byte) (next utf8State, complete, ok bool) {
	if d.remain == 0 {
		switch {
		case c == 0:
			return d, false, false
		case c < 0x80:
			return utf8State{val: uint32(c)}, true, true
		case c < 0xC2:
			return d, false, false
		case c < 0xE0:
			return utf8State{val: uint32(c & 0x1F), remain: 1}, false, true
		case c < 0xF0:
			return utf8State{val: uint32(c & 0x0F), remain: 2}, false, true
		case c < 0xF5:
			return utf8State{val: uint32(c & 0x07), remain: 3}, false, true
		}
		return d, false, false
	}
	if c&0xC0 != 0x80 {
		return d, false, false
	}
	first3 := d.remain == 2 && d.val <= 0x0F // after a three-byte lead
	first4 := d.remain == 3                  // after a four-byte lead
	d.val = d.val<<6 | uint32(c&0x3F)
	d.remain--
	switch {
	case first3 && (d.val < 0x20 || d.val >= 0x360 && d.val <= 0x37F):
		return d, false, false // overlong, or a surrogate
	case first4 && (d.val < 0x10 || d.val > 0x10F):
		return d, false, false // overlong, or above U+10FFFF
	}
	return d, d.remain == 0, true
}

// The trie of a vocabulary is kept for the few vocabularies last used, so
// matchers made for each request share it.
var trieCache struct {
	sync.Mutex
	keys  []Vocab
	tries []*trie
}

const trieCacheSize = 4

func trieFor(v Vocab) (*trie, error) {
	if !reflect.TypeOf(v).Comparable() {
		return buildTrie(v)
	}
	trieCache.Lock()
	for i, k := range trieCache.keys {
		if k == v && trieCache.tries[i].nVocab == v.VocabSize() {
			t := trieCache.tries[i]
			trieCache.Unlock()
			return t, nil
		}
	}
	trieCache.Unlock()
	t, err := buildTrie(v)
	if err != nil {
		return nil, err
	}
	trieCache.Lock()
	if len(trieCache.keys) >= trieCacheSize {
		trieCache.keys = trieCache.keys[1:]
		trieCache.tries = trieCache.tries[1:]
	}
	trieCache.keys = append(trieCache.keys, v)
	trieCache.tries = append(trieCache.tries, t)
	trieCache.Unlock()
	return t, nil
}
