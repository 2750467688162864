package grammar

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// Parse compiles GBNF grammar text. The grammar must define a rule named
// root; every referenced rule must be defined; left recursion is an error.
// A rule defined twice keeps its last definition, as in llama.cpp.
// Errors are *SyntaxError (with line and column) for text that does not
// parse, plain errors for a grammar that parses but cannot be used.
func Parse(src string) (*Grammar, error) {
	if len(src) > MaxSourceBytes {
		return nil, fmt.Errorf("grammar: %d bytes of text, more than the limit of %d", len(src), MaxSourceBytes)
	}
	p := &parser{src: src, ids: map[string]int32{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.finish()
}

type parser struct {
	src      string
	ids      map[string]int32
	names    []string
	rules    [][]elem // nil: not defined (yet)
	firstRef []int    // source offset of a rule's first reference, for errors
	nElems   int
	tokNames []string
	tokIdx   map[string]uint32
	depth    int
	chains   [][]int32 // rules of bounded repetitions, by remaining count - 1
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	if pos > len(p.src) {
		pos = len(p.src)
	}
	line, col := 1, 1
	for _, r := range p.src[:pos] {
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// at returns the byte at pos, or 0 past the end (the C parser's terminator).
func (p *parser) at(pos int) byte {
	if pos < len(p.src) {
		return p.src[pos]
	}
	return 0
}

func isWordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || '0' <= c && c <= '9'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// space skips blanks and comments, and line ends too when newlineOK.
func (p *parser) space(pos int, newlineOK bool) int {
	for pos < len(p.src) {
		c := p.src[pos]
		switch {
		case c == ' ' || c == '\t':
			pos++
		case c == '#':
			for pos < len(p.src) && p.src[pos] != '\r' && p.src[pos] != '\n' {
				pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			pos++
		default:
			return pos
		}
	}
	return pos
}

func (p *parser) symbol(name string, refPos int) (int32, error) {
	if id, ok := p.ids[name]; ok {
		return id, nil
	}
	return p.newSymbol(name, refPos)
}

func (p *parser) newSymbol(name string, refPos int) (int32, error) {
	if len(p.names) >= MaxRules {
		return 0, p.errAt(refPos, "more than %d rules", MaxRules)
	}
	id := int32(len(p.names))
	p.ids[name] = id
	p.names = append(p.names, name)
	p.rules = append(p.rules, nil)
	p.firstRef = append(p.firstRef, refPos)
	return id, nil
}

// generated makes a rule for a group or repetition, named after its parent.
func (p *parser) generated(base string, pos int) (int32, error) {
	return p.newSymbol(base+"_"+strconv.Itoa(len(p.names)), pos)
}

func (p *parser) setRule(id int32, r []elem, pos int) error {
	p.nElems += len(r)
	if p.nElems > MaxElements {
		return p.errAt(pos, "grammar too large: more than %d elements", MaxElements)
	}
	p.rules[id] = r
	return nil
}

func (p *parser) parse() error {
	pos := p.space(0, true)
	for pos < len(p.src) {
		var err error
		if pos, err = p.rule(pos); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) name(pos int) (int, error) {
	end := pos
	for end < len(p.src) && isWordChar(p.src[end]) {
		end++
	}
	if end == pos {
		return pos, p.errAt(pos, "expecting a rule name")
	}
	return end, nil
}

func (p *parser) rule(pos int) (int, error) {
	end, err := p.name(pos)
	if err != nil {
		return pos, err
	}
	name := p.src[pos:end]
	id, err := p.symbol(name, pos)
	if err != nil {
		return pos, err
	}
	q := p.space(end, false)
	if !(p.at(q) == ':' && p.at(q+1) == ':' && p.at(q+2) == '=') {
		return q, p.errAt(q, "expecting ::=")
	}
	q = p.space(q+3, true)
	if q, err = p.alternates(q, name, id, false); err != nil {
		return q, err
	}
	switch p.at(q) {
	case '\r':
		q++
		if p.at(q) == '\n' {
			q++
		}
	case '\n':
		q++
	default:
		if q < len(p.src) {
			return q, p.errAt(q, "expecting newline or end, found %q", p.charAt(q))
		}
	}
	return p.space(q, true), nil
}

func (p *parser) charAt(pos int) string {
	r, n := utf8.DecodeRuneInString(p.src[pos:])
	if r == utf8.RuneError && n <= 1 {
		return p.src[pos : pos+1]
	}
	return string(r)
}

func (p *parser) alternates(pos int, name string, id int32, nested bool) (int, error) {
	var r []elem
	pos, err := p.sequence(pos, name, &r, nested)
	if err != nil {
		return pos, err
	}
	for p.at(pos) == '|' {
		r = append(r, elem{op: opAlt})
		pos = p.space(pos+1, true)
		if pos, err = p.sequence(pos, name, &r, nested); err != nil {
			return pos, err
		}
	}
	r = append(r, elem{op: opEnd})
	return pos, p.setRule(id, r, pos)
}

// char reads one (possibly escaped) character of a literal or class.
func (p *parser) char(pos int) (uint32, int, error) {
	if pos >= len(p.src) {
		return 0, pos, p.errAt(pos, "unexpected end of input")
	}
	c := p.src[pos]
	if c == '\\' {
		switch p.at(pos + 1) {
		case 'x':
			return p.hex(pos+2, 2)
		case 'u':
			return p.hex(pos+2, 4)
		case 'U':
			return p.hex(pos+2, 8)
		case 't':
			return '\t', pos + 2, nil
		case 'r':
			return '\r', pos + 2, nil
		case 'n':
			return '\n', pos + 2, nil
		case '\\', '"', '[', ']', '-':
			return uint32(p.src[pos+1]), pos + 2, nil
		}
		if pos+1 >= len(p.src) {
			return 0, pos, p.errAt(pos, "unexpected end of input after \\")
		}
		return 0, pos, p.errAt(pos, "unknown escape \\%s", p.charAt(pos+1))
	}
	if c == 0 {
		return 0, pos, p.errAt(pos, "NUL byte in grammar text")
	}
	r, n := utf8.DecodeRuneInString(p.src[pos:])
	if r == utf8.RuneError && n <= 1 {
		return 0, pos, p.errAt(pos, "invalid UTF-8 in grammar text")
	}
	return uint32(r), pos + n, nil
}

func (p *parser) hex(pos, size int) (uint32, int, error) {
	var v uint32
	for i := 0; i < size; i++ {
		c := p.at(pos + i)
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, pos, p.errAt(pos+i, "expecting %d hex digits", size)
		}
		v = v<<4 | uint32(d)
	}
	return v, pos + size, nil
}

func (p *parser) integer(pos int) (uint64, int, error) {
	end := pos
	for end < len(p.src) && isDigit(p.src[end]) {
		end++
	}
	if end == pos {
		return 0, pos, p.errAt(pos, "expecting an integer")
	}
	v, err := strconv.ParseUint(p.src[pos:end], 10, 64)
	if err != nil {
		return 0, pos, p.errAt(pos, "integer %s out of range", p.src[pos:end])
	}
	return v, end, nil
}

// token reads <[id]> or <text>.
func (p *parser) token(pos int) (uint32, int, error) {
	start := pos
	pos++ // '<'
	if p.at(pos) == '[' {
		id, end, err := p.integer(pos + 1)
		if err != nil {
			return 0, pos, err
		}
		if id >= tokenNamed {
			return 0, pos, p.errAt(pos+1, "token id %d too large", id)
		}
		if p.at(end) != ']' {
			return 0, end, p.errAt(end, "expecting ']'")
		}
		if p.at(end+1) != '>' {
			return 0, end + 1, p.errAt(end+1, "expecting '>'")
		}
		return uint32(id), end + 2, nil
	}
	for pos < len(p.src) && p.src[pos] != '>' {
		pos++
	}
	if pos >= len(p.src) {
		return 0, pos, p.errAt(pos, "expecting '>'")
	}
	pos++
	text := p.src[start:pos]
	if len(text) > maxTokenNameLen {
		return 0, start, p.errAt(start, "token text longer than %d bytes", maxTokenNameLen)
	}
	if !utf8.ValidString(text) {
		return 0, start, p.errAt(start, "invalid UTF-8 in token text")
	}
	if p.tokIdx == nil {
		p.tokIdx = map[string]uint32{}
	}
	idx, ok := p.tokIdx[text]
	if !ok {
		idx = uint32(len(p.tokNames))
		p.tokNames = append(p.tokNames, text)
		p.tokIdx[text] = idx
	}
	return idx | tokenNamed, pos, nil
}

func (p *parser) sequence(pos int, name string, r *[]elem, nested bool) (int, error) {
	lastStart := len(*r)
	nPrev := uint64(1)
	var err error
	for pos < len(p.src) {
		c := p.src[pos]
		switch {
		case c == '"':
			pos++
			lastStart = len(*r)
			nPrev = 1
			for p.at(pos) != '"' {
				if pos >= len(p.src) {
					return pos, p.errAt(pos, "unexpected end of input in a string")
				}
				var ch uint32
				if ch, pos, err = p.char(pos); err != nil {
					return pos, err
				}
				*r = append(*r, elem{op: opChar, val: ch})
			}
			pos = p.space(pos+1, nested)
		case c == '[':
			pos++
			start := opChar
			if p.at(pos) == '^' {
				pos++
				start = opCharNot
			}
			lastStart = len(*r)
			nPrev = 1
			for p.at(pos) != ']' {
				if pos >= len(p.src) {
					return pos, p.errAt(pos, "unexpected end of input in a character class")
				}
				var ch uint32
				if ch, pos, err = p.char(pos); err != nil {
					return pos, err
				}
				t := start
				if lastStart < len(*r) {
					t = opCharAlt
				}
				*r = append(*r, elem{op: t, val: ch})
				if p.at(pos) == '-' && p.at(pos+1) != ']' {
					if pos+1 >= len(p.src) {
						return pos, p.errAt(pos+1, "unexpected end of input in a character class")
					}
					var hi uint32
					if hi, pos, err = p.char(pos + 1); err != nil {
						return pos, err
					}
					*r = append(*r, elem{op: opCharUpper, val: hi})
				}
			}
			pos = p.space(pos+1, nested)
		case c == '<' || c == '!':
			t := opToken
			if c == '!' {
				t = opTokenNot
				pos++
				if p.at(pos) != '<' {
					return pos, p.errAt(pos, "expecting '<' after '!'")
				}
			}
			var v uint32
			if v, pos, err = p.token(pos); err != nil {
				return pos, err
			}
			lastStart = len(*r)
			nPrev = 1
			*r = append(*r, elem{op: t, val: v})
			pos = p.space(pos, nested)
		case isWordChar(c):
			end, _ := p.name(pos)
			id, err := p.symbol(p.src[pos:end], pos)
			if err != nil {
				return pos, err
			}
			pos = p.space(end, nested)
			lastStart = len(*r)
			nPrev = 1
			*r = append(*r, elem{op: opRef, val: uint32(id)})
		case c == '(':
			if p.depth >= MaxNesting {
				return pos, p.errAt(pos, "parentheses nested deeper than %d", MaxNesting)
			}
			open := pos
			pos = p.space(pos+1, true)
			before := len(p.names)
			sub, err := p.generated(name, open)
			if err != nil {
				return pos, err
			}
			p.depth++
			pos, err = p.alternates(pos, name, sub, true)
			p.depth--
			if err != nil {
				return pos, err
			}
			nPrev = uint64(max(1, len(p.names)-before))
			lastStart = len(*r)
			*r = append(*r, elem{op: opRef, val: uint32(sub)})
			if p.at(pos) != ')' {
				return pos, p.errAt(pos, "expecting ')' to close the '(' at %s", p.lineCol(open))
			}
			pos = p.space(pos+1, nested)
		case c == '.':
			lastStart = len(*r)
			nPrev = 1
			*r = append(*r, elem{op: opCharAny})
			pos = p.space(pos+1, nested)
		case c == '*' || c == '+' || c == '?':
			at := pos
			pos = p.space(pos+1, nested)
			lo, hi := uint64(0), uint64(math.MaxUint64)
			if c == '+' {
				lo = 1
			} else if c == '?' {
				hi = 1
			}
			if err := p.repeat(at, name, r, lastStart, &nPrev, lo, hi); err != nil {
				return pos, err
			}
		case c == '{':
			at := pos
			pos = p.space(pos+1, nested)
			lo, end, err := p.integer(pos)
			if err != nil {
				return pos, err
			}
			pos = p.space(end, nested)
			hi := uint64(math.MaxUint64)
			switch p.at(pos) {
			case '}':
				hi = lo
				pos = p.space(pos+1, nested)
			case ',':
				pos = p.space(pos+1, nested)
				if isDigit(p.at(pos)) {
					if hi, end, err = p.integer(pos); err != nil {
						return pos, err
					}
					pos = p.space(end, nested)
				}
				if p.at(pos) != '}' {
					return pos, p.errAt(pos, "expecting '}'")
				}
				pos = p.space(pos+1, nested)
			default:
				return pos, p.errAt(pos, "expecting ',' or '}'")
			}
			if lo > maxRepetition {
				return pos, p.errAt(at, "repetition count %d exceeds the limit of %d", lo, maxRepetition)
			}
			if hi != math.MaxUint64 && hi < lo {
				return pos, p.errAt(at, "repetition {%d,%d}: maximum below minimum", lo, hi)
			}
			if hi != math.MaxUint64 && hi > maxRepetition {
				hi = math.MaxUint64 // llama.cpp treats a huge maximum as none
			}
			if err := p.repeat(at, name, r, lastStart, &nPrev, lo, hi); err != nil {
				return pos, err
			}
		default:
			return pos, nil
		}
	}
	return pos, nil
}

func (p *parser) lineCol(pos int) string {
	e := p.errAt(pos, "").(*SyntaxError)
	return fmt.Sprintf("%d:%d", e.Line, e.Col)
}

// repeat rewrites the last item S of the sequence for S{lo,hi}: S repeated
// lo times, then either a rule S' ::= S S' | (no maximum) or hi-lo nested
// optional rules S'(k) ::= S S'(k-1) | , as llama.cpp does.
func (p *parser) repeat(at int, name string, r *[]elem, lastStart int, nPrev *uint64, lo, hi uint64) error {
	if lastStart == len(*r) {
		return p.errAt(at, "expecting an item before the repetition operator")
	}
	noMax := hi == math.MaxUint64
	total := uint64(1)
	if !noMax && hi > 0 {
		total = hi
	} else if lo > 0 {
		total = lo
	}
	if *nPrev*total > maxRepetition || *nPrev > maxRepetition {
		return p.errAt(at, "repetition makes too many rules (%d repeated %d times, limit %d)", *nPrev, total, maxRepetition)
	}
	prev := append([]elem(nil), (*r)[lastStart:]...)
	if uint64(len(prev))*max(lo, 1) > MaxElements {
		return p.errAt(at, "grammar too large")
	}
	if lo == 0 {
		*r = (*r)[:lastStart]
	} else {
		for i := uint64(1); i < lo; i++ {
			*r = append(*r, prev...)
		}
	}
	if len(*r) > MaxElements {
		return p.errAt(at, "grammar too large: more than %d elements", MaxElements)
	}
	nOpt := uint64(1)
	if !noMax {
		nOpt = hi - lo
	}
	var last int32
	var chain []int32
	for i := uint64(0); i < nOpt; i++ {
		id, err := p.generated(name, at)
		if err != nil {
			return err
		}
		chain = append(chain, id)
		rec := append(make([]elem, 0, len(prev)+3), prev...)
		if noMax {
			rec = append(rec, elem{op: opRef, val: uint32(id)})
		} else if i > 0 {
			rec = append(rec, elem{op: opRef, val: uint32(last)})
		}
		rec = append(rec, elem{op: opAlt}, elem{op: opEnd})
		if err := p.setRule(id, rec, at); err != nil {
			return err
		}
		last = id
	}
	if !noMax && len(chain) > 1 {
		p.chains = append(p.chains, chain)
	}
	if nOpt > 0 {
		*r = append(*r, elem{op: opRef, val: uint32(last)})
	}
	*nPrev *= total
	return nil
}

// finish checks the rules and flattens them into a Grammar.
func (p *parser) finish() (*Grammar, error) {
	for id, r := range p.rules {
		if r == nil {
			return nil, p.errAt(p.firstRef[id], "undefined rule %q", p.names[id])
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, fmt.Errorf("grammar: no rule named root")
	}
	g := &Grammar{
		ruleStart:  make([]int32, len(p.rules)),
		ruleNames:  p.names,
		root:       root,
		tokenNames: p.tokNames,
	}
	g.elems = make([]elem, 0, p.nElems)
	for id, r := range p.rules {
		g.ruleStart[id] = int32(len(g.elems))
		g.elems = append(g.elems, r...)
	}
	g.ruleOf = make([]int32, len(g.elems))
	for id := range p.rules {
		end := len(g.elems)
		if id+1 < len(p.rules) {
			end = int(g.ruleStart[id+1])
		}
		for i := g.ruleStart[id]; i < int32(end); i++ {
			g.ruleOf[i] = int32(id)
		}
	}
	g.chainOf = make([]int32, len(p.rules))
	g.chainPos = make([]int32, len(p.rules))
	for i := range g.chainOf {
		g.chainOf[i] = -1
	}
	g.chains = p.chains
	for c, chain := range p.chains {
		for i, r := range chain {
			g.chainOf[r] = int32(c)
			g.chainPos[r] = int32(i)
		}
	}
	g.classAt = make([]int32, len(g.elems))
	for i := range g.classAt {
		g.classAt[i] = -1
	}
	for i := 0; i < len(g.elems); i++ {
		switch g.elems[i].op {
		case opChar, opCharNot, opCharAny:
			j := compileClass(g, i)
			i = int(g.classes[j].next) - 1
		case opToken, opTokenNot:
			g.hasTokens = true
		}
	}
	if name, ok := leftRecursion(g); ok {
		return nil, fmt.Errorf("grammar: left recursion in rule %q", name)
	}
	return g, nil
}

func compileClass(g *Grammar, start int) int32 {
	e := g.elems[start]
	c := class{neg: e.op == opCharNot, any: e.op == opCharAny}
	i := start
	if c.any {
		i++
	} else {
		for {
			lo := g.elems[i].val
			hi := lo
			i++
			if i < len(g.elems) && g.elems[i].op == opCharUpper {
				hi = g.elems[i].val
				i++
			}
			if lo <= hi { // an empty range like [z-a] matches nothing
				c.ranges = append(c.ranges, cpRange{lo, hi})
			}
			if i >= len(g.elems) || g.elems[i].op != opCharAlt {
				break
			}
		}
	}
	c.next = int32(i)
	sort.Slice(c.ranges, func(a, b int) bool { return c.ranges[a].lo < c.ranges[b].lo })
	merged := c.ranges[:0]
	for _, r := range c.ranges {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 && merged[n-1].hi != math.MaxUint32 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	c.ranges = merged
	for _, r := range c.ranges {
		for cp := r.lo; cp <= r.hi && cp < 128; cp++ {
			c.ascii[cp>>6] |= 1 << (cp & 63)
		}
	}
	someHigh := c.matchRange(0x80, 0x10FFFF)
	c.highNone = !someHigh
	// every high point matches iff no high point fails: test the complement
	inv := c
	inv.neg = !c.neg
	c.highAll = !c.any && !inv.matchRange(0x80, 0x10FFFF) || c.any
	idx := int32(len(g.classes))
	g.classes = append(g.classes, c)
	g.classAt[start] = idx
	return idx
}

// leftRecursion finds a rule that can reach itself without consuming
// input. Unlike llama.cpp's check, nullability is computed to a fixed point,
// so every grammar llama.cpp rejects is rejected and none can make the
// matcher's stacks grow without input.
func leftRecursion(g *Grammar) (string, bool) {
	n := len(g.ruleStart)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r := 0; r < n; r++ {
			if nullable[r] {
				continue
			}
			if ruleNullable(g, r, nullable) {
				nullable[r] = true
				changed = true
			}
		}
	}
	// edges: rule -> rules reachable at the left (through nullable prefixes)
	edges := make([][]int32, n)
	for r := 0; r < n; r++ {
		atLeft := true
		for i := g.ruleStart[r]; ; i++ {
			e := g.elems[i]
			if e.op == opEnd {
				break
			}
			switch e.op {
			case opAlt:
				atLeft = true
			case opRef:
				if atLeft {
					edges[r] = append(edges[r], int32(e.val))
					atLeft = nullable[e.val]
				}
			case opCharAlt, opCharUpper:
			default:
				atLeft = false
			}
		}
	}
	// iterative DFS for a cycle
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	type frame struct{ r, k int32 }
	var st []frame
	for s := 0; s < n; s++ {
		if color[s] != white {
			continue
		}
		st = append(st[:0], frame{int32(s), 0})
		color[s] = grey
		for len(st) > 0 {
			f := &st[len(st)-1]
			if int(f.k) < len(edges[f.r]) {
				t := edges[f.r][f.k]
				f.k++
				switch color[t] {
				case grey:
					return g.ruleNames[t], true
				case white:
					color[t] = grey
					st = append(st, frame{t, 0})
				}
				continue
			}
			color[f.r] = black
			st = st[:len(st)-1]
		}
	}
	return "", false
}

func ruleNullable(g *Grammar, r int, nullable []bool) bool {
	ok := true
	for i := g.ruleStart[r]; ; i++ {
		e := g.elems[i]
		switch e.op {
		case opEnd:
			return ok
		case opAlt:
			if ok {
				return true
			}
			ok = true
		case opRef:
			if !nullable[e.val] {
				ok = false
			}
		case opCharAlt, opCharUpper:
		default:
			ok = false
		}
	}
}
