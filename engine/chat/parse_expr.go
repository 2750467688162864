package chat

import (
	"strconv"
)

// The expression grammar, loosest binding first: conditional, or, and,
// not, comparisons (and in), + -, ~, * / // %, **, unary, then primaries
// with their postfixes (attributes, subscripts, calls, filters, tests).

// parseTupleExpr parses "a, b" as a tuple (used by set).
func (p *parser) parseTupleExpr() (expr, error) {
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return e, nil
	}
	items := []expr{e}
	for p.isOp(",") {
		p.next()
		if p.peek().kind == tBlockEnd {
			break
		}
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	return &listExpr{items: items, tuple: true}, nil
}

// parseExpr parses a full expression including "a if c else b".
func (p *parser) parseExpr() (expr, error) {
	if err := p.enter(p.peek().pos); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.next()
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var no expr
		if p.isName("else") {
			p.next()
			if no, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{cond: c, yes: e, no: no}
	}
	return e, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isName("or") {
		t := p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "or", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isName("and") {
		t := p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "and", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x, pos: t.pos}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: first, pos: p.peek().pos}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case t.kind == tName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.val == "not" && p.toks[p.i+1].kind == tName && p.toks[p.i+1].val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (expr, error) {
	l, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseConcat() (expr, error) {
	l, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	for p.isOp("~") {
		t := p.next()
		r, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "~", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseMath2() (expr, error) {
	l, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.next()
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: t.val, l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parsePow() (expr, error) {
	l, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.isOp("**") {
		t := p.next()
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		l = &binExpr{op: "**", l: l, r: r, pos: t.pos}
	}
	return l, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	var e expr
	var err error
	if t.kind == tOp && (t.val == "-" || t.val == "+") {
		p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{op: t.val, x: x, pos: t.pos}
	} else {
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
		if e, err = p.parsePostfix(e); err != nil {
			return nil, err
		}
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &constExpr{v: true}, nil
		case "false", "False":
			return &constExpr{v: false}, nil
		case "none", "None":
			return &constExpr{v: nil}, nil
		}
		return &nameExpr{name: t.val, pos: t.pos}, nil
	case tString:
		s := t.val
		for p.peek().kind == tString {
			s += p.next().val
		}
		return &constExpr{v: s}, nil
	case tInt:
		v, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, p.errAt(t.pos, "integer literal %s out of range", t.val)
		}
		return &constExpr{v: v}, nil
	case tFloat:
		v, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, p.errAt(t.pos, "bad float literal %s", t.val)
		}
		return &constExpr{v: v}, nil
	case tOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.next()
				return &listExpr{tuple: true}, nil
			}
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{e}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					x, err := p.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, x)
				}
				e = &listExpr{items: items, tuple: true}
			}
			return e, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.isOp("]") {
				x, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return l, p.expectOp("]")
		case "{":
			d := &dictExpr{}
			for !p.isOp("}") {
				k, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
				if !p.isOp(",") {
					break
				}
				p.next()
			}
			return d, p.expectOp("}")
		}
	}
	return nil, p.errAt(t.pos, "unexpected %s in expression", describe(t))
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		t := p.peek()
		if t.kind != tOp {
			return e, nil
		}
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.kind {
			case tName:
				e = &attrExpr{obj: e, name: a.val, pos: a.pos}
			case tInt:
				n, _ := strconv.ParseInt(a.val, 10, 64)
				e = &indexExpr{obj: e, idx: &constExpr{v: n}, pos: a.pos}
			default:
				return nil, p.errAt(a.pos, "expected attribute name after '.', found %s", describe(a))
			}
		case "[":
			p.next()
			var err error
			if e, err = p.parseSubscript(e, t.pos); err != nil {
				return nil, err
			}
		case "(":
			var err error
			if e, err = p.parseCall(e, t.pos); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
	}
}

func (p *parser) parseSubscript(obj expr, pos Pos) (expr, error) {
	var parts [3]expr
	n := 0
	isSlice := false
	for {
		if p.isOp(":") {
			isSlice = true
			p.next()
			n++
			if n > 2 {
				return nil, p.errAt(pos, "too many ':' in slice")
			}
			continue
		}
		if p.isOp("]") {
			p.next()
			break
		}
		x, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		parts[n] = x
		if !p.isOp(":") && !p.isOp("]") {
			t := p.peek()
			return nil, p.errAt(t.pos, "expected ']' or ':' in subscript, found %s", describe(t))
		}
	}
	if !isSlice {
		if parts[0] == nil {
			return nil, p.errAt(pos, "empty subscript")
		}
		return &indexExpr{obj: obj, idx: parts[0], pos: pos}, nil
	}
	return &sliceExpr{obj: obj, start: parts[0], stop: parts[1], stp: parts[2], pos: pos}, nil
}

// parseArgs parses "(a, b, k=v)" after the opening parenthesis is peeked.
func (p *parser) parseArgs() (args []expr, kwName []string, kwVal []expr, err error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, nil, err
	}
	for !p.isOp(")") {
		if p.peek().kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].val == "=" {
			k := p.next()
			p.next()
			v, err := p.parseExpr()
			if err != nil {
				return nil, nil, nil, err
			}
			kwName = append(kwName, k.val)
			kwVal = append(kwVal, v)
		} else {
			if len(kwName) > 0 {
				t := p.peek()
				return nil, nil, nil, p.errAt(t.pos, "positional argument after keyword argument")
			}
			star := p.isOp("*")
			if star {
				p.next()
			}
			v, err := p.parseExpr()
			if err != nil {
				return nil, nil, nil, err
			}
			if star {
				v = &starExpr{x: v}
			}
			args = append(args, v)
		}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return args, kwName, kwVal, p.expectOp(")")
}

func (p *parser) parseCall(fn expr, pos Pos) (expr, error) {
	args, kn, kv, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{fn: fn, args: args, kwName: kn, kwVal: kv, pos: pos}, nil
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			// dotted filter names are not a thing we support
			fn, ok := filters[name.val]
			if !ok {
				return nil, p.errAt(name.pos, "unknown filter %q", name.val)
			}
			f := &filterExpr{arg: e, name: name.val, fn: fn, pos: name.pos}
			if p.isOp("(") {
				if f.args, f.kwName, f.kwVal, err = p.parseArgs(); err != nil {
					return nil, err
				}
			}
			e = f
		case p.isName("is"):
			p.next()
			neg := false
			if p.isName("not") {
				p.next()
				neg = true
			}
			nt := p.next()
			name := nt.val
			if nt.kind == tName {
				// keywords that name tests
			} else if nt.kind == tOp && (nt.val == "==" || nt.val == "!=" || nt.val == "<" || nt.val == ">" || nt.val == "<=" || nt.val == ">=") {
				name = map[string]string{"==": "eq", "!=": "ne", "<": "lt", ">": "gt", "<=": "le", ">=": "ge"}[nt.val]
			} else {
				return nil, p.errAt(nt.pos, "expected a test name after 'is', found %s", describe(nt))
			}
			fn, ok := tests[name]
			if !ok {
				return nil, p.errAt(nt.pos, "unknown test %q", name)
			}
			te := &testExpr{arg: e, name: name, fn: fn, neg: neg, pos: nt.pos}
			if p.isOp("(") {
				args, kn, _, err := p.parseArgs()
				if err != nil {
					return nil, err
				}
				if len(kn) > 0 {
					return nil, p.errAt(nt.pos, "keyword arguments to test %q are not supported", name)
				}
				te.args = args
			} else if startsPrimary(p.peek()) {
				// "x is divisibleby 3": one argument without parentheses.
				a, err := p.parsePrimary()
				if err != nil {
					return nil, err
				}
				if a, err = p.parsePostfix(a); err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			e = te
		default:
			return e, nil
		}
	}
}

// startsPrimary reports whether t can begin a bare test argument; keywords
// that continue the expression cannot.
func startsPrimary(t token) bool {
	switch t.kind {
	case tString, tInt, tFloat:
		return true
	case tName:
		switch t.val {
		case "and", "or", "if", "else", "not", "in", "is", "recursive":
			return false
		}
		return true
	case tOp:
		return t.val == "[" || t.val == "{"
	}
	return false
}
