package grammar

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// A grammar that allows one string yields exactly it, whatever the logits,
// then only the end token.
func TestSingleStringYieldsIt(t *testing.T) {
	want := "Hello, 世界! \"quoted\" \\ done"
	g := mustParse(t, `root ::= "Hello, 世界! \"quoted\" \\ done"`)
	v := byteVocab("Hello", ",", " 世", "界", "\xe4\xb8", "\x96", "! \"", "quoted", "\\", " done", "He", "llo, ")
	m := mustMatcher(t, g, v)
	rng := rand.New(rand.NewPCG(11, 12))
	for i := range 30 {
		m.Reset()
		got, ended := generate(t, m, v, rng, 1.5+float64(i%3), 200)
		if got != want || !ended {
			t.Fatalf("run %d: got %q (ended %v), want %q", i, got, ended, want)
		}
	}
}

func TestEndOfGeneration(t *testing.T) {
	g := mustParse(t, `root ::= "a" "b"?`)
	v := byteVocab()
	m := mustMatcher(t, g, v)
	if m.Allowed(0) || m.CanEnd() || m.Done() {
		t.Fatal("end allowed before anything")
	}
	if err := m.Accept(0); err == nil {
		t.Fatal("Accept(end) before the grammar can end")
	}
	if err := m.Accept('b'); err == nil {
		t.Fatal("Accept of a disallowed token")
	}
	if err := m.Accept('a'); err != nil {
		t.Fatal(err)
	}
	if !m.CanEnd() || m.Done() || !m.Allowed(0) || !m.Allowed('b') || m.Allowed('a') {
		t.Fatal("after a: can end, may continue with b")
	}
	if err := m.Accept('b'); err != nil {
		t.Fatal(err)
	}
	if !m.CanEnd() || !m.Done() {
		t.Fatal("after ab: done")
	}
	logits := make([]float32, v.VocabSize()+3) // a model's logits may be longer than the vocabulary
	m.Mask(logits)
	for i, l := range logits {
		if (i == 0) != (l == 0) {
			t.Fatalf("after ab: logit %d = %v; only the end token may stay", i, l)
		}
	}
	if err := m.Accept(0); err != nil {
		t.Fatal(err)
	}
	m.Reset()
	if m.CanEnd() || !m.Allowed('a') {
		t.Fatal("Reset did not return to the start")
	}
	if m.Allowed(-1) || m.Allowed(int32(v.VocabSize())) || m.Accept(int32(v.VocabSize())) == nil {
		t.Fatal("ids outside the vocabulary must be refused")
	}
}

// Tokens that end inside a UTF-8 character are allowed when some
// completion fits, and the next token completes it.
func TestPartialUTF8(t *testing.T) {
	g := mustParse(t, `root ::= [é-ë]+ "!"`) // é..ë: C3 A9 .. C3 AB
	v := byteVocab("é", "\xc3", "\xa9", "\xab!", "\xac")
	m := mustMatcher(t, g, v)
	id := func(s string) int32 {
		for i, p := range v.pieces {
			if p == s && i > 255 {
				return int32(i)
			}
		}
		if len(s) == 1 {
			return int32(s[0])
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	if !m.Allowed(id("\xc3")) || m.Allowed(id("\xa9")) || m.Allowed(id("\xe6")) {
		t.Fatal("lead byte C3 must be allowed, a continuation or another lead not")
	}
	if err := m.Accept(id("\xc3")); err != nil {
		t.Fatal(err)
	}
	if m.CanEnd() || m.Allowed(0) {
		t.Fatal("cannot end inside a character")
	}
	if !m.Allowed(id("\xa9")) || m.Allowed(id("\xac")) || m.Allowed('a') || !m.Allowed(id("\xab!")) {
		t.Fatal("after C3: only A9..AB continue")
	}
	if err := m.Accept(id("\xab!")); err != nil {
		t.Fatal(err)
	}
	if !m.Done() {
		t.Fatal("ë! completes the grammar")
	}
}

func TestTokenReferences(t *testing.T) {
	v := byteVocab("<think>", "</think>", "<|tool|>")
	think, endThink, tool := int32(256), int32(257), int32(258)
	v.control = map[int32]bool{think: true, endThink: true, tool: true}
	g := mustParse(t, `root ::= <think> thought </think> "ok" | <[258]> "x"
thought ::= !</think>*`)
	m := mustMatcher(t, g, v)
	if !m.Allowed(think) || !m.Allowed(tool) || m.Allowed(endThink) || m.Allowed('<') {
		t.Fatal("start: only <think> or token 258")
	}
	must := func(tok int32) {
		t.Helper()
		if err := m.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	must(think)
	// inside: any token but </think>, including other control tokens
	if !m.Allowed('a') || !m.Allowed(tool) || !m.Allowed(endThink) || m.Allowed(0) {
		t.Fatal("inside thought: anything but the end token; </think> closes")
	}
	logits := make([]float32, v.VocabSize())
	m.Mask(logits)
	for i, l := range logits {
		if (l == 0) != (i != 0) {
			t.Fatalf("inside thought: logit %d = %v", i, l)
		}
	}
	must('a')
	must(tool)
	must(endThink)
	if m.Allowed(endThink) || !m.Allowed('o') {
		t.Fatal("after </think>: ok")
	}
	must('o')
	must('k')
	if !m.Done() {
		t.Fatal("done after ok")
	}

	if _, err := NewMatcher(mustParse(t, `root ::= <[999]>`), v); err == nil {
		t.Error("<[999]> outside a vocabulary of 259 accepted")
	}
	if _, err := NewMatcher(mustParse(t, `root ::= <nothere>`), v); err == nil || !strings.Contains(err.Error(), "<nothere>") {
		t.Errorf("unknown token name: %v", err)
	}
}

// Control tokens render nothing and never match characters.
func TestControlTokensMatchNoCharacters(t *testing.T) {
	v := byteVocab("<|im_start|>")
	v.control = map[int32]bool{256: true}
	m := mustMatcher(t, mustParse(t, `root ::= .*`), v)
	if m.Allowed(256) {
		t.Fatal("a control token matched characters")
	}
}

// Input nested deeper than the matcher's stack limit is an error, not a
// crash or an unbounded allocation.
func TestDeepInputIsAnError(t *testing.T) {
	v := byteVocab(strings.Repeat("(", 1000))
	m := mustMatcher(t, mustParse(t, `root ::= "(" root ")" | "x"`), v)
	var err error
	for i := 0; i < maxStackDepth/1000+2 && err == nil; i++ {
		err = m.Accept(256)
	}
	if err == nil || !strings.Contains(err.Error(), "deeper") {
		t.Fatalf("got %v, want a depth error", err)
	}
	logits := make([]float32, v.VocabSize())
	m.Mask(logits) // must not panic
	m.Reset()
	if err := m.Accept('x'); err != nil || !m.Done() {
		t.Fatalf("after Reset: %v", err)
	}
}

// A grammar whose parses multiply hits the state limit with an error.
func TestAmbiguityLimit(t *testing.T) {
	// every way of splitting a run of a's into 1..9 groups stays alive
	g := mustParse(t, `root ::= x*
x ::= "a" | "a" y
y ::= "a" | "a" z
z ::= "a"`)
	v := byteVocab(strings.Repeat("a", 50))
	m := mustMatcher(t, g, v)
	for i := 0; i < 20; i++ {
		if err := m.Accept(256); err != nil {
			t.Fatalf("linear ambiguity should stay bounded: %v", err)
		}
	}
	if len(m.states[m.cur].set) > 16 {
		t.Fatalf("%d stacks for a grammar with three readings", len(m.states[m.cur].set))
	}
}

func TestMaskKeepsAllowedLogits(t *testing.T) {
	v := byteVocab()
	m := mustMatcher(t, mustParse(t, `root ::= [a-c]`), v)
	logits := make([]float32, v.VocabSize())
	for i := range logits {
		logits[i] = float32(i)
	}
	m.Mask(logits)
	for i, l := range logits {
		allowed := i >= 'a' && i <= 'c'
		if allowed && l != float32(i) || !allowed && !math.IsInf(float64(l), -1) {
			t.Fatalf("logit %d = %v", i, l)
		}
	}
}

func TestStrictUTF8(t *testing.T) {
	for _, c := range []struct {
		s  string
		ok bool
	}{
		{"é日😀", true}, {"\xed\x9f\xbf", true}, {"\xf4\x8f\xbf\xbf", true}, {"\xe6\x97", true},
		{"\xed\xa0\x80", false}, {"\xe0\x80\x80", false}, {"\xf0\x80\x80\x80", false},
		{"\xf4\x90\x80\x80", false}, {"\xc0\x80", false}, {"\xc1\xbf", false}, {"\x80", false},
		{"\xf8\x88\x80\x80\x80", false}, {"a\x00", false}, {"\xe6a", false},
	} {
		if got := truncatedUTF8([]byte(c.s)); got != c.ok {
			t.Errorf("%q: valid=%v, want %v", c.s, got, c.ok)
		}
	}
	// a grammar accepting any character never lets invalid UTF-8 through
	g := mustParse(t, `root ::= .*`)
	m := mustMatcher(t, g, byteVocab("\xed\xa0\x80", "\xf4\x90\x80\x80"))
	if m.Allowed(256) || m.Allowed(257) {
		t.Error("a surrogate or an out-of-range code point was allowed")
	}
}

// Once a matcher has seen a document, masking and accepting it again
// allocates nothing: the hot loop of generation stays allocation-free.
func TestNoAllocationsWhenWarm(t *testing.T) {
	tok := openVocab(t, "smollm2")
	doc := longJSON(3)
	ids, err := tok.Encode(doc, false, false)
	if err != nil {
		t.Fatal(err)
	}
	m := mustMatcher(t, JSON(), tok)
	logits := make([]float32, tok.VocabSize())
	run := func() {
		m.Reset()
		for _, id := range ids {
			m.Mask(logits)
			if err := m.Accept(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	run()
	if n := testing.AllocsPerRun(3, run); n != 0 {
		t.Fatalf("%v allocations per pass over %d tokens", n, len(ids))
	}
}

// Dropping the caches midway (as the matcher does when they grow past
// their limits) keeps the parse: masks stay those of a matcher that never
// dropped them.
func TestCacheDropKeepsState(t *testing.T) {
	v := byteVocab("{\"", "\": ", "é", "\xc3", "\xa9", "12", "[", "]}")
	g := JSON()
	doc := `{"a": [1, {"é": "x\u00e9y"}, "日本"], "b": -12.5e3}`
	m := mustMatcher(t, g, v)
	fresh := mustMatcher(t, g, v)
	la, lb := make([]float32, v.VocabSize()), make([]float32, v.VocabSize())
	for i := 0; i < len(doc); i++ {
		if i%3 == 0 {
			m.limitErr = errors.New("pretend a limit was hit")
		}
		clear(la)
		clear(lb)
		m.Mask(la)
		fresh.Mask(lb)
		for j := range la {
			if la[j] != lb[j] {
				t.Fatalf("after %q: token %q differs after dropping the caches", doc[:i], v.Piece(int32(j)))
			}
		}
		for _, mm := range []*Matcher{m, fresh} {
			if err := mm.Accept(int32(doc[i])); err != nil {
				t.Fatalf("after %q: %v", doc[:i], err)
			}
		}
	}
	if !m.Done() || !fresh.Done() {
		t.Fatal("both should be done")
	}
}

// Matchers made concurrently share the grammar and the vocabulary's trie;
// run with -race this checks that sharing them is safe.
func TestConcurrentMatchers(t *testing.T) {
	g := JSON()
	v := byteVocab("{\"", "\": ", "é", "12", "[", "]}")
	done := make(chan string, 4)
	for w := range 4 {
		go func() {
			m, err := NewMatcher(g, v)
			if err != nil {
				done <- err.Error()
				return
			}
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			logits := make([]float32, v.VocabSize())
			for range 200 {
				if m.Done() {
					m.Reset()
				}
				tok := sampleFast(m, logits, rng, 1)
				if tok < 0 || m.Accept(tok) != nil {
					done <- "sampling failed"
					return
				}
				if v.IsEOG(tok) {
					m.Reset()
				}
			}
			done <- ""
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Fatal(msg)
		}
	}
}
