package grammar_test

import (
	"fmt"
	"math"
	"strings"

	"github.com/moonlm/moonlm/engine/grammar"
)

// letters is a tiny vocabulary: "yes", "no", "y", "es", "n", "o" and an
// end token.
type letters []string

func (v letters) VocabSize() int               { return len(v) }
func (v letters) Piece(id int32) []byte        { return []byte(v[id]) }
func (v letters) PieceSpecial(id int32) []byte { return []byte(v[id]) }
func (v letters) IsEOG(id int32) bool          { return v[id] == "" }

func Example() {
	g, err := grammar.Parse(`root ::= "yes" | "no"`)
	if err != nil {
		panic(err)
	}
	v := letters{"", "yes", "no", "y", "es", "n", "o"}
	m, err := grammar.NewMatcher(g, v)
	if err != nil {
		panic(err)
	}
	logits := make([]float32, len(v))
	m.Mask(logits)
	var allowed []string
	for id, l := range logits {
		if !math.IsInf(float64(l), -1) {
			allowed = append(allowed, fmt.Sprintf("%q", v[id]))
		}
	}
	fmt.Println(strings.Join(allowed, " "))
	_ = m.Accept(3) // "y"
	fmt.Println(m.Allowed(4), m.Allowed(6), m.CanEnd())
	_ = m.Accept(4) // "es"
	fmt.Println(m.CanEnd(), m.Done(), m.Allowed(0))
	// Output:
	// "yes" "no" "y" "n"
	// true false false
	// true true true
}
