package grammar

// refParser is a slow, direct recognizer over the compiled rules, written
// without the matcher's interning, caches and trie, to check it: stacks are
// plain slices of element positions, characters are matched by scanning the
// class elements.
type refParser struct {
	g      *Grammar
	stacks [][]int32
	d      utf8State // partial character
	bad    bool      // invalid UTF-8 seen
}

func newRef(g *Grammar) *refParser {
	r := &refParser{g: g}
	var out [][]int32
	for _, a := range r.alternatives(g.ruleStart[g.root]) {
		var st []int32
		if !r.eos(a) {
			st = []int32{a}
		}
		out = r.advance(st, out)
	}
	r.stacks = out
	return r
}

func (r *refParser) eos(p int32) bool {
	return r.g.elems[p].op == opEnd || r.g.elems[p].op == opAlt
}

func (r *refParser) alternatives(start int32) []int32 {
	var alts []int32
	a := start
	for {
		alts = append(alts, a)
		for !r.eos(a) {
			a++
		}
		if r.g.elems[a].op != opAlt {
			return alts
		}
		a++
	}
}

func key(st []int32) string {
	b := make([]byte, 0, 4*len(st))
	for _, p := range st {
		b = append(b, byte(p), byte(p>>8), byte(p>>16), byte(p>>24))
	}
	return string(b)
}

func contains(list [][]int32, st []int32) bool {
	k := key(st)
	for _, s := range list {
		if key(s) == k {
			return true
		}
	}
	return false
}

func (r *refParser) advance(st []int32, out [][]int32) [][]int32 {
	seen := map[string]bool{}
	todo := [][]int32{st}
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[key(cur)] {
			continue
		}
		seen[key(cur)] = true
		if len(cur) == 0 {
			if !contains(out, cur) {
				out = append(out, cur)
			}
			continue
		}
		pos := cur[len(cur)-1]
		e := r.g.elems[pos]
		if e.op != opRef {
			if !contains(out, cur) {
				out = append(out, cur)
			}
			continue
		}
		for _, a := range r.alternatives(r.g.ruleStart[e.val]) {
			next := append([]int32(nil), cur[:len(cur)-1]...)
			if !r.eos(pos + 1) {
				next = append(next, pos+1)
			}
			if !r.eos(a) {
				next = append(next, a)
			}
			todo = append(todo, next)
		}
	}
	return out
}

// matchChar scans the class at pos as llama.cpp does; it returns whether
// cp matches and the element after the class.
func (r *refParser) matchChar(pos int32, cp uint32) (bool, int32) {
	el := r.g.elems
	positive := el[pos].op == opChar || el[pos].op == opCharAny
	found := false
	for {
		if int(pos+1) < len(el) && el[pos+1].op == opCharUpper {
			found = found || el[pos].val <= cp && cp <= el[pos+1].val
			pos += 2
		} else if el[pos].op == opCharAny {
			found = true
			pos++
		} else {
			found = found || el[pos].val == cp
			pos++
		}
		if el[pos].op != opCharAlt {
			break
		}
	}
	return found == positive, pos
}

func (r *refParser) acceptChar(cp uint32) {
	var out [][]int32
	for _, st := range r.stacks {
		if len(st) == 0 {
			continue
		}
		pos := st[len(st)-1]
		if o := r.g.elems[pos].op; o == opToken || o == opTokenNot {
			continue
		}
		ok, after := r.matchChar(pos, cp)
		if !ok {
			continue
		}
		next := append([]int32(nil), st[:len(st)-1]...)
		if !r.eos(after) {
			next = append(next, after)
		}
		out = r.advance(next, out)
	}
	r.stacks = out
}

// partialOK reports whether some completion of a partial character with
// the given bits and missing bytes matches a stack top.
func (r *refParser) partialOK(val uint32, remain int) bool {
	lo := val << (6 * remain)
	hi := lo | (1<<(6*remain) - 1)
	if remain == 2 && lo < 0x800 {
		lo = 0x800
	}
	if remain == 3 && lo < 0x10000 {
		lo = 0x10000
	}
	hi = min(hi, 0x10FFFF)
	for _, st := range r.stacks {
		if len(st) == 0 {
			continue
		}
		pos := st[len(st)-1]
		if o := r.g.elems[pos].op; o == opToken || o == opTokenNot {
			continue
		}
		// the matching set is a union of intervals bounded by the class's
		// values, so testing lo, hi and those bounds is enough
		cands := []uint32{lo, hi}
		for p := pos; ; p++ {
			v := r.g.elems[p].val
			cands = append(cands, v, v+1, v-1)
			if o := r.g.elems[p+1].op; o != opCharAlt && o != opCharUpper {
				break
			}
		}
		for _, cp := range cands {
			if cp < lo || cp > hi {
				continue
			}
			if ok, _ := r.matchChar(pos, cp); ok {
				return true
			}
		}
	}
	return false
}

func (r *refParser) clone() *refParser {
	c := *r
	c.stacks = append([][]int32(nil), r.stacks...)
	return &c
}

// feed reads bytes; it reports whether the text so far is still a valid
// prefix.
func (r *refParser) feed(text string) bool {
	for i := 0; i < len(text) && !r.bad; i++ {
		var complete, ok bool
		r.d, complete, ok = r.d.push(text[i])
		if !ok {
			r.bad = true
			break
		}
		if complete {
			r.acceptChar(r.d.val)
			r.d = utf8State{}
		}
	}
	return r.ok()
}

func (r *refParser) ok() bool {
	if r.bad {
		return false
	}
	if r.d.remain > 0 {
		return r.partialOK(r.d.val, int(r.d.remain))
	}
	return len(r.stacks) > 0
}

func (r *refParser) canEnd() bool {
	if r.bad || r.d.remain > 0 {
		return false
	}
	for _, st := range r.stacks {
		if len(st) == 0 {
			return true
		}
	}
	return false
}

// prefixOK reports whether text (bytes) keeps the grammar alive, the last
// character possibly incomplete.
func prefixOK(g *Grammar, text string) bool { return newRef(g).feed(text) }

// completeOK reports whether text is a sentence of the grammar.
func completeOK(g *Grammar, text string) bool {
	r := newRef(g)
	r.feed(text)
	return r.canEnd()
}
