package grammar

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// Limits on a matcher's caches and stacks. When the caches pass their size
// the matcher drops them and keeps only its current state; a single state
// that passes a limit is an error (a grammar too ambiguous or too deeply
// nested to follow).
const (
	maxStackDepth = 1 << 16 // elements on one stack
	maxSetSize    = 1 << 13 // stacks in one state
	maxNodes      = 1 << 22 // interned stack nodes
	maxStates     = 1 << 20 // interned states
	denseStates   = 8192    // states with a 256-entry transition table
	maskCacheSize = 96      // masks kept per matcher
)

const (
	dead    int32 = -1
	unknown int32 = -2
)

// node is one element of a stack; stacks share their bottoms. Node 0 is
// the empty stack.
type node struct {
	pos    int32 // element at the top
	parent int32
	depth  int32
}

// state is a set of stacks plus a partial UTF-8 character.
type state struct {
	set       []int32 // stack nodes, ascending, distinct; 0 is the empty stack
	partial   utf8State
	trans     *[256]int32
	highLoop  int8      // 0 unknown, 1 every char >= 0x80 leads back here, -1 not
	loopYes   [2]uint64 // ASCII bytes known to lead back here
	loopNo    [2]uint64 // ASCII bytes known not to
	base      int32     // for a partial character: 1 + the state without it (0 unknown)
	canonYes  [2]uint64 // ASCII bytes known to lead to states with this canonical state
	canonNo   [2]uint64
	highCanon int8
	highTo    int32 // 2 + highTarget (0 unknown)
	hasTok    bool  // some stack has a token element on top
	mask      int32
	canon     int32 // 1 + the state with every bounded count at its largest (0 unknown)
	kmin      int32 // the smallest count left in a bounded repetition, or -1
}

// Matcher follows one generation through a grammar. It is not safe for
// concurrent use; make one per sequence (they share the grammar and the
// vocabulary's trie).
type Matcher struct {
	g      *Grammar
	v      Vocab
	t      *trie
	tokIDs []int32 // resolved <name> references

	nodes     []node
	nodeIdx   map[uint64]int32
	seen      []uint32
	stamp     uint32
	states    []state
	stateIdx  map[string]int32
	sparse    map[uint64]int32
	nDense    int
	start     int32
	cur       int32
	limitErr  error
	broken    error // the state could not be kept when the caches were dropped; until Reset
	masks     [][]uint64
	maskOwner []int32
	maskNext  int

	key        []byte
	todo       []int32
	out        []int32
	walk       []int32
	sortedBits []uint64
	tmpMask    []uint64
	posBuf     []int32
}

// NewMatcher prepares matching g against a vocabulary. Token references
// (<[id]>, <name>) are resolved here: an id outside the vocabulary or a
// name that is not the text of a token is an error.
func NewMatcher(g *Grammar, v Vocab) (*Matcher, error) {
	if g == nil || v == nil {
		return nil, fmt.Errorf("grammar: NewMatcher needs a grammar and a vocabulary")
	}
	t, err := trieFor(v)
	if err != nil {
		return nil, err
	}
	m := &Matcher{g: g, v: v, t: t}
	if len(g.tokenNames) > 0 {
		m.tokIDs = make([]int32, len(g.tokenNames))
		for i := range m.tokIDs {
			m.tokIDs[i] = -1
		}
		for id := int32(0); id < int32(t.nVocab); id++ {
			p := v.PieceSpecial(id)
			if len(p) < 3 || p[0] != '<' {
				continue
			}
			for i, name := range g.tokenNames {
				if m.tokIDs[i] < 0 && string(p) == name {
					m.tokIDs[i] = id
				}
			}
		}
		for i, name := range g.tokenNames {
			if m.tokIDs[i] < 0 {
				return nil, fmt.Errorf("grammar: token %s is not a token of the vocabulary", name)
			}
		}
	}
	for _, e := range g.elems {
		if (e.op == opToken || e.op == opTokenNot) && e.val&tokenNamed == 0 && int(e.val) >= t.nVocab {
			return nil, fmt.Errorf("grammar: token <[%d]> is outside the vocabulary of %d tokens", e.val, t.nVocab)
		}
	}
	m.walk = make([]int32, t.maxDepth+1)
	m.sortedBits = make([]uint64, (len(t.sorted)+63)/64)
	m.tmpMask = make([]uint64, (t.nVocab+63)/64)
	m.reset()
	if m.start < 0 {
		if m.limitErr != nil {
			return nil, m.limitErr
		}
		return nil, fmt.Errorf("grammar: the root rule matches nothing")
	}
	return m, nil
}

// reset drops every cache and computes the start state.
func (m *Matcher) reset() {
	m.nodes = append(m.nodes[:0], node{pos: -1, parent: -1})
	m.nodeIdx = map[uint64]int32{}
	m.seen = append(m.seen[:0], 0)
	m.states = m.states[:0]
	m.stateIdx = map[string]int32{}
	m.sparse = map[uint64]int32{}
	m.nDense = 0
	m.masks = m.masks[:0]
	m.maskOwner = m.maskOwner[:0]
	m.maskNext = 0
	m.limitErr = nil
	m.start = m.initial()
	m.cur = m.start
}

// Reset returns to the start of the grammar.
func (m *Matcher) Reset() {
	m.broken = nil
	if m.start < 0 || len(m.nodes) > maxNodes/2 || len(m.states) > maxStates/2 {
		m.reset()
		return
	}
	m.cur = m.start
}

func (m *Matcher) eos(pos int32) bool {
	o := m.g.elems[pos].op
	return o == opEnd || o == opAlt
}

func (m *Matcher) intern(pos, parent int32) int32 {
	k := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if n, ok := m.nodeIdx[k]; ok {
		return n
	}
	d := m.nodes[parent].depth + 1
	if d > maxStackDepth || len(m.nodes) >= maxNodes {
		if m.limitErr == nil {
			m.limitErr = fmt.Errorf("grammar: stacks deeper than %d or more than %d stack nodes: input nested too deeply for the grammar", maxStackDepth, maxNodes)
		}
		return -1
	}
	n := int32(len(m.nodes))
	m.nodes = append(m.nodes, node{pos: pos, parent: parent, depth: d})
	m.seen = append(m.seen, 0)
	m.nodeIdx[k] = n
	return n
}

func (m *Matcher) newStamp() {
	m.stamp++
	if m.stamp == 0 {
		clear(m.seen)
		m.stamp = 1
	}
	m.out = m.out[:0]
}

// expand adds to m.out the stacks that stack n becomes once the rule
// references on its top are replaced by their alternatives, until a
// terminal (class or token) or the empty stack is on top.
func (m *Matcher) expand(n int32) {
	if n < 0 {
		return
	}
	m.todo = append(m.todo[:0], n)
	for len(m.todo) > 0 {
		s := m.todo[len(m.todo)-1]
		m.todo = m.todo[:len(m.todo)-1]
		if m.seen[s] == m.stamp {
			continue
		}
		m.seen[s] = m.stamp
		if s == 0 {
			m.out = append(m.out, 0)
			continue
		}
		nd := m.nodes[s]
		e := m.g.elems[nd.pos]
		if e.op != opRef {
			m.out = append(m.out, s)
			continue
		}
		base := nd.parent
		if !m.eos(nd.pos + 1) {
			if base = m.intern(nd.pos+1, base); base < 0 {
				return
			}
		}
		a := m.g.ruleStart[e.val]
		for {
			if m.eos(a) {
				m.todo = append(m.todo, base)
			} else {
				c := m.intern(a, base)
				if c < 0 {
					return
				}
				m.todo = append(m.todo, c)
			}
			for !m.eos(a) {
				a++
			}
			if m.g.elems[a].op != opAlt {
				break
			}
			a++
		}
	}
}

func (m *Matcher) initial() int32 {
	m.newStamp()
	a := m.g.ruleStart[m.g.root]
	for {
		if m.eos(a) {
			m.expand(0)
		} else {
			m.expand(m.intern(a, 0))
		}
		for !m.eos(a) {
			a++
		}
		if m.g.elems[a].op != opAlt {
			break
		}
		a++
	}
	return m.internState(m.out, utf8State{})
}

// internState returns the id of the state (set, partial); set is sorted in
// place and copied when new.
func (m *Matcher) internState(set []int32, p utf8State) int32 {
	if len(set) == 0 || m.limitErr != nil {
		return dead
	}
	slices.Sort(set)
	set = slices.Compact(set)
	k := append(m.key[:0], byte(p.remain), byte(p.val), byte(p.val>>8), byte(p.val>>16))
	for _, n := range set {
		k = append(k, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
	m.key = k
	if s, ok := m.stateIdx[string(k)]; ok {
		return s
	}
	if len(set) > maxSetSize || len(m.states) >= maxStates {
		m.limitErr = fmt.Errorf("grammar: more than %d parallel parses or %d states: the grammar is too ambiguous to follow", maxSetSize, maxStates)
		return dead
	}
	st := state{set: slices.Clone(set), partial: p, mask: -1}
	for _, n := range st.set {
		if n != 0 {
			o := m.g.elems[m.nodes[n].pos].op
			if o == opToken || o == opTokenNot {
				st.hasTok = true
			}
		}
	}
	id := int32(len(m.states))
	m.states = append(m.states, st)
	m.stateIdx[string(k)] = id
	return id
}

// step follows the complete character cp from state s.
func (m *Matcher) step(s int32, cp uint32) int32 {
	m.newStamp()
	for _, n := range m.states[s].set {
		if n == 0 {
			continue
		}
		nd := m.nodes[n]
		ci := m.g.classAt[nd.pos]
		if ci < 0 {
			continue // a token element
		}
		c := &m.g.classes[ci]
		if !c.match(cp) {
			continue
		}
		nx := nd.parent
		if !m.eos(c.next) {
			nx = m.intern(c.next, nd.parent)
		}
		m.expand(nx)
	}
	return m.internState(m.out, utf8State{})
}

// viable reports whether some completion of the partial character p is
// accepted by a stack of s.
func (m *Matcher) viable(s int32, p utf8State) bool {
	shift := 6 * uint32(p.remain)
	lo := p.val << shift
	hi := lo | (1<<shift - 1)
	if p.remain == 2 && lo < 0x800 {
		lo = 0x800
	} else if p.remain == 3 && lo < 0x10000 {
		lo = 0x10000
	}
	if hi > 0x10FFFF {
		hi = 0x10FFFF
	}
	if lo > hi {
		return false
	}
	for _, n := range m.states[s].set {
		if n == 0 {
			continue
		}
		if ci := m.g.classAt[m.nodes[n].pos]; ci >= 0 && m.g.classes[ci].matchRange(lo, hi) {
			return true
		}
	}
	return false
}

func (m *Matcher) computeTrans(s int32, b byte) int32 {
	np, complete, ok := m.states[s].partial.push(b)
	if !ok {
		return dead
	}
	if complete {
		return m.step(s, np.val)
	}
	if !m.viable(s, np) {
		return dead
	}
	return m.internState(append(m.out[:0], m.states[s].set...), np)
}

// next is the state after byte b from state s, or dead.
func (m *Matcher) next(s int32, b byte) int32 {
	if t := m.states[s].trans; t != nil {
		if r := t[b]; r != unknown {
			return r
		}
		r := m.computeTrans(s, b)
		t[b] = r
		return r
	}
	k := uint64(s)<<8 | uint64(b)
	if r, ok := m.sparse[k]; ok {
		return r
	}
	r := m.computeTrans(s, b)
	if m.nDense < denseStates {
		t := new([256]int32)
		for i := range t {
			t[i] = unknown
		}
		t[b] = r
		m.states[s].trans = t
		m.nDense++
	} else {
		m.sparse[k] = r
	}
	return r
}

// highLoops reports whether every character >= 0x80 leads from s back to
// s (with canon: to a state whose canonical state is s).
func (m *Matcher) highLoops(s int32, canon bool) bool {
	h := &m.states[s].highLoop
	if canon {
		h = &m.states[s].highCanon
	}
	if *h != 0 {
		return *h > 0
	}
	any := false
	ok := true
	for _, n := range m.states[s].set {
		if n == 0 {
			continue
		}
		ci := m.g.classAt[m.nodes[n].pos]
		if ci < 0 {
			continue
		}
		c := &m.g.classes[ci]
		switch {
		case c.highAll:
			any = true
		case c.highNone:
		default:
			ok = false
		}
	}
	ok = ok && any && m.leadsBack(s, m.step(s, 0x4E00), canon)
	r := int8(-1)
	if ok {
		r = 1
	}
	if canon {
		m.states[s].highCanon = r
	} else {
		m.states[s].highLoop = r
	}
	return ok
}

// leadsBack reports whether next is s (with canon: next is alive and its
// canonical state is s).
func (m *Matcher) leadsBack(s, next int32, canon bool) bool {
	if !canon || next < 0 {
		return next == s
	}
	c, _ := m.canonical(next)
	return c == s
}

// baseOf returns the state s without its partial character.
func (m *Matcher) baseOf(s int32) int32 {
	base := m.states[s].base
	if base == 0 {
		base = m.internState(append(m.out[:0], m.states[s].set...), utf8State{}) + 1
		m.states[s].base = base
	}
	return base - 1
}

// loops reports whether every token of a subtree with summary sum, read
// from s, ends in s: then all of them are allowed.
func (m *Matcher) loops(s int32, sum *summary) bool {
	return m.loopsFrom(s, sum, false)
}

// canonLoops is loops modulo canonical states: every token of the subtree
// leads from s to states with s's canonical state, and s has more items
// left in each bounded repetition than the subtree has bytes below
// (remaining), so no count runs out: then all of them are allowed.
func (m *Matcher) canonLoops(s int32, sum *summary, remaining int) bool {
	c, k := m.canonical(s)
	if c >= 0 && k > remaining && m.loopsFrom(c, sum, true) {
		return true
	}
	// inside the character that enters a repetition (the first item of
	// a string): when every character >= 0x80 leads to one state and the
	// subtree loops from there, the whole subtree is allowed too
	if m.states[s].partial.remain == 0 || sum.invalid {
		return false
	}
	y := m.highTarget(m.baseOf(s))
	if y < 0 {
		return false
	}
	cy, ky := m.canonical(y)
	return cy >= 0 && ky > remaining && m.loopsFrom(cy, sum, true)
}

// highTarget returns the state every character >= 0x80 leads to from s,
// or dead when they lead to different states or some to none.
func (m *Matcher) highTarget(s int32) int32 {
	if s < 0 {
		return dead
	}
	if h := m.states[s].highTo; h != 0 {
		return h - 2
	}
	any, ok := false, true
	for _, n := range m.states[s].set {
		if n == 0 {
			continue
		}
		ci := m.g.classAt[m.nodes[n].pos]
		if ci < 0 {
			continue
		}
		switch c := &m.g.classes[ci]; {
		case c.highAll:
			any = true
		case !c.highNone:
			ok = false
		}
	}
	r := dead
	if ok && any {
		r = m.step(s, 0x4E00)
	}
	m.states[s].highTo = r + 2
	return r
}

func (m *Matcher) loopsFrom(s int32, sum *summary, canon bool) bool {
	if m.states[s].partial.remain != 0 {
		// inside a character: when every character >= 0x80 leads from the
		// state before it back there, completing it returns there too
		if sum.invalid {
			return false
		}
		if s = m.baseOf(s); s < 0 || !m.highLoops(s, canon) {
			return false
		}
	} else if sum.high && (sum.invalid || !m.highLoops(s, canon)) {
		return false
	}
	yes, no := &m.states[s].loopYes, &m.states[s].loopNo
	if canon {
		yes, no = &m.states[s].canonYes, &m.states[s].canonNo
	}
	if sum.ascii[0]&no[0] != 0 || sum.ascii[1]&no[1] != 0 {
		return false
	}
	for w := 0; w < 2; w++ {
		for x := sum.ascii[w] &^ yes[w]; x != 0; x &= x - 1 {
			bit := uint64(1) << bits.TrailingZeros64(x)
			b := byte(w*64 + bits.TrailingZeros64(x))
			ok := m.leadsBack(s, m.next(s, b), canon)
			// next may grow m.states: find the bits again
			yes, no = &m.states[s].loopYes, &m.states[s].loopNo
			if canon {
				yes, no = &m.states[s].canonYes, &m.states[s].canonNo
			}
			if !ok {
				no[w] |= bit
				return false
			}
			yes[w] |= bit
		}
	}
	return true
}

// prepare drops the caches when they are too large or a limit was hit,
// keeping the current state.
func (m *Matcher) prepare() error {
	if m.broken != nil {
		return m.broken
	}
	if m.limitErr == nil && len(m.nodes) < maxNodes/2 && len(m.states) < maxStates/2 {
		return nil
	}
	cur := m.states[m.cur]
	var stacks [][]int32
	for _, n := range cur.set {
		var st []int32
		for ; n > 0; n = m.nodes[n].parent {
			st = append(st, m.nodes[n].pos)
		}
		stacks = append(stacks, st)
	}
	m.reset()
	if m.start < 0 {
		m.broken = fmt.Errorf("grammar: cannot restart the grammar: %w", m.limitErr)
		return m.broken
	}
	set := make([]int32, 0, len(stacks))
	for _, st := range stacks {
		n := int32(0)
		for i := len(st) - 1; i >= 0 && n >= 0; i-- {
			n = m.intern(st[i], n)
		}
		if n < 0 {
			break
		}
		set = append(set, n)
	}
	if len(set) == len(stacks) {
		m.cur = m.internState(set, cur.partial)
	} else {
		m.cur = dead
	}
	if m.cur < 0 {
		m.cur = m.start
		m.broken = fmt.Errorf("grammar: cannot restore the parse state: %w", m.limitErr)
		return m.broken
	}
	return nil
}

// ensureMask returns the allowed-token bits (by token id) of the current
// state, computing and caching them when needed.
func (m *Matcher) ensureMask() ([]uint64, error) {
	if err := m.prepare(); err != nil {
		return nil, err
	}
	if k := m.states[m.cur].mask; k >= 0 {
		return m.masks[k], nil
	}
	mask := m.maskOf(m.cur)
	if m.limitErr != nil {
		// a walk passed a limit: retry once on fresh caches
		if err := m.prepare(); err != nil {
			return nil, err
		}
		mask = m.maskOf(m.cur)
		if m.limitErr != nil {
			return nil, m.limitErr
		}
	}
	return mask, nil
}

// maskOf returns the mask of s, from the cache, from the mask of its
// canonical state, or by walking the trie.
//
// In a bounded repetition S{m,n} the states after each item differ only in
// how many items are left, and a token of L bytes cannot use more than L
// of them, so two states whose counts left are all at least L treat that
// token alike. The canonical state has every count at its largest; its
// mask, computed once, serves every state of the repetition for the tokens
// no longer than the smallest count left, and only longer tokens are
// checked one by one. Long strings with a maxLength stay fast this way.
// exactCheckShare: a mask comes from the canonical state when at most
// 1/exactCheckShare of the vocabulary needs a check of its own (tests
// lower it to force that path).
var exactCheckShare = 16

func (m *Matcher) maskOf(s int32) []uint64 {
	if k := m.states[s].mask; k >= 0 {
		return m.masks[k]
	}
	c, kmin := m.canonical(s)
	if c < 0 || c == s || kmin < 1 || m.states[s].hasTok {
		return m.computeMask(s)
	}
	// with few items left most tokens would need a check of their own,
	// and the walk, cut short by the count, is cheaper
	t := m.t
	if longer := sort.Search(len(t.lens), func(i int) bool { return int(t.lens[i]) <= kmin }); longer > len(t.lens)/exactCheckShare {
		return m.computeMask(s)
	}
	copy(m.tmpMask, m.maskOf(c))
	mask := m.maskSlot(s)
	copy(mask, m.tmpMask)
	for i, id := range t.byLen {
		if int(t.lens[i]) <= kmin {
			break
		}
		st := s
		for _, b := range m.v.Piece(id) {
			if st = m.next(st, b); st < 0 {
				break
			}
		}
		if st >= 0 {
			mask[id>>6] |= 1 << (id & 63)
		} else {
			mask[id>>6] &^= 1 << (id & 63)
		}
	}
	return mask
}

// canonical returns the state s with the position in every bounded
// repetition moved to the repetition's largest count, and the smallest
// count left in s (-1 when s is in no repetition, 0 when in the last item).
func (m *Matcher) canonical(s int32) (int32, int) {
	st := &m.states[s]
	if st.canon != 0 {
		return st.canon - 1, int(st.kmin)
	}
	g := m.g
	kmin := -1
	var set []int32
	for _, n := range m.states[s].set {
		pos := m.posBuf[:0]
		for ; n > 0; n = m.nodes[n].parent {
			pos = append(pos, m.nodes[n].pos)
		}
		m.posBuf = pos
		for i, p := range pos {
			r := g.ruleOf[p]
			ch := g.chainOf[r]
			if ch < 0 {
				continue
			}
			k := int(g.chainPos[r])
			if kmin < 0 || k < kmin {
				kmin = k
			}
			if k >= 1 {
				chain := g.chains[ch]
				top := chain[len(chain)-1]
				pos[i] = g.ruleStart[top] + (p - g.ruleStart[r])
			}
		}
		n = 0
		for i := len(pos) - 1; i >= 0 && n >= 0; i-- {
			n = m.intern(pos[i], n)
		}
		if n < 0 {
			return dead, kmin
		}
		set = append(set, n)
	}
	c := s
	if kmin >= 1 {
		c = m.internState(set, m.states[s].partial)
	}
	m.states[s].canon = c + 1
	m.states[s].kmin = int32(kmin)
	return c, kmin
}

func setRange(b []uint64, lo, hi int32) {
	for lo < hi {
		w := lo >> 6
		off := uint(lo & 63)
		n := int32(64 - off)
		if hi-lo < n {
			n = hi - lo
		}
		var bitsv uint64
		if n == 64 {
			bitsv = ^uint64(0)
		} else {
			bitsv = (1<<uint(n) - 1) << off
		}
		b[w] |= bitsv
		lo += n
	}
}

func (m *Matcher) maskSlot(s int32) []uint64 {
	words := (m.t.nVocab + 63) / 64
	var k int
	if len(m.masks) < maskCacheSize {
		m.masks = append(m.masks, make([]uint64, words))
		m.maskOwner = append(m.maskOwner, s)
		k = len(m.masks) - 1
	} else {
		k = m.maskNext
		m.maskNext = (m.maskNext + 1) % maskCacheSize
		if o := m.maskOwner[k]; o >= 0 && int(o) < len(m.states) {
			m.states[o].mask = -1
		}
		m.maskOwner[k] = s
		clear(m.masks[k])
	}
	m.states[s].mask = int32(k)
	return m.masks[k]
}

func (m *Matcher) computeMask(s int32) []uint64 {
	t := m.t
	sb := m.sortedBits
	clear(sb)
	ws := m.walk
	ws[0] = s
	for i := int32(1); i < int32(len(t.b)); {
		d := t.depth[i]
		ns := m.next(ws[d-1], t.b[i])
		if ns < 0 {
			i = t.end[i]
			continue
		}
		if k := t.sum[i]; k >= 0 && (m.loops(ns, &t.sums[k]) || m.canonLoops(ns, &t.sums[k], int(t.sums[k].maxLen)-int(d))) {
			setRange(sb, t.lo[i], t.hi[i])
			i = t.end[i]
			continue
		}
		if n := t.nEnd[i]; n > 0 {
			setRange(sb, t.lo[i], t.lo[i]+n)
		}
		ws[d] = ns
		i++
	}
	mask := m.maskSlot(s)
	for w, x := range sb {
		for ; x != 0; x &= x - 1 {
			id := t.sorted[w*64+bits.TrailingZeros64(x)]
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	st := &m.states[s]
	if st.partial.remain == 0 {
		if st.set[0] == 0 {
			for i, x := range t.eogBits {
				mask[i] |= x
			}
		}
		if st.hasTok {
			for _, n := range st.set {
				if n == 0 {
					continue
				}
				e := m.g.elems[m.nodes[n].pos]
				switch e.op {
				case opToken:
					id := m.tokenID(e.val)
					if !m.v.IsEOG(id) {
						mask[id>>6] |= 1 << (id & 63)
					}
				case opTokenNot:
					id := m.tokenID(e.val)
					was := mask[id>>6] & (1 << (id & 63))
					for i := range mask {
						mask[i] |= ^t.eogBits[i]
					}
					if tail := t.nVocab & 63; tail != 0 {
						mask[len(mask)-1] &= 1<<uint(tail) - 1
					}
					mask[id>>6] = mask[id>>6]&^(1<<(id&63)) | was
				}
			}
		}
	}
	return mask
}

func (m *Matcher) tokenID(v uint32) int32 {
	if v&tokenNamed != 0 {
		return m.tokIDs[v&^tokenNamed]
	}
	return int32(v)
}

// tokenStep follows tok through the token elements on top of s's stacks.
func (m *Matcher) tokenStep(s int32, tok int32) int32 {
	m.newStamp()
	for _, n := range m.states[s].set {
		if n == 0 {
			continue
		}
		nd := m.nodes[n]
		e := m.g.elems[nd.pos]
		var match bool
		switch e.op {
		case opToken:
			match = m.tokenID(e.val) == tok
		case opTokenNot:
			match = m.tokenID(e.val) != tok
		default:
			continue
		}
		if !match {
			continue
		}
		nx := nd.parent
		if !m.eos(nd.pos + 1) {
			nx = m.intern(nd.pos+1, nd.parent)
		}
		m.expand(nx)
	}
	return m.internState(m.out, utf8State{})
}

// after returns the state after tok from the current state, or dead.
func (m *Matcher) after(tok int32) int32 {
	s := dead
	if p := m.v.Piece(tok); len(p) > 0 && len(p) <= maxTokenLength {
		s = m.cur
		for _, b := range p {
			if s = m.next(s, b); s < 0 {
				break
			}
		}
	}
	cur := &m.states[m.cur]
	if !cur.hasTok || cur.partial.remain != 0 {
		return s
	}
	ts := m.tokenStep(m.cur, tok)
	switch {
	case ts < 0:
		return s
	case s < 0:
		return ts
	}
	// both readings survive: their union, with the character reading's
	// partial UTF-8 state
	set := append(append(m.out[:0], m.states[s].set...), m.states[ts].set...)
	slices.Sort(set)
	set = slices.Compact(set)
	return m.internState(set, m.states[s].partial)
}

func (m *Matcher) inVocab(tok int32) bool { return tok >= 0 && int(tok) < m.t.nVocab }

func (m *Matcher) isEOG(tok int32) bool {
	return m.t.eogBits[tok>>6]&(1<<(tok&63)) != 0
}

// Allowed reports whether tok keeps the output a valid prefix of the
// grammar. End-of-generation tokens are allowed only where the grammar can
// end.
func (m *Matcher) Allowed(tok int32) bool {
	if !m.inVocab(tok) || m.prepare() != nil {
		return false
	}
	if k := m.states[m.cur].mask; k >= 0 {
		return m.masks[k][tok>>6]&(1<<(tok&63)) != 0
	}
	if m.isEOG(tok) {
		return m.CanEnd()
	}
	return m.after(tok) >= 0
}

// Mask sets the logits of the tokens the grammar does not allow here to
// -Inf. Logits past the vocabulary are masked too. If the matcher cannot
// follow the grammar (a limit was hit) every logit is masked and Accept
// reports the error.
func (m *Matcher) Mask(logits []float32) {
	ninf := float32(math.Inf(-1))
	mask, err := m.ensureMask()
	if err != nil {
		for i := range logits {
			logits[i] = ninf
		}
		return
	}
	n := min(len(logits), m.t.nVocab)
	for w := 0; w*64 < n; w++ {
		x := mask[w]
		base := w * 64
		if x == ^uint64(0) && base+64 <= n {
			continue
		}
		lim := min(64, n-base)
		if x == 0 {
			for j := range lim {
				logits[base+j] = ninf
			}
			continue
		}
		for j := range lim {
			if x&(1<<uint(j)) == 0 {
				logits[base+j] = ninf
			}
		}
	}
	for i := n; i < len(logits); i++ {
		logits[i] = ninf
	}
}

// Accept advances past tok. It is an error if tok is not allowed; the
// state is then unchanged. An end-of-generation token where the grammar
// can end leaves the state as it is.
func (m *Matcher) Accept(tok int32) error {
	if !m.inVocab(tok) {
		return fmt.Errorf("grammar: token %d outside the vocabulary of %d", tok, m.t.nVocab)
	}
	if err := m.prepare(); err != nil {
		return err
	}
	if m.isEOG(tok) {
		if m.CanEnd() {
			return nil
		}
		return fmt.Errorf("grammar: end-of-generation token %d before the grammar is complete", tok)
	}
	s := m.after(tok)
	if s < 0 {
		if m.limitErr != nil {
			return m.limitErr
		}
		return fmt.Errorf("grammar: token %d (%q) does not continue the grammar here", tok, m.v.Piece(tok))
	}
	m.cur = s
	return nil
}

// CanEnd reports whether the output so far is a complete sentence of the
// grammar.
func (m *Matcher) CanEnd() bool {
	if m.broken != nil || m.cur < 0 {
		return false
	}
	st := &m.states[m.cur]
	return st.partial.remain == 0 && st.set[0] == 0
}

// Done reports whether the grammar is complete and no token can continue
// it: generation must end.
func (m *Matcher) Done() bool {
	if m.broken != nil {
		return true
	}
	if !m.CanEnd() {
		return false
	}
	if len(m.states[m.cur].set) == 1 {
		return true
	}
	mask, err := m.ensureMask()
	if err != nil {
		return true
	}
	for i, x := range mask {
		if x&^m.t.eogBits[i] != 0 {
			return false
		}
	}
	return true
}
