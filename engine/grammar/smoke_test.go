package grammar

import (
	"math/rand/v2"
	"testing"
)

func TestSmoke(t *testing.T) {
	g := mustParse(t, `root ::= "ab" [0-9]+ "é"`)
	v := byteVocab("ab", "12", "é", "\xc3")
	m := mustMatcher(t, g, v)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		m.Reset()
		s, ok := generate(t, m, v, rng, 1.5, 50)
		t.Logf("%q %v", s, ok)
	}
}
