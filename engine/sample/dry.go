package sample

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// Bounds on DRY sequence breakers, as llama.cpp: a breaker's text is cut
// to maxBreakerBytes, the tokens after its first to maxBreakerTail.
const (
	MaxDRYBreakers  = 1024
	maxBreakerBytes = 40
	maxBreakerTail  = 20
)

// Vocab is what DRY needs of a vocabulary to find the tokens of its
// sequence breakers.
type Vocab interface {
	// NumTokens is the vocabulary size.
	NumTokens() int
	// TokenText is a token's text as it appears inside a text (special
	// tokens rendered); it may be retained.
	TokenText(id int32) []byte
	// Tokenize encodes text without adding or parsing special tokens.
	Tokenize(text string) ([]int32, error)
}

// dryState is DRY's history, its breakers resolved to tokens, and scratch.
type dryState struct {
	on       bool
	hist     tokenRing
	vocab    Vocab
	breakers map[int32][][]int32 // head token -> tails (empty: a one-token breaker)
	z        []int32             // repeat lengths by distance from the end
	maxRep   []int32             // per token: the longest repeat it would extend
	touched  []int32             // tokens with maxRep set
}

func (d *dryState) init(p *Params) error {
	d.on = p.DRYMultiplier != 0 && p.DRYBase >= 1 && p.DRYPenaltyLastN != 0
	window := 0
	switch {
	case !d.on:
	case p.DRYPenaltyLastN > 0:
		window = p.DRYPenaltyLastN
	default:
		window = MaxPenaltyLastN
	}
	d.hist = newTokenRing(window, eagerWindow)
	for i, b := range p.DRYSequenceBreakers {
		if b == "" {
			return fmt.Errorf("DRY sequence breaker %d is empty", i)
		}
	}
	return nil
}

// NeedsVocab reports whether the sampler has DRY sequence breakers that
// SetVocab has not yet resolved; until then DRY runs without breakers.
func (s *Sampler) NeedsVocab() bool {
	return s.dry.on && len(s.p.DRYSequenceBreakers) > 0 && s.dry.vocab == nil
}

// SetVocab resolves the DRY sequence breakers against v: every token whose
// text contains a breaker stops a repeat by itself, and a token whose text
// ends with the start of a breaker does so when the rest of the breaker's
// tokens follow. Setting the vocabulary that is already set does nothing,
// so a generation loop may call it every time; a vocabulary with a
// BreakerCache shares one resolution among the samplers of a breaker list.
func (s *Sampler) SetVocab(v Vocab) error {
	if v == nil || !s.dry.on || len(s.p.DRYSequenceBreakers) == 0 || s.dry.vocab == v {
		return nil
	}
	cv, _ := v.(interface{ DRYBreakerCache() *BreakerCache })
	var cache *BreakerCache
	if cv != nil {
		cache = cv.DRYBreakerCache()
	}
	if cache == nil {
		br, err := resolveBreakers(v, s.p.DRYSequenceBreakers)
		if err != nil {
			return err
		}
		s.dry.breakers, s.dry.vocab = br, v
		return nil
	}
	key := breakerKey(s.p.DRYSequenceBreakers)
	br, ok := cache.get(key)
	if !ok {
		var err error
		if br, err = resolveBreakers(v, s.p.DRYSequenceBreakers); err != nil {
			return err
		}
		br = cache.put(key, br)
	}
	s.dry.breakers, s.dry.vocab = br, v
	return nil
}

// resolveBreakers finds the tokens of the breakers in v (see SetVocab).
func resolveBreakers(v Vocab, breakers []string) (breakerMap, error) {
	br := breakerMap{}
	n := v.NumTokens()
	for _, text := range breakers {
		b := []byte(text)
		if len(b) > maxBreakerBytes {
			b = b[:maxBreakerBytes]
		}
		for id := int32(0); int(id) < n; id++ {
			w := v.TokenText(id)
			if bytes.Contains(w, b) {
				br[id] = addTail(br[id], nil)
				continue
			}
			// Every suffix of the token that is a proper prefix of b: the
			// rest of b, tokenized, must follow.
			for pos := bytes.IndexByte(w, b[0]); pos >= 0; {
				if rest := w[pos:]; bytes.HasPrefix(b, rest) {
					tail, err := v.Tokenize(string(b[len(rest):]))
					if err != nil {
						return nil, fmt.Errorf("sample: DRY sequence breaker %q: %w", text, err)
					}
					if len(tail) > maxBreakerTail {
						tail = tail[:maxBreakerTail]
					}
					br[id] = addTail(br[id], tail)
				}
				next := bytes.IndexByte(w[pos+1:], b[0])
				if next < 0 {
					break
				}
				pos += 1 + next
			}
		}
	}
	return br, nil
}

// addTail adds tail to tails unless it is there already.
func addTail(tails [][]int32, tail []int32) [][]int32 {
	for _, t := range tails {
		if slices.Equal(t, tail) {
			return tails
		}
	}
	return append(tails, slices.Clip(tail))
}

// SetDRYBreakerTokens sets the breakers as token sequences directly (for a
// caller without a Vocab, and for tests): each is a head token and the
// tokens that must follow it.
func (s *Sampler) SetDRYBreakerTokens(seqs [][]int32) {
	br := map[int32][][]int32{}
	for _, q := range seqs {
		if len(q) > 0 {
			tail := q[1:]
			if len(tail) > maxBreakerTail {
				tail = tail[:maxBreakerTail]
			}
			br[q[0]] = addTail(br[q[0]], slices.Clone(tail))
		}
	}
	s.dry.breakers, s.dry.vocab = br, nil
	s.p.DRYSequenceBreakers = nil
}

func (d *dryState) ensure(n int) {
	if d.on {
		d.maxRep = make([]int32, n)
	}
}

// apply subtracts DRY's penalty from w: a token that would extend a
// sequence of length L >= allowed length that ends the history and also
// appears earlier in it (no further back than a sequence breaker) gets
// multiplier * base^(L - allowed).
func (d *dryState) apply(p *Params, w []float32) {
	if !d.on {
		return
	}
	n := d.hist.len()
	allowed := p.DRYAllowedLength
	if n <= allowed {
		return
	}
	// A breaker limits how far back a repeat may reach: the nearest one
	// (its head i tokens from the end, its tail after it) caps repeats at
	// i minus its tail's length.
	limit := n
	for i := 0; i < n; i++ {
		tails, ok := d.breakers[d.hist.back(i)]
		if !ok {
			continue
		}
		longest := -1
		for _, tail := range tails {
			if len(tail) <= longest || len(tail) > i {
				continue
			}
			match := true
			for j, t := range tail {
				if d.hist.back(i-1-j) != t {
					match = false
					break
				}
			}
			if match {
				longest = len(tail)
			}
		}
		if longest >= 0 {
			limit = i - longest
			break
		}
	}
	if limit < allowed {
		return
	}
	// z[k]: the length of the longest common suffix of the history and the
	// history without its last k tokens (the Z-function of the reversed
	// history), linear time.
	if cap(d.z) < n {
		d.z = make([]int32, n, max(n, 2*cap(d.z)))
	}
	z := d.z[:n]
	l, r := 0, 0 // the match [l, r) found furthest right
	for k := 1; k < n; k++ {
		m := 0
		if k < r {
			m = min(r-k, int(z[k-l]))
		}
		for k+m < n && d.hist.back(m) == d.hist.back(k+m) {
			m++
		}
		z[k] = int32(m)
		if k+m > r {
			l, r = k, k+m
		}
	}
	// The token after a repeat would extend it.
	for k := 1; k < n; k++ {
		rep := min(int(z[k]), limit)
		if rep < allowed {
			continue
		}
		next := d.hist.back(k - 1)
		if next < 0 || int(next) >= len(w) {
			continue
		}
		if d.maxRep[next] == 0 {
			d.touched = append(d.touched, next)
		}
		d.maxRep[next] = max(d.maxRep[next], int32(rep)+1)
	}
	// Overflow guard as llama.cpp: base^exp stays below float32's maximum.
	maxExp := 0
	base := float64(p.DRYBase)
	if base > 1.000001 {
		maxExp = int(88.7228391 / logDet(base))
	}
	for _, t := range d.touched {
		rep := int(d.maxRep[t]) - 1
		d.maxRep[t] = 0
		if d.singleBreaker(t) {
			continue
		}
		e := rep - allowed
		if maxExp > 0 && e > maxExp {
			e = maxExp
		}
		pen := min(float64(p.DRYMultiplier)*powInt(base, e), math.MaxFloat32)
		w[t] = clampFinite(float32(float64(w[t])-pen), w[t], float32(-pen))
	}
	d.touched = d.touched[:0]
}

// singleBreaker reports whether t is a breaker by itself.
func (d *dryState) singleBreaker(t int32) bool {
	for _, tail := range d.breakers[t] {
		if len(tail) == 0 {
			return true
		}
	}
	return false
}

// powInt is x^e for e >= 0 by repeated squaring, exact and the same on
// every platform.
func powInt(x float64, e int) float64 {
	r := 1.0
	for e > 0 {
		if e&1 != 0 {
			r *= x
		}
		x *= x
		e >>= 1
	}
	if math.IsNaN(r) {
		return math.Inf(1)
	}
	return r
}
