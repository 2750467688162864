package grammar

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// acceptString feeds s byte by byte through a byteVocab matcher and
// reports whether every byte was allowed and the grammar can end there.
func acceptString(t *testing.T, g *Grammar, s string) bool {
	t.Helper()
	m := mustMatcher(t, g, byteVocab())
	for i := 0; i < len(s); i++ {
		tok := int32(s[i])
		allowed := m.Allowed(tok)
		err := m.Accept(tok)
		if allowed != (err == nil) {
			t.Fatalf("Allowed(%q)=%v but Accept error %v", s[i], allowed, err)
		}
		if err != nil {
			return false
		}
	}
	return m.CanEnd()
}

type grammarCase struct {
	file     string
	good     []string
	bad      []string
	extraTok []string // multi-byte tokens for random generation
}

var ownGrammars = []grammarCase{
	{file: "arithmetic.gbnf",
		good:     []string{"1+2\n", "(3 * 4) - -5\n12/4\n", "((7))\n"},
		bad:      []string{"1+\n", "1+2", "(1\n", "a\n"},
		extraTok: []string{"12", " + ", "(", "))", "\n", " * "}},
	{file: "list.gbnf",
		good:     []string{"- one\n", "* a\n- b\n1. c\n", "12. twelve things\n"},
		bad:      []string{"- \n", "-one\n", "- a", "0. zero\n", "- 1\n- 2\n- 3\n- 4\n- 5\n- 6\n"},
		extraTok: []string{"- ", "item", " text", "\n", "1. "}},
	{file: "chesslike.gbnf",
		good:     []string{"1. e4 e5\n", "1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O-O Qxd8#\n", "1. e8=Q+ Kxe8\n"},
		bad:      []string{"1. e9 e5\n", "1. e4\n", "2. e4 e5\n", "1. Zf3 e5\n"},
		extraTok: []string{"1. ", "e4", " e5\n", "Nf3", "O-O", "x"}},
	{file: "japanese.gbnf",
		good:     []string{"日本語です。", "こんにちは！\nカタカナー。", "東京へ行きます。今日々？"},
		bad:      []string{"hello。", "日本", "。", "日本語です。。"},
		extraTok: []string{"日本", "です", "\xe3\x81", "\x93", "\xe3", "\x81\x93", "。", "カタ", "ー"}},
	{file: "clike.gbnf",
		good:     []string{"int x = 1;", "int main(int argc, char c) {\n  int y = argc + 2;\n  if (y > 3) { return y; } else { y = 0; }\n  while (y < 10) { y = y + 1; }\n  // done\n  print(\"hi\\n\", 'c');\n  return 0;\n}\n"},
		bad:      []string{"int = 1;", "int x = 1", "int f() { return 1 }"},
		extraTok: []string{"int", " main", "(", ") {", "return", " = ", ";\n", "while", "if", "}"}},
	{file: "json.gbnf",
		good:     []string{"[]", " [1, -2.5e+3, \"a\\u00e9\\n\", true, false, null] ", "[{\"k\": {\"z\": [[], {}]}}]", "[\"é日本\"]"},
		bad:      []string{"{}", "[01]", "[1,]", "[\"\x01\"]", "[\"\\x\"]", "[tru]"},
		extraTok: []string{"[", "{\"", "\":", "\"", "true", "null", ", ", "12", ".5", "é", "\xc3", "\xa9", "]}"}},
}

func readGrammar(t *testing.T, path string) *Grammar {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return mustParse(t, string(src))
}

func TestOwnGrammars(t *testing.T) {
	for _, c := range ownGrammars {
		t.Run(c.file, func(t *testing.T) {
			g := readGrammar(t, filepath.Join("testdata", "grammars", c.file))
			checkCase(t, g, c)
		})
	}
}

func TestBuiltinJSON(t *testing.T) {
	c := grammarCase{
		good:     []string{"{}", "{\"a\": [1, 2.5, -0.5e-3, \"x\\\"y\"], \"b\": {\"c\": null}}", "[true,false]", "\"s\"", "12"},
		bad:      []string{"{", "{\"a\" 1}", "[1 2]", "{'a': 1}", "01", "-", "{\"a\":1}  "},
		extraTok: []string{"{\"", "\": ", "\", \"", "[", "]", "}", "true", "1", "é", "\xe6\x97", "\xa5"},
	}
	checkCase(t, JSON(), c)
	if !acceptString(t, JSONObject(), "{\"a\": 1}") || acceptString(t, JSONObject(), "[1]") {
		t.Error("JSONObject must accept objects only")
	}
}

// checkCase checks the good and bad samples with both the matcher and the
// reference recognizer, then samples random outputs and compares the
// matcher's masks with the reference along the way.
func checkCase(t *testing.T, g *Grammar, c grammarCase) {
	for _, s := range c.good {
		if !completeOK(g, s) {
			t.Errorf("reference rejects good sample %q", s)
		}
		if !acceptString(t, g, s) {
			t.Errorf("matcher rejects good sample %q", s)
		}
	}
	for _, s := range c.bad {
		if completeOK(g, s) {
			t.Errorf("reference accepts bad sample %q", s)
		}
		if acceptString(t, g, s) {
			t.Errorf("matcher accepts bad sample %q", s)
		}
	}
	v := byteVocab(c.extraTok...)
	m := mustMatcher(t, g, v)
	rng := rand.New(rand.NewPCG(7, uint64(len(c.file))))
	for i := range 12 {
		m.Reset()
		out, ended := generateChecked(t, g, m, v, rng, i < 3)
		if ended && !completeOK(g, out) {
			t.Errorf("generated %q ended but the reference says it is incomplete", out)
		}
		if !prefixOK(g, out) {
			t.Errorf("generated %q is not a valid prefix", out)
		}
	}
}

// generateChecked samples like generate; when compare is set it checks at
// every step that the mask equals the reference's verdict on every token.
func generateChecked(t *testing.T, g *Grammar, m *Matcher, v *fakeVocab, rng *rand.Rand, compare bool) (string, bool) {
	t.Helper()
	logits := make([]float32, v.VocabSize())
	var out []byte
	ref := newRef(g)
	for step := 0; step < 60; step++ {
		if compare {
			for i := range logits {
				logits[i] = 0
			}
			m.Mask(logits)
			for id := int32(0); id < int32(v.VocabSize()); id++ {
				var want bool
				if v.IsEOG(id) {
					want = ref.canEnd()
				} else if len(v.Piece(id)) > 0 { // control tokens match no characters
					want = ref.clone().feed(string(v.Piece(id)))
				}
				got := logits[id] == 0
				if got != want {
					t.Fatalf("after %q token %d %q: mask says %v, reference %v", out, id, v.Piece(id), got, want)
				}
				if m.Allowed(id) != want {
					t.Fatalf("after %q token %d %q: Allowed says %v, reference %v", out, id, v.Piece(id), !want, want)
				}
			}
		}
		if m.Done() {
			return string(out), true
		}
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 2)
		}
		tok := sample(m, logits, rng, 1.5)
		if tok < 0 {
			t.Fatalf("every token masked after %q", out)
		}
		if err := m.Accept(tok); err != nil {
			t.Fatalf("Accept(%q) after %q: %v", v.Piece(tok), out, err)
		}
		if v.IsEOG(tok) {
			return string(out), true
		}
		out = append(out, v.Piece(tok)...)
		if compare {
			ref.feed(string(v.Piece(tok)))
		}
	}
	return string(out), false
}

// TestLlamaCppGrammars parses every grammar of llama.cpp's grammars/
// folder and checks samples of their languages.
func TestLlamaCppGrammars(t *testing.T) {
	dir := os.Getenv("MOONLM_LLAMACPP_DIR")
	if dir == "" {
		t.Skip("MOONLM_LLAMACPP_DIR (a llama.cpp source tree) is not set: its grammars/ files cannot be read (they are not ours to commit)")
	}
	files, err := filepath.Glob(filepath.Join(dir, "grammars", "*.gbnf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no grammars in %s/grammars (%v)", dir, err)
	}
	samples := map[string]grammarCase{
		"arithmetic.gbnf": {good: []string{"1+2=3\n", "(a +b)*c = x\n", "x=1\ny = (2)\n"}, bad: []string{"1+=3\n", "=1\n"}},
		"c.gbnf": {good: []string{"int main(){int x = 5;while(x>0){x = x-1;}return x;}", "float f(int a){if(a<=1){return a;}else{a = g(a, 2);}/* c */// d\n}"},
			bad: []string{"int main(){int x = ;}", "main(){}"}},
		"chess.gbnf":    {good: []string{"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 Nf6\n2. c4 e6\n10. O-O-O Qxd8#\n"}, bad: []string{"1. e9 e5\n2. a3 a6\n", "1. e4 e5\n"}},
		"english.gbnf":  {good: []string{"Hello, world! 123", "a\tb\n[c]{~}"}, bad: []string{"héllo", "a  b", ""}},
		"japanese.gbnf": {good: []string{"こんにちは 世界。", "カタカナ、ひらがな"}, bad: []string{"hello", "日本  語"}},
		"json.gbnf":     {good: []string{`{"a": [1, 2.5e3, "x\u00e9"], "b": {"c": null}}`, "{}"}, bad: []string{`{"a" 1}`, "[1]"}},
		"json_arr.gbnf": {good: []string{"[\n1,\n{\"a\": true}]", "[\n]"}, bad: []string{"[1]", "{}"}},
		"list.gbnf":     {good: []string{"- one\n- two\n"}, bad: []string{"- one", "* one\n"}},
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			g := readGrammar(t, f)
			c, ok := samples[name]
			if !ok {
				t.Logf("no samples for %s: parse and random walks only", name)
			}
			c.file = name
			c.extraTok = []string{"{\"", "\": ", "1. ", "int", "こん", "\xe3\x81", "\x93", "- "}
			checkCase(t, g, c)
		})
	}
}

// comboVocab has every string of one to three symbols from alphabet (so
// subtrees are large enough for the matcher's subtree summaries), an end
// token (id 0) and a control token.
func comboVocab(alphabet []string) *fakeVocab {
	v := &fakeVocab{eog: map[int32]bool{0: true}, control: map[int32]bool{1: true}}
	v.pieces = []string{"</s>", "<ctl>"}
	var rec func(prefix string, n int)
	rec = func(prefix string, n int) {
		if prefix != "" {
			v.pieces = append(v.pieces, prefix)
		}
		if n == 0 {
			return
		}
		for _, a := range alphabet {
			rec(prefix+a, n-1)
		}
	}
	rec("", 3)
	return v
}

func TestMaskLargeSubtrees(t *testing.T) { testMaskLargeSubtrees(t, "") }

// testMaskLargeSubtrees runs the cases whose names start with prefix.
func testMaskLargeSubtrees(t *testing.T, prefix string) {
	alphabet := []string{"a", "b", "\"", "\\", "{", "}", ":", ",", "1", " ", "\n", "é", "日", "\xc3", "\xa9", "\x80", "\xe6"}
	v := comboVocab(alphabet)
	cases := []struct {
		name string
		g    *Grammar
	}{
		{"json", JSON()},
		{"japanese", readGrammar(t, filepath.Join("testdata", "grammars", "japanese.gbnf"))},
		{"any", mustParse(t, `root ::= "{" [^}]* "}"`)},
		{"ascii", mustParse(t, `root ::= [a-z "\\]+ ","`)},
		// bounded repetitions: masks from the canonical state plus exact
		// checks of tokens longer than the count left
		{"counted", mustParse(t, `root ::= [ab1 é]{2,12} ":" ("{" [ab]{0,7} "}"){1,3}`)},
		{"counted-long", mustParse(t, `root ::= "{" [ab1 é,]{0,30} "}" [ab]{3,40} ":"`)},
		{"counted-entry", mustParse(t, `root ::= ( "{" [ab1 é,]{1,30} "}" ){1,3} ":" [é]{1,4} "\n"`)},
	}
	for _, c := range cases {
		if !strings.HasPrefix(c.name, prefix) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			m := mustMatcher(t, c.g, v)
			rng := rand.New(rand.NewPCG(3, 4))
			for range 4 {
				m.Reset()
				generateChecked(t, c.g, m, v, rng, true)
			}
		})
	}
}

// Masks in a bounded repetition as its count runs out, against the
// reference at every step, with masks from canonical states as often as
// the matcher would take them and always.
func TestCountedRepetitionMasks(t *testing.T) {
	for _, share := range []int{exactCheckShare, 1} {
		saved := exactCheckShare
		exactCheckShare = share
		t.Run(fmt.Sprint("share-", share), testCountedRepetitionMasks)
		t.Run(fmt.Sprint("large-share-", share), func(t *testing.T) { testMaskLargeSubtrees(t, "counted") })
		exactCheckShare = saved
	}
}

func testCountedRepetitionMasks(t *testing.T) {
	// every string of a and b up to six letters, so subtrees hold only
	// characters of the repetition and can be taken whole
	v := &fakeVocab{eog: map[int32]bool{0: true}, pieces: []string{"</s>", "}", "x", "y", "z", "w", "éé", "éa", "éééé", "ééééé", "é", "\xc3", "\xa9", "xéé", "\xa9é", "bé ", "ééé", "abé", " "}}
	var rec func(p string)
	rec = func(p string) {
		if p != "" {
			v.pieces = append(v.pieces, p)
		}
		if len(p) < 6 {
			rec(p + "a")
			rec(p + "b")
		}
	}
	rec("")
	g := mustParse(t, `root ::= "x" [ab é]{0,20} "}" | "y" ([ab]{2}){0,7} "}" | "z" [ab]{0,4} "}" | "w" [^}]{1,4} "}"`)
	id := func(s string) int32 {
		for i, p := range v.pieces {
			if p == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	for _, path := range [][]string{
		{"x", "aaa", "bé ", "aaa", "ééé", "abé", "ab", "a", "b", "a"},
		{"y", "aba", "bab", "ab", "aaa", "b", "}"},
		{"xéé", "\xc3", "\xa9é", "aaa", "aaa", "aaa", "aaa"},
		{"x", "aaaaaa", "bbbbbb", "ababab", "a", "b", "}"},
		{"z", "a", "bb", "a", "}"},
		{"w", "éé", "a", "}"},
	} {
		m := mustMatcher(t, g, v)
		ref := newRef(g)
		logits := make([]float32, v.VocabSize())
		var out string
		for _, p := range path {
			clear(logits)
			m.Mask(logits)
			for tok := int32(0); tok < int32(v.VocabSize()); tok++ {
				var want bool
				if v.IsEOG(tok) {
					want = ref.canEnd()
				} else if len(v.Piece(tok)) > 0 {
					want = ref.clone().feed(string(v.Piece(tok)))
				}
				if got := logits[tok] == 0; got != want {
					t.Fatalf("after %q token %q: mask %v, reference %v", out, v.Piece(tok), got, want)
				}
			}
			if err := m.Accept(id(p)); err != nil {
				t.Fatalf("after %q: %v", out, err)
			}
			ref.feed(p)
			out += p
		}
	}
}
