// Package sample picks the next token from a model's logits. The stages
// and their order follow llama.cpp's default sampler chain: logit bias,
// repetition penalties, DRY, top-k, typical-p, top-p, min-p, XTC,
// temperature, then a draw (or, with mirostat, temperature and a mirostat
// draw in place of the truncation stages), from a seeded generator of our
// own whose arithmetic is the same on every platform, so a seed reproduces
// the same tokens everywhere.
package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrInvalidParams is wrapped by New's errors.
var ErrInvalidParams = errors.New("invalid sampler parameters")

// MaxPenaltyLastN bounds Params.PenaltyLastN and DRYPenaltyLastN: more
// tokens than any context holds (2^24), so no window that can matter is
// refused. A window's storage grows with the tokens accepted, never to more
// than this many.
const MaxPenaltyLastN = 1 << 24

// MaxMirostatM bounds Params.MirostatM.
const MaxMirostatM = 1 << 20

// eagerWindow is the largest penalty window allocated in full by New.
const eagerWindow = 4096

// Params configures a Sampler. The zero value is greedy decoding without
// penalties.
type Params struct {
	// Temperature divides the logits before the draw; 0 picks the highest
	// logit (greedy, ties to the lowest id) among the tokens the other
	// stages keep.
	Temperature float32
	// TopK keeps the K most likely tokens; 0 disables.
	TopK int
	// TypicalP keeps the locally typical tokens (those whose surprise is
	// closest to the distribution's entropy) until their probability
	// exceeds TypicalP; 0 or 1 disables.
	TypicalP float32
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP; 0 or 1 disables.
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 disables.
	MinP float32
	// XTCProbability is the chance, per token, that XTC ("exclude top
	// choices") removes every token at least XTCThreshold likely except
	// the least likely of them; 0 disables, as does a threshold above 0.5.
	XTCProbability, XTCThreshold float32
	// RepeatPenalty divides positive logits and multiplies negative ones of
	// tokens seen in the window; 0 or 1 disables.
	RepeatPenalty float32
	// PresencePenalty is subtracted once from seen tokens' logits, and
	// FrequencyPenalty once per occurrence in the window.
	PresencePenalty, FrequencyPenalty float32
	// PenaltyLastN is the window of recent accepted tokens the penalties
	// look at: 0 disables the penalties (as llama.cpp), -1 means every
	// token accepted since the last Reset, up to MaxPenaltyLastN. Larger
	// windows are refused.
	PenaltyLastN int
	// DRY ("don't repeat yourself") penalizes a token that would extend a
	// sequence already seen in the last DRYPenaltyLastN accepted tokens
	// (-1: all, 0: off) by DRYMultiplier * DRYBase^(length -
	// DRYAllowedLength) when the repeated sequence is at least
	// DRYAllowedLength tokens long. A sequence breaker's text stops the
	// matching; breakers are given as text and need the vocabulary
	// (SetVocab). DRYMultiplier 0 or DRYBase below 1 disables.
	DRYMultiplier, DRYBase float32
	DRYAllowedLength       int
	DRYPenaltyLastN        int
	DRYSequenceBreakers    []string
	// Mirostat 1 or 2 replaces top-k, typical-p, top-p, min-p and XTC by
	// mirostat (v1 or v2) after the temperature, targeting a surprise of
	// MirostatTau bits with learning rate MirostatEta; v1 estimates the
	// distribution's shape from the MirostatM most likely tokens (0:
	// llama.cpp's 100). Logit bias, penalties and DRY still apply.
	Mirostat                 int
	MirostatTau, MirostatEta float32
	MirostatM                int
	// LogitBias is added to the logits of the given token ids; -Inf bans a
	// token. Ids beyond the vocabulary are ignored.
	LogitBias map[int32]float32
	// Seed seeds the random generator; the same seed gives the same draws.
	Seed uint64
}

// DefaultDRYSequenceBreakers are llama.cpp's default DRY sequence
// breakers.
func DefaultDRYSequenceBreakers() []string { return []string{"\n", ":", "\"", "*"} }

// Sampler turns logits into tokens. It is not safe for concurrent use.
type Sampler struct {
	p        Params
	biasIDs  []int32
	biasVals []float32
	rng      rng

	hist tokenRing // penalty window
	dry  dryState
	mu   float64 // mirostat's current maximum surprise

	// scratch, sized on the first Sample for a vocabulary
	work   []float32
	cands  []cand
	counts []int32
	seen   []int32
	// lastN is the vocabulary size of the last Sample: work[:lastN] holds
	// the logits it saw after bias, penalties and DRY (for Logprobs).
	lastN int
}

type cand struct {
	id    int32
	logit float32
	p     float64
	aux   float64 // a stage's sort key (typical-p's score)
}

// New validates p and returns a sampler.
func New(p Params) (*Sampler, error) {
	bad := func(format string, args ...any) (*Sampler, error) {
		return nil, fmt.Errorf("sample.New: %w: %s", ErrInvalidParams, fmt.Sprintf(format, args...))
	}
	finite := func(f float32) bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return bad("temperature %v must be finite and >= 0", p.Temperature)
	case p.TopK < 0:
		return bad("top-k %d must be >= 0", p.TopK)
	case !finite(p.TypicalP) || p.TypicalP < 0 || p.TypicalP > 1:
		return bad("typical-p %v must be in [0, 1]", p.TypicalP)
	case !finite(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return bad("top-p %v must be in [0, 1]", p.TopP)
	case !finite(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return bad("min-p %v must be in [0, 1]", p.MinP)
	case !finite(p.XTCProbability) || p.XTCProbability < 0 || p.XTCProbability > 1:
		return bad("XTC probability %v must be in [0, 1]", p.XTCProbability)
	case !finite(p.XTCThreshold) || p.XTCThreshold < 0 || p.XTCThreshold > 1:
		return bad("XTC threshold %v must be in [0, 1]", p.XTCThreshold)
	case !finite(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return bad("repeat penalty %v must be finite and >= 0", p.RepeatPenalty)
	case !finite(p.PresencePenalty) || !finite(p.FrequencyPenalty):
		return bad("presence and frequency penalties must be finite")
	case p.PenaltyLastN < -1 || p.PenaltyLastN > MaxPenaltyLastN:
		return bad("penalty window %d must be -1 (all tokens) to %d", p.PenaltyLastN, MaxPenaltyLastN)
	case !finite(p.DRYMultiplier) || p.DRYMultiplier < 0:
		return bad("DRY multiplier %v must be finite and >= 0", p.DRYMultiplier)
	case !finite(p.DRYBase) || p.DRYBase < 0:
		return bad("DRY base %v must be finite and >= 0", p.DRYBase)
	case p.DRYAllowedLength < 0 || p.DRYAllowedLength > MaxPenaltyLastN:
		return bad("DRY allowed length %d must be 0 to %d", p.DRYAllowedLength, MaxPenaltyLastN)
	case p.DRYPenaltyLastN < -1 || p.DRYPenaltyLastN > MaxPenaltyLastN:
		return bad("DRY window %d must be -1 (all tokens) to %d", p.DRYPenaltyLastN, MaxPenaltyLastN)
	case len(p.DRYSequenceBreakers) > MaxDRYBreakers:
		return bad("%d DRY sequence breakers; at most %d", len(p.DRYSequenceBreakers), MaxDRYBreakers)
	case p.Mirostat < 0 || p.Mirostat > 2:
		return bad("mirostat %d must be 0 (off), 1 or 2", p.Mirostat)
	case !finite(p.MirostatTau) || p.MirostatTau < 0:
		return bad("mirostat tau %v must be finite and >= 0", p.MirostatTau)
	case !finite(p.MirostatEta) || p.MirostatEta < 0:
		return bad("mirostat eta %v must be finite and >= 0", p.MirostatEta)
	case p.MirostatM < 0 || p.MirostatM > MaxMirostatM:
		return bad("mirostat m %d must be 0 (100) to %d", p.MirostatM, MaxMirostatM)
	}
	s := &Sampler{p: p}
	if s.p.RepeatPenalty == 0 {
		s.p.RepeatPenalty = 1
	}
	if s.p.MirostatM == 0 {
		s.p.MirostatM = 100
	}
	s.p.DRYSequenceBreakers = slices.Clone(p.DRYSequenceBreakers)
	s.p.LogitBias = nil
	ids := make([]int32, 0, len(p.LogitBias))
	for id, b := range p.LogitBias {
		if id < 0 {
			return bad("logit bias for negative token id %d", id)
		}
		if math.IsNaN(float64(b)) || math.IsInf(float64(b), 1) {
			return bad("logit bias %v for token %d must be a number or -Inf", b, id)
		}
		ids = append(ids, id)
	}
	// Map order is random; sort so the work is identical run to run.
	slices.Sort(ids)
	if len(ids) > 0 {
		s.p.LogitBias = make(map[int32]float32, len(ids))
	}
	for _, id := range ids {
		s.biasIDs = append(s.biasIDs, id)
		s.biasVals = append(s.biasVals, p.LogitBias[id])
		s.p.LogitBias[id] = p.LogitBias[id]
	}
	window := 0
	switch {
	case p.PenaltyLastN > 0:
		window = p.PenaltyLastN
	case p.PenaltyLastN < 0:
		window = MaxPenaltyLastN
	}
	// Windows up to a few thousand tokens (llama.cpp's default is 64) are
	// allocated now, so accepting tokens does not allocate; larger ones
	// grow as they fill.
	if !s.penaltiesOn() {
		window = 0
	}
	s.hist = newTokenRing(window, eagerWindow)
	if err := s.dry.init(&s.p); err != nil {
		return bad("%v", err)
	}
	s.rng.seed(p.Seed)
	s.mu = 2 * float64(s.p.MirostatTau)
	return s, nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params {
	p := s.p
	p.DRYSequenceBreakers = slices.Clone(p.DRYSequenceBreakers)
	if p.LogitBias != nil {
		m := make(map[int32]float32, len(p.LogitBias))
		for k, v := range p.LogitBias {
			m[k] = v
		}
		p.LogitBias = m
	}
	return p
}

func (s *Sampler) penaltiesOn() bool {
	return s.p.PenaltyLastN != 0 && (s.p.RepeatPenalty != 1 || s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0)
}

func (s *Sampler) typicalOn() bool { return s.p.TypicalP > 0 && s.p.TypicalP < 1 }

func (s *Sampler) xtcOn() bool { return s.p.XTCProbability > 0 && s.p.XTCThreshold <= 0.5 }

// Accept records a token (prompt tokens too) for the penalties and DRY.
// Until a window is full its history grows (amortized, like append); then
// it is a ring.
func (s *Sampler) Accept(tok int32) {
	s.hist.push(tok)
	s.dry.hist.push(tok)
}

// Reset forgets the accepted tokens, restarts the generator from the seed
// and mirostat from its initial state, so the sampler then behaves as a new
// one (a vocabulary given to SetVocab is kept).
func (s *Sampler) Reset() {
	s.hist.reset()
	s.dry.hist.reset()
	s.rng.seed(s.p.Seed)
	s.mu = 2 * float64(s.p.MirostatTau)
}

func (s *Sampler) ensure(n int) {
	if len(s.work) == n {
		return
	}
	s.work = make([]float32, n)
	s.cands = make([]cand, n)
	s.counts = make([]int32, n)
	s.dry.ensure(n)
}

// Sample returns the next token for logits, or -1 if logits is empty. It
// does not modify logits and, after the first call for a vocabulary size,
// does not allocate.
func (s *Sampler) Sample(logits []float32) int32 {
	n := len(logits)
	s.lastN = 0
	if n == 0 {
		return -1
	}
	s.ensure(n)
	w := s.work
	for i, l := range logits {
		switch {
		case l != l: // NaN
			l = float32(math.Inf(-1))
		case l > math.MaxFloat32:
			l = math.MaxFloat32
		}
		w[i] = l
	}
	for i, id := range s.biasIDs {
		if int(id) < n {
			b := s.biasVals[i]
			w[id] = clampFinite(w[id]+b, w[id], b)
		}
	}
	if s.penaltiesOn() && s.hist.len() > 0 {
		s.applyPenalties(w)
	}
	s.dry.apply(&s.p, w)
	s.lastN = n
	// Greedy without a stage that can drop the best token (mirostat
	// replaces typical-p and XTC): the argmax.
	if s.p.Temperature == 0 && (s.p.Mirostat != 0 || !s.typicalOn() && !s.xtcOn()) {
		return Argmax(w)
	}
	// Candidates: every token not banned (-Inf).
	c := s.cands[:0]
	for i, l := range w {
		if !math.IsInf(float64(l), -1) {
			c = append(c, cand{id: int32(i), logit: l})
		}
	}
	if len(c) == 0 {
		return Argmax(w)
	}
	t := float64(s.p.Temperature)
	if s.p.Mirostat != 0 && t > 0 {
		if s.p.Mirostat == 1 {
			return s.mirostatV1(c, t, n)
		}
		return s.mirostatV2(c, t)
	}
	sorted := false
	if k := s.p.TopK; k > 0 && k < len(c) {
		selectTop(c, k)
		c = c[:k]
		sorted = true
	}
	if s.typicalOn() {
		c = typical(c, float64(s.p.TypicalP))
		sorted = false
	}
	if p := float64(s.p.TopP); p > 0 && p < 1 {
		c = topP(c, p, sorted)
		sorted = true
	}
	if mp := s.p.MinP; mp > 0 {
		c = minP(c, float64(mp), sorted)
	}
	if s.xtcOn() && len(c) >= 2 {
		// Draw first, as llama.cpp: the generator advances whether or not
		// XTC then applies.
		if s.rng.float64() <= float64(s.p.XTCProbability) {
			c = xtc(c, float64(s.p.XTCThreshold))
		}
	}
	if t == 0 {
		return best(c)
	}
	return c[s.draw(c, t)].id
}

// best returns the id of c's best candidate (highest logit, lowest id).
func best(c []cand) int32 {
	b := c[0]
	for _, x := range c[1:] {
		if better(x, b) {
			b = x
		}
	}
	return b.id
}

// applyPenalties applies llama.cpp's repetition penalties for the tokens in
// the window, each once, with its count there.
func (s *Sampler) applyPenalties(w []float32) {
	n := len(w)
	seen := s.seen[:0]
	for _, t := range s.hist.buf {
		if t < 0 || int(t) >= n {
			continue
		}
		if s.counts[t] == 0 {
			seen = append(seen, t)
		}
		s.counts[t]++
	}
	rp := s.p.RepeatPenalty
	for _, t := range seen {
		l := w[t]
		if l <= 0 {
			l *= rp
		} else {
			l /= rp
		}
		cnt := float32(s.counts[t])
		l -= cnt*s.p.FrequencyPenalty + s.p.PresencePenalty
		w[t] = clampFinite(l, w[t], 0)
		s.counts[t] = 0
	}
	s.seen = seen[:0]
}

// clampFinite keeps an adjusted logit finite when neither the original nor
// the adjustment was infinite: float32 overflow must not ban a token (or
// make one certain) that the caller did not.
func clampFinite(v, orig, adj float32) float32 {
	if math.IsInf(float64(orig), 0) || math.IsInf(float64(adj), 0) {
		return v
	}
	switch {
	case v > math.MaxFloat32:
		return math.MaxFloat32
	case v < -math.MaxFloat32:
		return -math.MaxFloat32
	}
	return v
}

// Argmax returns the index of the largest value, the lowest on ties: the
// greedy choice.
func Argmax(w []float32) int32 {
	best := 0
	for i, l := range w {
		if l > w[best] {
			best = i
		}
	}
	return int32(best)
}

// better is the total order candidates are ranked by: higher logit, then
// lower id.
func better(a, b cand) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func cmpCand(a, b cand) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

// selectTop moves the k best candidates to c[:k], sorted best first,
// without sorting the rest: quickselect, falling back to a full sort if
// the partitioning degenerates.
func selectTop(c []cand, k int) {
	if k >= len(c) {
		slices.SortFunc(c, cmpCand)
		return
	}
	lo, hi := 0, len(c)-1
	budget := 2*bitsLen(len(c)) + 8
	for lo < hi {
		if budget == 0 {
			slices.SortFunc(c[lo:hi+1], cmpCand)
			break
		}
		budget--
		// median of three as pivot, moved to hi
		mid := lo + (hi-lo)/2
		if better(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if better(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if better(c[mid], c[hi]) {
			c[mid], c[hi] = c[hi], c[mid]
		}
		pivot := c[hi]
		store := lo
		for i := lo; i < hi; i++ {
			if better(c[i], pivot) {
				c[i], c[store] = c[store], c[i]
				store++
			}
		}
		c[store], c[hi] = c[hi], c[store]
		switch {
		case store == k || store == k-1:
			lo = hi // done: c[:k] are the k best
		case store < k:
			lo = store + 1
		default:
			hi = store - 1
		}
	}
	slices.SortFunc(c[:k], cmpCand)
}

func bitsLen(n int) int {
	b := 0
	for n > 0 {
		b++
		n >>= 1
	}
	return b
}

// softmaxInto sets c[i].p to the probabilities of c's logits (over c) and
// returns them unnormalised sum-checked; max is the largest logit in c.
func softmaxInto(c []cand, max float32) {
	sum := 0.0
	for i := range c {
		e := expDet(float64(c[i].logit) - float64(max))
		c[i].p = e
		sum += e
	}
	for i := range c {
		c[i].p = c[i].p / sum
	}
}

func maxLogit(c []cand) float32 {
	m := c[0].logit
	for _, x := range c[1:] {
		if x.logit > m {
			m = x.logit
		}
	}
	return m
}

// topP keeps the most likely candidates until their probability (over c)
// reaches p, the last included. It sorts only as much of c as it needs.
func topP(c []cand, p float64, sorted bool) []cand {
	mx := maxLogit(c)
	softmaxInto(c, mx)
	m := len(c)
	if !sorted {
		m = min(64, len(c))
	}
	for {
		if !sorted {
			selectTop(c, m)
		}
		cum := 0.0
		for i := 0; i < m; i++ {
			cum += c[i].p
			if cum >= p {
				return c[:i+1]
			}
		}
		if sorted || m == len(c) {
			return c
		}
		m = min(m*4, len(c))
	}
}

// minP keeps candidates whose probability is at least p times the largest,
// comparing logits: l >= max + ln(p).
func minP(c []cand, p float64, sorted bool) []cand {
	mx := c[0].logit
	if !sorted {
		mx = maxLogit(c)
	}
	thr := float64(mx) + math.Log(p)
	out := c[:0]
	for _, x := range c {
		if float64(x.logit) >= thr {
			out = append(out, x)
		}
	}
	return out
}

// draw picks from c with probability proportional to exp(logit/t) and
// returns its index. The temperature divides the (finite) distance to the
// best logit, in float64, so a small t cannot overflow. It leaves the
// unnormalised weights in c[i].p.
func (s *Sampler) draw(c []cand, t float64) int {
	mx := maxLogit(c)
	sum := 0.0
	for i := range c {
		e := expDet((float64(c[i].logit) - float64(mx)) / t)
		c[i].p = e
		sum += e
	}
	u := s.rng.float64() * sum
	cum := 0.0
	for i := range c {
		cum += c[i].p
		if u < cum {
			return i
		}
	}
	// Rounding left u at the very top: take the last likely candidate.
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].p > 0 {
			return i
		}
	}
	return 0
}
