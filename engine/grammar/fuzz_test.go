package grammar

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any text either parses or gives an error; a grammar that
// parses can be matched without panics, and its masks agree with Allowed.
func FuzzParse(f *testing.F) {
	f.Add(`root ::= "a" [b-d]* ("e" | f){1,3}`+"\nf ::= .", "abce")
	f.Add(JSONText, `{"a": [1, "x"]}`)
	f.Add(`root ::= <[3]> !<[4]>* "x"?`, "x")
	f.Add("root ::= (\"a\" root \")\")?", "aaa)))")
	files, _ := filepath.Glob(filepath.Join("testdata", "grammars", "*.gbnf"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b), "1. e4 e5\n")
		}
	}
	v := byteVocab("ab", "\xc3", "\xa9", "{\"", "1. ")
	f.Fuzz(func(t *testing.T, src, input string) {
		g, err := Parse(src)
		if err != nil {
			return
		}
		_ = g.String()
		m, err := NewMatcher(g, v)
		if err != nil {
			return
		}
		logits := make([]float32, v.VocabSize())
		for i := 0; i < len(input) && i < 64; i++ {
			for j := range logits {
				logits[j] = 0
			}
			m.Mask(logits)
			for _, id := range []int32{0, int32(input[i]), 256, 257, 258} {
				if (logits[id] == 0) != m.Allowed(id) {
					t.Fatalf("Mask and Allowed disagree on %d", id)
				}
			}
			tok := int32(input[i])
			if tok == 0 {
				tok = 256
			}
			if m.Allowed(tok) != (m.Accept(tok) == nil) {
				t.Fatalf("Allowed and Accept disagree on %d", tok)
			}
			_ = m.Done()
		}
	})
}
