package grammar

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fakeVocab is a vocabulary given by its pieces; ids listed in eog end
// generation, ids in control render nothing.
type fakeVocab struct {
	pieces  []string
	eog     map[int32]bool
	control map[int32]bool
}

func (v *fakeVocab) VocabSize() int { return len(v.pieces) }
func (v *fakeVocab) Piece(id int32) []byte {
	if v.control[id] || v.eog[id] {
		return nil
	}
	return []byte(v.pieces[id])
}
func (v *fakeVocab) PieceSpecial(id int32) []byte { return []byte(v.pieces[id]) }
func (v *fakeVocab) IsEOG(id int32) bool          { return v.eog[id] }

// byteVocab has a token per byte value 1..255, some multi-byte tokens, and
// an end token (id 0).
func byteVocab(extra ...string) *fakeVocab {
	v := &fakeVocab{eog: map[int32]bool{0: true}}
	v.pieces = append(v.pieces, "</s>")
	for b := 1; b < 256; b++ {
		v.pieces = append(v.pieces, string([]byte{byte(b)}))
	}
	v.pieces = append(v.pieces, extra...)
	return v
}

func mustParse(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return g
}

func mustMatcher(t testing.TB, g *Grammar, v Vocab) *Matcher {
	t.Helper()
	m, err := NewMatcher(g, v)
	if err != nil {
		t.Fatalf("NewMatcher: %v", err)
	}
	return m
}

// sample draws one token from softmax(logits/temp) after masking, using
// rng; it returns -1 when every token is masked.
func sample(m *Matcher, logits []float32, rng *rand.Rand, temp float64) int32 {
	m.Mask(logits)
	maxv := math.Inf(-1)
	for _, l := range logits {
		maxv = math.Max(maxv, float64(l))
	}
	if math.IsInf(maxv, -1) {
		return -1
	}
	var sum float64
	for _, l := range logits {
		if !math.IsInf(float64(l), -1) {
			sum += math.Exp((float64(l) - maxv) / temp)
		}
	}
	r := rng.Float64() * sum
	last := int32(-1)
	for i, l := range logits {
		if math.IsInf(float64(l), -1) {
			continue
		}
		last = int32(i)
		r -= math.Exp((float64(l) - maxv) / temp)
		if r <= 0 {
			return int32(i)
		}
	}
	return last
}

// generate samples up to maxTok tokens with random logits under the
// grammar and returns the text and whether generation ended where allowed.
func generate(t testing.TB, m *Matcher, v Vocab, rng *rand.Rand, temp float64, maxTok int) (string, bool) {
	t.Helper()
	logits := make([]float32, v.VocabSize())
	var out []byte
	for range maxTok {
		if m.Done() {
			return string(out), true
		}
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 3)
		}
		tok := sample(m, logits, rng, temp)
		if tok < 0 {
			t.Fatalf("every token masked after %q", out)
		}
		if !m.Allowed(tok) {
			t.Fatalf("sampled token %d (%q) not Allowed after %q", tok, v.Piece(tok), out)
		}
		if err := m.Accept(tok); err != nil {
			t.Fatalf("Accept(%d %q) after %q: %v", tok, v.Piece(tok), out, err)
		}
		if v.IsEOG(tok) {
			if !m.CanEnd() {
				t.Fatalf("end token accepted where the grammar cannot end: %q", out)
			}
			return string(out), true
		}
		out = append(out, v.Piece(tok)...)
	}
	return string(out), false
}

// sampleFast draws from softmax(z/temp) over the allowed tokens with
// z ~ N(0,1) drawn only for those, by the Gumbel-max trick; zero is a
// scratch slice as long as the vocabulary. It returns -1 when every token
// is masked.
func sampleFast(m *Matcher, zero []float32, rng *rand.Rand, temp float64) int32 {
	clear(zero)
	m.Mask(zero)
	best, bestV := int32(-1), math.Inf(-1)
	for i, l := range zero {
		if l != 0 {
			continue
		}
		g := -math.Log(-math.Log(rng.Float64() + 1e-300))
		if v := rng.NormFloat64()/temp + g; v > bestV {
			best, bestV = int32(i), v
		}
	}
	return best
}
