package grammar

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

const (
	maxPatternRunes = 4096
	maxPatternDepth = 64
)

// patternToGBNF converts a JSON-schema pattern (an ECMA-262 regular
// expression subset) into a GBNF expression for the JSON string content it
// matches, characters written as JSON writes them ('"', '\' and control
// characters escaped). An unanchored pattern may have any text around it.
func patternToGBNF(p string) (string, error) {
	r := &reParser{src: []rune(p)}
	if len(r.src) > maxPatternRunes {
		return "", fmt.Errorf("pattern longer than %d characters", maxPatternRunes)
	}
	start := false
	if len(r.src) > 0 && r.src[0] == '^' {
		start = true
		r.pos++
	}
	body, err := r.alternation()
	if err != nil {
		return "", err
	}
	if r.pos < len(r.src) {
		return "", fmt.Errorf("unbalanced ')' at %d", r.pos)
	}
	if !start {
		body = "char* " + body
	}
	if !r.end {
		body += " char*"
	}
	return body, nil
}

type reParser struct {
	src   []rune
	pos   int
	depth int
	end   bool // saw the final '$'
}

func (r *reParser) peek() rune {
	if r.pos < len(r.src) {
		return r.src[r.pos]
	}
	return -1
}

func (r *reParser) alternation() (string, error) {
	var alts []string
	for {
		s, err := r.sequence()
		if err != nil {
			return "", err
		}
		alts = append(alts, s)
		if r.peek() != '|' {
			break
		}
		r.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

func (r *reParser) sequence() (string, error) {
	var parts []string
	for r.pos < len(r.src) {
		c := r.peek()
		if c == '|' || c == ')' {
			break
		}
		if r.end {
			return "", fmt.Errorf("text after '$' at %d", r.pos)
		}
		atom, err := r.atom()
		if err != nil {
			return "", err
		}
		if atom == "" { // the final '$'
			continue
		}
		atom, err = r.quantifier(atom)
		if err != nil {
			return "", err
		}
		parts = append(parts, atom)
	}
	if len(parts) == 0 {
		return `""`, nil
	}
	return strings.Join(parts, " "), nil
}

func (r *reParser) atom() (string, error) {
	c := r.src[r.pos]
	at := r.pos
	r.pos++
	switch c {
	case '(':
		if r.depth >= maxPatternDepth {
			return "", fmt.Errorf("groups nested deeper than %d", maxPatternDepth)
		}
		if r.peek() == '?' {
			if r.pos+1 < len(r.src) && r.src[r.pos+1] == ':' {
				r.pos += 2
			} else {
				return "", fmt.Errorf("group syntax (?%c at %d (lookaround and named groups) is not supported", r.src[min(r.pos+1, len(r.src)-1)], at)
			}
		}
		r.depth++
		inner, err := r.alternation()
		r.depth--
		if err != nil {
			return "", err
		}
		if r.peek() != ')' {
			return "", fmt.Errorf("missing ')' for the group at %d", at)
		}
		r.pos++
		return "( " + inner + " )", nil
	case '[':
		set, err := r.class()
		if err != nil {
			return "", err
		}
		return jsonCharSet(set)
	case '.':
		return jsonCharSet(negate([]cpRange{{'\n', '\n'}}))
	case '\\':
		set, err := r.escape(false)
		if err != nil {
			return "", err
		}
		return jsonCharSet(set)
	case '^':
		return "", fmt.Errorf("'^' at %d: anchors inside a pattern are not supported", at)
	case '$':
		if r.pos == len(r.src) {
			r.end = true
			return "", nil
		}
		return "", fmt.Errorf("'$' at %d: anchors inside a pattern are not supported", at)
	case '*', '+', '?', '{':
		return "", fmt.Errorf("%q at %d repeats nothing", c, at)
	}
	return jsonCharSet([]cpRange{{uint32(c), uint32(c)}})
}

func (r *reParser) quantifier(atom string) (string, error) {
	lo, hi := -1, -1
	switch r.peek() {
	case '*':
		lo, hi = 0, -2
	case '+':
		lo, hi = 1, -2
	case '?':
		lo, hi = 0, 1
	case '{':
		at := r.pos
		end := r.pos + 1
		for end < len(r.src) && r.src[end] != '}' {
			end++
		}
		if end >= len(r.src) {
			return "", fmt.Errorf("unclosed '{' at %d", at)
		}
		body := string(r.src[r.pos+1 : end])
		a, b, comma := strings.Cut(body, ",")
		var err error
		if lo, err = strconv.Atoi(a); err != nil || lo < 0 {
			return "", fmt.Errorf("bad repetition {%s} at %d", body, at)
		}
		switch {
		case !comma:
			hi = lo
		case b == "":
			hi = -2
		default:
			if hi, err = strconv.Atoi(b); err != nil || hi < lo {
				return "", fmt.Errorf("bad repetition {%s} at %d", body, at)
			}
		}
		if lo > maxRepetition || hi > maxRepetition {
			return "", fmt.Errorf("repetition {%s} at %d above the supported limit of %d", body, at, maxRepetition)
		}
		r.pos = end
	default:
		return atom, nil
	}
	r.pos++
	if r.peek() == '?' { // lazy: the same language
		r.pos++
	}
	if c := r.peek(); c == '*' || c == '+' || c == '?' || c == '{' {
		return "", fmt.Errorf("%q at %d after a quantifier is not supported", c, r.pos)
	}
	if hi == -2 {
		hi = -1
	}
	if hi == 0 {
		return `""`, nil
	}
	return repeat("( "+atom+" )", lo, hi), nil
}

// escape reads the escape after a backslash (inside a class when inClass).
func (r *reParser) escape(inClass bool) ([]cpRange, error) {
	if r.pos >= len(r.src) {
		return nil, fmt.Errorf("pattern ends with a backslash")
	}
	c := r.src[r.pos]
	at := r.pos
	r.pos++
	one := func(cp uint32) []cpRange { return []cpRange{{cp, cp}} }
	digit := []cpRange{{'0', '9'}}
	word := []cpRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	space := []cpRange{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	switch c {
	case 'd':
		return digit, nil
	case 'D':
		return negate(digit), nil
	case 'w':
		return word, nil
	case 'W':
		return negate(word), nil
	case 's':
		return space, nil
	case 'S':
		return negate(space), nil
	case 'n':
		return one('\n'), nil
	case 't':
		return one('\t'), nil
	case 'r':
		return one('\r'), nil
	case 'f':
		return one('\f'), nil
	case 'v':
		return one('\v'), nil
	case '0':
		return one(0), nil
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if r.pos+n > len(r.src) {
			return nil, fmt.Errorf("short \\%c escape at %d", c, at)
		}
		v, err := strconv.ParseUint(string(r.src[r.pos:r.pos+n]), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("bad \\%c escape at %d", c, at)
		}
		r.pos += n
		return one(uint32(v)), nil
	case 'b':
		if inClass {
			return one('\b'), nil
		}
		return nil, fmt.Errorf("\\b at %d: word boundaries are not supported", at)
	}
	if c >= '1' && c <= '9' {
		return nil, fmt.Errorf("backreference \\%c at %d is not supported", c, at)
	}
	if c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
		return nil, fmt.Errorf("escape \\%c at %d is not supported", c, at)
	}
	return one(uint32(c)), nil
}

// class reads a [...] class after its '['.
func (r *reParser) class() ([]cpRange, error) {
	at := r.pos - 1
	neg := false
	if r.peek() == '^' {
		neg = true
		r.pos++
	}
	var set []cpRange
	first := true
	for {
		if r.pos >= len(r.src) {
			return nil, fmt.Errorf("unclosed '[' at %d", at)
		}
		c := r.src[r.pos]
		if c == ']' && !first {
			r.pos++
			break
		}
		first = false
		r.pos++
		var item []cpRange
		if c == '\\' {
			var err error
			if item, err = r.escape(true); err != nil {
				return nil, err
			}
		} else {
			item = []cpRange{{uint32(c), uint32(c)}}
		}
		// a range a-b
		if len(item) == 1 && item[0].lo == item[0].hi && r.peek() == '-' && r.pos+1 < len(r.src) && r.src[r.pos+1] != ']' {
			r.pos++
			hc := r.src[r.pos]
			r.pos++
			hiSet := []cpRange{{uint32(hc), uint32(hc)}}
			if hc == '\\' {
				var err error
				if hiSet, err = r.escape(true); err != nil {
					return nil, err
				}
			}
			if len(hiSet) != 1 || hiSet[0].lo != hiSet[0].hi || hiSet[0].lo < item[0].lo {
				return nil, fmt.Errorf("bad range in the class at %d", at)
			}
			item = []cpRange{{item[0].lo, hiSet[0].lo}}
		}
		set = append(set, item...)
	}
	set = normalize(set)
	if neg {
		set = negate(set)
	}
	return set, nil
}

func normalize(set []cpRange) []cpRange {
	sort.Slice(set, func(i, j int) bool { return set[i].lo < set[j].lo })
	var out []cpRange
	for _, r := range set {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate is the complement of set within the code points.
func negate(set []cpRange) []cpRange {
	set = normalize(append([]cpRange(nil), set...))
	var out []cpRange
	next := uint32(0)
	for _, r := range set {
		if r.lo > next {
			out = append(out, cpRange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= 0x10FFFF {
		out = append(out, cpRange{next, 0x10FFFF})
	}
	return out
}

// jsonCharSet is GBNF for one character of set as it appears inside a
// JSON string.
func jsonCharSet(set []cpRange) (string, error) {
	var plain []cpRange
	var alts []string
	for _, r := range set {
		for cp := r.lo; cp <= r.hi && cp < 0x20; cp++ {
			alts = append(alts, lit(jsonEscape(cp)))
		}
		lo := r.lo
		if lo < 0x20 {
			lo = 0x20
		}
		if lo > r.hi {
			continue
		}
		cur := lo
		for _, sp := range []uint32{'"', '\\'} {
			if sp < cur || sp > r.hi {
				continue
			}
			if sp > cur {
				plain = append(plain, cpRange{cur, sp - 1})
			}
			alts = append(alts, lit(jsonEscape(sp)))
			cur = sp + 1
		}
		if cur <= r.hi {
			plain = append(plain, cpRange{cur, r.hi})
		}
	}
	if len(plain) > 0 {
		var b strings.Builder
		b.WriteByte('[')
		for _, r := range plain {
			b.WriteString(classChar(r.lo))
			if r.hi != r.lo {
				b.WriteByte('-')
				b.WriteString(classChar(r.hi))
			}
		}
		b.WriteByte(']')
		alts = append([]string{b.String()}, alts...)
	}
	switch len(alts) {
	case 0:
		return "", fmt.Errorf("a character class that matches nothing")
	case 1:
		return alts[0], nil
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

// jsonEscape is how JSON writes cp inside a string when it must be escaped.
func jsonEscape(cp uint32) string {
	switch cp {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	}
	return fmt.Sprintf(`\u%04x`, cp)
}
