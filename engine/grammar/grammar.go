// Package grammar constrains sampling to a GBNF grammar, the grammar language
// of llama.cpp (rules, alternatives, literals, character classes, repetition,
// token references), and converts JSON schemas to such grammars.
//
// Parse compiles grammar text into an immutable *Grammar. NewMatcher pairs a
// grammar with a tokenizer vocabulary; the Matcher tells which tokens keep
// the output a valid prefix of the grammar (Mask, Allowed) and follows the
// tokens actually sampled (Accept). Matching is on code points like
// llama.cpp: a token may end inside a UTF-8 character, and the next token
// completes it.
//
// The matcher is a pushdown recognizer over a set of stacks (positions in
// the grammar's rules), as llama.cpp's. Stacks are interned as a tree of
// nodes, stack sets as small integer states, and transitions are cached per
// (state, byte), so walking the vocabulary's byte trie against a state costs
// a table lookup per trie node; whole subtrees whose bytes all loop on the
// state (text inside a JSON string) are accepted without being walked, and
// masks are cached per state.
package grammar

import (
	"fmt"
	"strings"
)

// Bounds on grammar text and its compiled form: hostile text gets an error,
// never an unbounded allocation or recursion.
const (
	MaxSourceBytes  = 4 << 20 // grammar text
	MaxElements     = 1 << 22 // compiled elements over all rules
	MaxRules        = 1 << 18 // rules, including those made for groups and repetition
	MaxNesting      = 512     // depth of parentheses
	maxRepetition   = 2000    // llama.cpp's MAX_REPETITION_THRESHOLD
	maxTokenNameLen = 256
)

// op is the kind of one compiled grammar element. A rule is a run of
// alternatives separated by opAlt and closed by opEnd; a character class is
// opChar/opCharNot/opCharAny followed by opCharAlt and opCharUpper elements.
type op uint8

const (
	opEnd       op = iota // end of a rule
	opAlt                 // start of the next alternative
	opRef                 // reference to rule val
	opChar                // class of the chars that follow (positive)
	opCharNot             // class of the chars that follow (negated)
	opCharAlt             // one more char (or range start) in the class
	opCharUpper           // inclusive upper bound of the range before it
	opCharAny             // any code point
	opToken               // the token val (or named token, see tokenNamed)
	opTokenNot            // any token but val
)

// tokenNamed marks a token element whose val indexes Grammar.tokenNames
// (a <name> reference resolved against the vocabulary by NewMatcher).
const tokenNamed = 1 << 31

type elem struct {
	op  op
	val uint32
}

// class is a compiled character class, for fast matching.
type class struct {
	neg      bool // negated ([^...])
	any      bool // "."
	ascii    [2]uint64
	ranges   []cpRange // sorted, merged, all of the class (ASCII included)
	next     int32     // element after the class
	highAll  bool      // every code point >= 0x80 matches
	highNone bool      // no code point >= 0x80 matches
}

type cpRange struct{ lo, hi uint32 }

func (c *class) match(cp uint32) bool {
	if c.any {
		return true
	}
	var in bool
	if cp < 128 {
		in = c.ascii[cp>>6]&(1<<(cp&63)) != 0
	} else {
		for _, r := range c.ranges {
			if cp < r.lo {
				break
			}
			if cp <= r.hi {
				in = true
				break
			}
		}
	}
	return in != c.neg
}

// matchRange reports whether some code point in [lo, hi] matches.
func (c *class) matchRange(lo, hi uint32) bool {
	if c.any {
		return true
	}
	if !c.neg {
		for _, r := range c.ranges {
			if r.lo <= hi && lo <= r.hi {
				return true
			}
		}
		return false
	}
	// Negated: some point of [lo, hi] lies outside every range.
	p := lo
	for _, r := range c.ranges {
		if r.hi < p {
			continue
		}
		if r.lo > p {
			return true
		}
		if r.hi >= hi {
			return false
		}
		p = r.hi + 1
	}
	return p <= hi
}

// Grammar is a parsed GBNF grammar. It is immutable and safe to share
// between matchers and goroutines.
type Grammar struct {
	elems      []elem
	ruleStart  []int32 // rule index -> first element
	ruleNames  []string
	root       int32
	classAt    []int32 // element -> index in classes where a class starts, else -1
	classes    []class
	tokenNames []string // <name> references, resolved per vocabulary
	hasTokens  bool

	// Bounded repetitions S{m,n} become chains of rules S'(k) ::= S S'(k-1)
	// | with k items left; chains[c][i] is the rule with i+1 left. Rules
	// from index 1 on have the same layout, which lets the matcher treat
	// states that differ only in large counts alike.
	ruleOf   []int32 // element -> its rule
	chains   [][]int32
	chainOf  []int32 // rule -> its chain, or -1
	chainPos []int32 // rule -> its index in the chain
}

// NumRules returns the number of rules, including the ones made for groups
// and repetitions.
func (g *Grammar) NumRules() int { return len(g.ruleStart) }

// String prints the compiled rules in GBNF, one a line, generated rules
// included; it is meant for debugging.
func (g *Grammar) String() string {
	var b strings.Builder
	for r, start := range g.ruleStart {
		fmt.Fprintf(&b, "%s ::=", g.ruleNames[r])
		for i := start; ; i++ {
			e := g.elems[i]
			switch e.op {
			case opEnd:
				goto done
			case opAlt:
				b.WriteString(" |")
			case opRef:
				b.WriteString(" " + g.ruleNames[e.val])
			case opChar, opCharNot, opCharAny:
				c := &g.classes[g.classAt[i]]
				b.WriteString(" " + classString(c))
				i = c.next - 1
			case opToken, opTokenNot:
				b.WriteByte(' ')
				if e.op == opTokenNot {
					b.WriteByte('!')
				}
				if e.val&tokenNamed != 0 {
					b.WriteString(g.tokenNames[e.val&^tokenNamed])
				} else {
					fmt.Fprintf(&b, "<[%d]>", e.val)
				}
			}
		}
	done:
		b.WriteByte('\n')
	}
	return b.String()
}

func classString(c *class) string {
	if c.any {
		return "."
	}
	var b strings.Builder
	b.WriteByte('[')
	if c.neg {
		b.WriteByte('^')
	}
	for _, r := range c.ranges {
		writeClassChar(&b, r.lo)
		if r.hi != r.lo {
			b.WriteByte('-')
			writeClassChar(&b, r.hi)
		}
	}
	b.WriteByte(']')
	return b.String()
}

func writeClassChar(b *strings.Builder, c uint32) {
	switch {
	case c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == '"':
		b.WriteByte('\\')
		b.WriteByte(byte(c))
	case c < 0x20 || c == 0x7f:
		fmt.Fprintf(b, "\\x%02X", c)
	case c > 0x10FFFF:
		fmt.Fprintf(b, "\\U%08X", c)
	default:
		b.WriteRune(rune(c))
	}
}

// SyntaxError is a grammar that does not parse, with the place it stopped.
type SyntaxError struct {
	Line, Col int // 1-based; Col counts code points
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: %d:%d: %s", e.Line, e.Col, e.Msg)
}
