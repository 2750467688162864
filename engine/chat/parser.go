package chat

import (
	"fmt"
	"strconv"
)

// maxDepth bounds the nesting of blocks and expressions so a hostile
// template cannot exhaust the stack while parsing.
const maxDepth = 200

type parser struct {
	toks  []token
	i     int
	depth int
	loops int // enclosing for loops (in the current macro), for break/continue
}

func (p *parser) peek() token { return p.toks[p.i] }

//go:noinline
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

//go:noinline
func (p *parser) errAt(pos Pos, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

//go:noinline
func (p *parser) enter(pos Pos) error {
	p.depth++
	if p.depth > maxDepth {
		return p.errAt(pos, "nesting deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

//go:noinline
func (p *parser) isOp(v string) bool {
	t := p.peek()
	return t.kind == tOp && t.val == v
}

//go:noinline
func (p *parser) isName(v string) bool {
	t := p.peek()
	return t.kind == tName && t.val == v
}

func (p *parser) expectOp(v string) error {
	t := p.next()
	if t.kind != tOp || t.val != v {
		return p.errAt(t.pos, "expected %q, found %s", v, describe(t))
	}
	return nil
}

func (p *parser) expectName() (token, error) {
	t := p.next()
	if t.kind != tName {
		return t, p.errAt(t.pos, "expected a name, found %s", describe(t))
	}
	return t, nil
}

func (p *parser) expectBlockEnd() error {
	t := p.next()
	if t.kind != tBlockEnd {
		return p.errAt(t.pos, "expected end of tag '%%}', found %s", describe(t))
	}
	return nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tText:
		return "text"
	case tVarBegin:
		return "'{{'"
	case tVarEnd:
		return "'}}'"
	case tBlockBegin:
		return "'{%'"
	case tBlockEnd:
		return "'%}'"
	case tString:
		return strconv.Quote(t.val)
	}
	return fmt.Sprintf("%q", t.val)
}

// parseBody parses nodes until one of the end tags (block names) is met at
// the start of a block; it returns the tag name found, leaving the parser
// just after that name.
func (p *parser) parseBody(ends ...string) ([]node, string, Pos, error) {
	var out []node
	for {
		t := p.peek()
		switch t.kind {
		case tEOF:
			if len(ends) == 0 {
				return out, "", t.pos, nil
			}
			return nil, "", t.pos, p.errAt(t.pos, "unexpected end of template, expected one of %v", ends)
		case tText:
			p.next()
			out = append(out, &textNode{s: t.val})
		case tVarBegin:
			p.next()
			e, err := p.parseExpr()
			if err != nil {
				return nil, "", t.pos, err
			}
			if c := p.next(); c.kind != tVarEnd {
				return nil, "", t.pos, p.errAt(c.pos, "expected '}}', found %s", describe(c))
			}
			out = append(out, &outputNode{e: e, pos: t.pos})
		case tBlockBegin:
			p.next()
			nt := p.peek()
			if nt.kind != tName {
				return nil, "", nt.pos, p.errAt(nt.pos, "expected a tag name, found %s", describe(nt))
			}
			for _, e := range ends {
				if nt.val == e {
					p.next()
					return out, e, nt.pos, nil
				}
			}
			n, err := p.parseStmt()
			if err != nil {
				return nil, "", nt.pos, err
			}
			if n != nil {
				out = append(out, n)
			}
		default:
			return nil, "", t.pos, p.errAt(t.pos, "unexpected %s", describe(t))
		}
	}
}

func (p *parser) parseStmt() (node, error) {
	t := p.next()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor(t.pos)
	case "set":
		return p.parseSet(t.pos)
	case "macro":
		return p.parseMacro()
	case "break", "continue":
		if p.loops == 0 {
			return nil, p.errAt(t.pos, "%q outside a for loop", t.val)
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if t.val == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	case "generation":
		// Hugging Face's marker for assistant-token masks: renders its body.
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, _, err := p.parseBody("endgeneration")
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		return &ifNode{conds: []expr{&constExpr{v: true}}, bodies: [][]node{body}}, nil
	case "filter":
		return p.parseFilterBlock()
	case "endif", "endfor", "endset", "endmacro", "endfilter", "elif", "else", "endgeneration", "endraw":
		return nil, p.errAt(t.pos, "unexpected tag %q", t.val)
	}
	return nil, p.errAt(t.pos, "unknown or unsupported tag %q", t.val)
}

func (p *parser) parseFilterBlock() (node, error) {
	n := &filterBlockNode{}
	for {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		fn, ok := filters[name.val]
		if !ok {
			return nil, p.errAt(name.pos, "unknown filter %q", name.val)
		}
		f := &filterExpr{name: name.val, fn: fn, pos: name.pos}
		if p.isOp("(") {
			if f.args, f.kwName, f.kwVal, err = p.parseArgs(); err != nil {
				return nil, err
			}
		}
		n.chain = append(n.chain, f)
		if !p.isOp("|") {
			break
		}
		p.next()
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	body, _, _, err := p.parseBody("endfilter")
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, p.expectBlockEnd()
}

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		c, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, end, _, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			body, _, _, err := p.parseBody("endif")
			if err != nil {
				return nil, err
			}
			n.bodies = append(n.bodies, body)
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) parseTargets() ([]string, error) {
	var names []string
	paren := false
	if p.isOp("(") {
		p.next()
		paren = true
	}
	for {
		t, err := p.expectName()
		if err != nil {
			return nil, err
		}
		names = append(names, t.val)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (p *parser) parseFor(pos Pos) (node, error) {
	n := &forNode{pos: pos}
	var err error
	if n.targets, err = p.parseTargets(); err != nil {
		return nil, err
	}
	if !p.isName("in") {
		t := p.peek()
		return nil, p.errAt(t.pos, "expected 'in' in for loop, found %s", describe(t))
	}
	p.next()
	// The iterable may not contain a bare conditional expression, since
	// "if" starts the loop filter.
	if n.iter, err = p.parseOr(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if n.filter, err = p.parseOr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		t := p.peek()
		return nil, p.errAt(t.pos, "unsupported construct \"recursive\" loop")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	p.loops++
	body, end, _, err := p.parseBody("else", "endfor")
	p.loops--
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if n.els, _, _, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.expectBlockEnd()
}

func (p *parser) parseSet(pos Pos) (node, error) {
	n := &setNode{pos: pos}
	first, err := p.expectName()
	if err != nil {
		return nil, err
	}
	if p.isOp(".") {
		p.next()
		a, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.ns, n.attr = first.val, a.val
	} else {
		n.targets = []string{first.val}
		for p.isOp(",") {
			p.next()
			t, err := p.expectName()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, t.val)
		}
	}
	if p.peek().kind == tBlockEnd && n.ns == "" && len(n.targets) == 1 {
		p.next()
		body, _, _, err := p.parseBody("endset")
		if err != nil {
			return nil, err
		}
		n.body, n.block = body, true
		return n, p.expectBlockEnd()
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	if n.value, err = p.parseTupleExpr(); err != nil {
		return nil, err
	}
	return n, p.expectBlockEnd()
}

func (p *parser) parseMacro() (node, error) {
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name.val}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		a, err := p.expectName()
		if err != nil {
			return nil, err
		}
		var def expr
		if p.isOp("=") {
			p.next()
			if def, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		n.params = append(n.params, a.val)
		n.defaults = append(n.defaults, def)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	savedLoops := p.loops
	p.loops = 0 // a macro body is not inside the caller's loop
	body, _, _, err := p.parseBody("endmacro")
	p.loops = savedLoops
	if err != nil {
		return nil, err
	}
	n.body = body
	// {% endmacro name %} is allowed.
	if p.peek().kind == tName {
		p.next()
	}
	return n, p.expectBlockEnd()
}

// parseTemplate turns source into a node tree.
func parseTemplate(src string) ([]node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, _, _, err := p.parseBody()
	if err != nil {
		return nil, err
	}
	return body, nil
}
