package grammar

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		msg       string
	}{
		{"root ::= \"abc", 1, 14, "end of input"},
		{"root ::= [a-z", 1, 14, "end of input"},
		{"root ::= x\n", 1, 10, "undefined rule \"x\""},
		{"root ::= \"a\"\nfoo ::= bar baz\nbar ::= \"b\"\n", 2, 13, "undefined rule \"baz\""},
		{"root = \"a\"", 1, 6, "expecting ::="},
		{"root ::= \"a\" )", 1, 14, "expecting newline"},
		{"root ::= (\"a\"", 1, 14, "expecting ')'"},
		{"root ::= \"\\q\"", 1, 11, "unknown escape"},
		{"root ::= \"\\x4\"", 1, 14, "hex digits"},
		{"root ::= * \"a\"", 1, 10, "expecting an item"},
		{"root ::= \"a\"{2", 1, 15, "expecting ',' or '}'"},
		{"root ::= \"a\"{3,1}", 1, 13, "maximum below minimum"},
		{"root ::= \"a\"{5000}", 1, 13, "exceeds the limit"},
		{"root ::= <[12", 1, 14, "expecting ']'"},
		{"root ::= <abc", 1, 14, "expecting '>'"},
		{"root ::= !x", 1, 11, "expecting '<'"},
		{"# comment\nroot ::= \"日本\" ?? ]", 2, 18, "expecting newline"},
		{"::= \"a\"", 1, 1, "expecting a rule name"},
		{"root ::= \"a\xff\"", 1, 12, "invalid UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a SyntaxError", c.src, err)
			continue
		}
		if se.Line != c.line || se.Col != c.col || !strings.Contains(se.Msg, c.msg) {
			t.Errorf("%q: got %d:%d %q, want %d:%d %q", c.src, se.Line, se.Col, se.Msg, c.line, c.col, c.msg)
		}
		if !strings.Contains(err.Error(), "grammar: ") {
			t.Errorf("%q: error %q lacks the package prefix", c.src, err)
		}
	}
}

func TestParseSemanticErrors(t *testing.T) {
	cases := []struct{ src, msg string }{
		{"foo ::= \"a\"", "no rule named root"},
		{"root ::= root \"a\" | \"b\"", "left recursion in rule \"root\""},
		{"root ::= a\na ::= b \"x\"\nb ::= c? a\nc ::= \"c\"", "left recursion"},
		// nullable only through another rule: llama.cpp's own check misses it
		{"root ::= a \"x\"\na ::= e a \"y\" | \"z\"\ne ::= f\nf ::= \"\"", "left recursion"},
		{"root ::= (\"a\" | root)", "left recursion"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.msg)
		}
	}
}

func TestParseFeatures(t *testing.T) {
	cases := []struct {
		src  string
		good []string
		bad  []string
	}{
		{`root ::= "a\x41\u00e9\U0001F600\t\n\r\\\"\[\]\-"`, []string{"aAé😀\t\n\r\\\"[]-"}, []string{"aA"}},
		{`root ::= [^a-c\]x] [\x30-\x39] . [-a] [a-]`, []string{"d0é--", "z5\naa"}, []string{"a0xa-", "]0x--", "x0x--"}},
		{"root ::= \"a\"{3}", []string{"aaa"}, []string{"aa", "aaaa"}},
		{"root ::= \"a\"{2,}", []string{"aa", "aaaaaaa"}, []string{"a"}},
		{"root ::= \"a\"{1,3} \"b\"{0,2}", []string{"a", "aaab", "abb"}, []string{"aaaa", "abbb", "b"}},
		{"root ::= (\"ab\" | \"c\")+ \"!\"?", []string{"ab", "cabc!"}, []string{"a", "!"}},
		{"root ::= x*\nx ::= \"x\" | \"y\" # trailing comment\n", []string{"", "xyx"}, []string{"z"}},
		{"root ::= \"a\" |\n  \"b\"\n", []string{"a", "b"}, []string{"ab"}},
		{"root ::= (\n  \"a\"\n  \"b\"\n)\n", []string{"ab"}, []string{"a"}},
		{"root ::= [z-a] | \"q\"", []string{"q"}, []string{"a", "z"}},
		{"root ::= []\"a\"", []string{"a"}, []string{""}},
		{"root ::= \"a\"\nroot ::= \"b\"", []string{"b"}, []string{"a"}},
		{"root ::= \"a\"{0,5000}", []string{"", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, nil},
		{"root ::= \"\"", []string{""}, []string{"a"}},
		{"\r\nroot ::= \"a\"\r\n\r\n", []string{"a"}, nil},
	}
	for _, c := range cases {
		g := mustParse(t, c.src)
		for _, s := range c.good {
			if !acceptString(t, g, s) || !completeOK(g, s) {
				t.Errorf("%q should accept %q", c.src, s)
			}
		}
		for _, s := range c.bad {
			if acceptString(t, g, s) || completeOK(g, s) {
				t.Errorf("%q should reject %q", c.src, s)
			}
		}
	}
}

func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("(", MaxNesting+1) + `"a"` + strings.Repeat(")", MaxNesting+1)
	if _, err := Parse("root ::= " + deep); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
	ok := strings.Repeat("(", MaxNesting) + `"a"` + strings.Repeat(")", MaxNesting)
	mustParse(t, "root ::= "+ok)
	// repetition of a repetition multiplies the rules: refused like llama.cpp
	if _, err := Parse(`root ::= ("a"{0,100}){0,100}`); err == nil || !strings.Contains(err.Error(), "too many rules") {
		t.Errorf("nested repetition: %v", err)
	}
	if _, err := Parse(strings.Repeat(" ", MaxSourceBytes+1)); err == nil {
		t.Error("oversized text accepted")
	}
	if _, err := Parse(`root ::= "a"{99999999999999999999999}`); err == nil {
		t.Error("huge count accepted")
	}
}

func TestGrammarString(t *testing.T) {
	g := mustParse(t, `root ::= "a" [^b-d] . x? <[5]> !<t>
x ::= "y"`)
	s := g.String()
	for _, want := range []string{"root ::= [a] [^b-d] . root_", "x ::= [y]", "<[5]>", "!<t>"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}
