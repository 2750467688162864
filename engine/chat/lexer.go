package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind classifies lexer tokens. Template text and tag delimiters share one
// stream with the expression tokens inside tags, as in Jinja's own lexer.
type tokKind int

const (
	tEOF tokKind = iota
	tText
	tVarBegin   // {{
	tVarEnd     // }}
	tBlockBegin // {%
	tBlockEnd   // %}
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	kind tokKind
	val  string // text, name, operator, or decoded string literal
	pos  Pos
}

// Pos is a 1-based line and column in the template source.
type Pos struct{ Line, Col int }

func (p Pos) String() string { return fmt.Sprintf("line %d col %d", p.Line, p.Col) }

// SyntaxError reports a template construct that is malformed or that this
// interpreter does not support, with where it is.
type SyntaxError struct {
	Pos Pos
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("chat template: %s: %s", e.Pos, e.Msg) }

type lexer struct {
	src  string
	toks []token
	// position cursor for posAt
	curOff, curLine, curCol int
}

// posAt converts a byte offset to a position. Tokens come in increasing
// offset order, so it advances a cursor instead of rescanning the line,
// keeping lexing linear even for a template on one huge line.
//
//go:noinline
func (lx *lexer) posAt(off int) Pos {
	if off < lx.curOff {
		lx.curOff, lx.curLine, lx.curCol = 0, 1, 1
	}
	for _, r := range lx.src[lx.curOff:off] {
		if r == '\n' {
			lx.curLine++
			lx.curCol = 1
		} else {
			lx.curCol++
		}
	}
	lx.curOff = off
	return Pos{Line: lx.curLine, Col: lx.curCol}
}

func (lx *lexer) errf(off int, format string, args ...any) error {
	return &SyntaxError{Pos: lx.posAt(off), Msg: fmt.Sprintf(format, args...)}
}

//go:noinline
func isSpaceByte(r rune) bool { return unicode.IsSpace(r) }

// lex splits src into tokens applying Jinja's whitespace control with
// trim_blocks and lstrip_blocks on, as Hugging Face renders chat templates.
func lex(src string) ([]token, error) {
	lx := &lexer{src: src, curLine: 1, curCol: 1}
	pos := 0
	lineStarting := true
	// trimNext: 0 none, 1 strip one newline (trim_blocks), 2 strip all whitespace (-%}).
	trimNext := 0
	for pos < len(src) {
		i := indexTagStart(src, pos)
		end := i
		if i < 0 {
			end = len(src)
		}
		text := src[pos:end]
		textOff := pos
		switch trimNext {
		case 1:
			if strings.HasPrefix(text, "\n") {
				text = text[1:]
				textOff++
			}
		case 2:
			t := strings.TrimLeftFunc(text, isSpaceByte)
			textOff += len(text) - len(t)
			text = t
		}
		trimNext = 0
		if i < 0 {
			if text != "" {
				lx.toks = append(lx.toks, token{kind: tText, val: text, pos: lx.posAt(textOff)})
			}
			break
		}
		open := src[i : i+2]
		mod := byte(0)
		if i+2 < len(src) && (src[i+2] == '-' || src[i+2] == '+') {
			mod = src[i+2]
		}
		if mod == '-' {
			text = strings.TrimRightFunc(text, isSpaceByte)
		} else if mod != '+' && open != "{{" {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lineStarting {
				rest := text[lpos:]
				if rest != "" && strings.TrimLeftFunc(rest, isSpaceByte) == "" {
					text = text[:lpos]
				}
			}
		}
		if text != "" {
			lx.toks = append(lx.toks, token{kind: tText, val: text, pos: lx.posAt(textOff)})
		}
		inner := i + 2
		if mod != 0 {
			inner++
		}
		switch open {
		case "{#":
			j := strings.Index(src[inner:], "#}")
			if j < 0 {
				return nil, lx.errf(i, "unclosed comment")
			}
			ce := inner + j
			pos = ce + 2
			trimNext, lineStarting = endTrim(src, ce, pos, true)
		case "{{", "{%":
			isBlock := open == "{%"
			begin, end := tVarBegin, tVarEnd
			if isBlock {
				begin, end = tBlockBegin, tBlockEnd
			}
			lx.toks = append(lx.toks, token{kind: begin, pos: lx.posAt(i)})
			p, endOff, err := lx.lexInner(inner, isBlock)
			if err != nil {
				return nil, err
			}
			lx.toks = append(lx.toks, token{kind: end, pos: lx.posAt(endOff)})
			pos = p
			trimNext, lineStarting = endTrim(src, endOff, pos, isBlock)
			// {% raw %} ... {% endraw %}: everything inside is text.
			if isBlock && isRawTag(lx.toks) {
				lx.toks = lx.toks[:len(lx.toks)-3]
				rs, re, rmod, ok := findEndRaw(src, pos)
				if !ok {
					return nil, lx.errf(i, "unclosed raw block (missing endraw)")
				}
				body := src[pos:rs]
				switch trimNext {
				case 1:
					body = strings.TrimPrefix(body, "\n")
				case 2:
					body = strings.TrimLeftFunc(body, isSpaceByte)
				}
				if rmod == '-' {
					body = strings.TrimRightFunc(body, isSpaceByte)
				}
				if body != "" {
					lx.toks = append(lx.toks, token{kind: tText, val: body, pos: lx.posAt(pos)})
				}
				pos = re
				trimNext, lineStarting = endTrim(src, re-2, pos, true)
			}
		}
	}
	lx.toks = append(lx.toks, token{kind: tEOF, pos: lx.posAt(len(src))})
	return lx.toks, nil
}

// endTrim decides how the text after a tag end at endOff (the offset of the
// '%}'-style delimiter, possibly preceded by a modifier) is trimmed.
func endTrim(src string, endOff, after int, block bool) (trim int, lineStarting bool) {
	mod := byte(0)
	if endOff > 0 && (src[endOff-1] == '-' || src[endOff-1] == '+') {
		mod = src[endOff-1]
	}
	switch {
	case mod == '-':
		// Jinja's "-%}\s*" consumes the following whitespace; the line is
		// starting if that whitespace ended in a newline.
		rest := src[after:]
		t := strings.TrimLeftFunc(rest, isSpaceByte)
		ws := rest[:len(rest)-len(t)]
		return 2, strings.HasSuffix(ws, "\n")
	case block && mod != '+':
		return 1, strings.HasPrefix(src[after:], "\n")
	}
	return 0, false
}

func isRawTag(toks []token) bool {
	n := len(toks)
	return n >= 3 && toks[n-3].kind == tBlockBegin && toks[n-2].kind == tName && toks[n-2].val == "raw" && toks[n-1].kind == tBlockEnd
}

// findEndRaw finds "{% endraw %}" (with optional modifiers) from off,
// returning where it starts, where it ends and its opening modifier.
func findEndRaw(src string, off int) (start, end int, mod byte, ok bool) {
	for {
		j := strings.Index(src[off:], "{%")
		if j < 0 {
			return 0, 0, 0, false
		}
		s := off + j
		p := s + 2
		var m byte
		if p < len(src) && (src[p] == '-' || src[p] == '+') {
			m = src[p]
			p++
		}
		for p < len(src) && isSpaceASCII(src[p]) {
			p++
		}
		if strings.HasPrefix(src[p:], "endraw") {
			p += len("endraw")
			for p < len(src) && isSpaceASCII(src[p]) {
				p++
			}
			if p < len(src) && (src[p] == '-' || src[p] == '+') {
				p++
			}
			if strings.HasPrefix(src[p:], "%}") {
				return s, p + 2, m, true
			}
		}
		off = s + 2
	}
}

func isSpaceASCII(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func indexTagStart(src string, from int) int {
	for {
		j := strings.IndexByte(src[from:], '{')
		if j < 0 {
			return -1
		}
		k := from + j
		if k+1 < len(src) && (src[k+1] == '{' || src[k+1] == '%' || src[k+1] == '#') {
			return k
		}
		from = k + 1
	}
}

var ops3 = []string{"**", "//", "==", "!=", "<=", ">="}

// lexInner reads expression tokens from off until the tag's closing
// delimiter at bracket depth 0. It returns the offset after the delimiter
// and the offset of the delimiter itself (after any modifier).
func (lx *lexer) lexInner(off int, block bool) (next, endOff int, err error) {
	src := lx.src
	var open []int // offsets of unclosed brackets
	closer := "}}"
	if block {
		closer = "%}"
	}
	p := off
	for {
		for p < len(src) && isSpaceASCII(src[p]) {
			p++
		}
		if p >= len(src) {
			if len(open) > 0 {
				o := open[len(open)-1]
				return 0, 0, lx.errf(o, "unclosed %q", src[o:o+1])
			}
			return 0, 0, lx.errf(off, "unclosed tag (missing %q)", closer)
		}
		if len(open) == 0 {
			if strings.HasPrefix(src[p:], closer) {
				return p + 2, p, nil
			}
			if (src[p] == '-' || src[p] == '+') && strings.HasPrefix(src[p+1:], closer) {
				return p + 3, p + 1, nil
			}
		}
		c := src[p]
		start := p
		switch {
		case c == '_' || isLetter(c):
			for p < len(src) && (src[p] == '_' || isLetter(src[p]) || isDigit(src[p])) {
				p++
			}
			lx.toks = append(lx.toks, token{kind: tName, val: src[start:p], pos: lx.posAt(start)})
		case isDigit(c):
			kind := tInt
			for p < len(src) && (isDigit(src[p]) || src[p] == '_') {
				p++
			}
			if p+1 < len(src) && src[p] == '.' && isDigit(src[p+1]) {
				kind = tFloat
				p++
				for p < len(src) && (isDigit(src[p]) || src[p] == '_') {
					p++
				}
			}
			if p < len(src) && (src[p] == 'e' || src[p] == 'E') {
				q := p + 1
				if q < len(src) && (src[q] == '+' || src[q] == '-') {
					q++
				}
				if q < len(src) && isDigit(src[q]) {
					kind = tFloat
					p = q
					for p < len(src) && isDigit(src[p]) {
						p++
					}
				}
			}
			lx.toks = append(lx.toks, token{kind: kind, val: strings.ReplaceAll(src[start:p], "_", ""), pos: lx.posAt(start)})
		case c == '\'' || c == '"':
			s, q, err := lx.lexString(p)
			if err != nil {
				return 0, 0, err
			}
			p = q
			lx.toks = append(lx.toks, token{kind: tString, val: s, pos: lx.posAt(start)})
		default:
			op := ""
			for _, o := range ops3 {
				if strings.HasPrefix(src[p:], o) {
					op = o
					break
				}
			}
			if op == "" {
				if strings.IndexByte("+-*/%~[](){}<>=.:|,;", c) < 0 {
					r, _ := utf8.DecodeRuneInString(src[p:])
					return 0, 0, lx.errf(p, "unexpected character %q in tag", r)
				}
				op = src[p : p+1]
			}
			switch op {
			case "(", "[", "{":
				open = append(open, p)
			case ")", "]", "}":
				if len(open) > 0 {
					o := open[len(open)-1]
					if closing(src[o]) != c {
						return 0, 0, lx.errf(o, "unclosed %q", src[o:o+1])
					}
					open = open[:len(open)-1]
				}
			}
			p += len(op)
			lx.toks = append(lx.toks, token{kind: tOp, val: op, pos: lx.posAt(start)})
		}
	}
}

// closing is the bracket that closes open.
func closing(open byte) byte {
	switch open {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// lexString decodes a quoted literal with Python's common escapes.
func (lx *lexer) lexString(p int) (string, int, error) {
	src := lx.src
	q := src[p]
	var b sbuf
	i := p + 1
	for i < len(src) {
		c := src[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(src) {
			break
		}
		e := src[i+1]
		i += 2
		switch e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
			// line continuation
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'v':
			b.WriteByte(11)
		case '0':
			b.WriteByte(0)
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+n > len(src) {
				return "", 0, lx.errf(i-2, "truncated \\%c escape in string", e)
			}
			var r rune
			for _, h := range src[i : i+n] {
				d := hexVal(byte(h))
				if d < 0 {
					return "", 0, lx.errf(i-2, "bad \\%c escape in string", e)
				}
				r = r*16 + rune(d)
			}
			i += n
			b.WriteRune(r)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, lx.errf(p, "unterminated string literal")
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
