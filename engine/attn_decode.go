package engine

// A decode step's attention over an f16 cache, grouped by KV head
// (attendGroup's arithmetic, bit for bit), in two parallel passes instead
// of one task per KV head: first every head's scores, the threads taking
// contiguous ranges of positions and each reading its range of the key
// cache front to back (kernels.AttnScoresF16Heads: all the KV heads of 4
// positions, then the next 4); then, a KV head per task, the softmax and
// the products with the values (groupOutput), whose transposed rows are
// contiguous already. Going KV head by KV head through the keys read
// hd values every KV-row stride, a pattern the hardware prefetchers follow
// poorly: at depth 4096 on a Llama-3.2-1B shape the scores took four times
// as long as the value products over the same number of bytes.

// splitDecode says whether this forward pass's attention goes by
// decodeScores and decodeOutputs: one token of one sequence, grouped.
func (s *Session) splitDecode() bool {
	if testPerKVHead || s.decScores == nil || s.multi != nil || s.nTok != 1 || s.cache.q8 || s.cache.f32 || !s.groupAttention(0) || s.ops.Attend != nil {
		return false
	}
	first, pos, _, _ := s.decodeView()
	return pos-first+1 >= splitDecodeMin || testSplitAlways
}

// splitDecodeMin is the fewest visible positions for which a decode step
// takes the two passes: below, the keys of a layer are a few hundred KiB
// (the whole cache fits the last-level cache), and the second parallel
// region costs more than the key order saves (the results are the same
// either way).
const splitDecodeMin = 1024

// testSplitAlways takes the two passes at any depth, for tests.
var testSplitAlways bool

// testPerKVHead sends decode steps through attendGroup's one task per KV
// head (attendHeadsQ8's over a Q8_0 cache), for tests that compare the
// paths.
var testPerKVHead bool

// runAttend runs the attention phase of the current layer.
func (s *Session) runAttend() error {
	if s.q8Decode() {
		return s.pool.Run(s.fnDecQ8)
	}
	if !s.splitDecode() {
		return s.pool.Run(s.fnAttn)
	}
	c := s.lc
	// The queries rounded to f16, as attendGroup does per KV head.
	q := s.q[:c.Heads*c.HeadDim]
	s.kern.RoundF16(q, q)
	if err := s.pool.Run(s.fnDecScores); err != nil {
		return err
	}
	return s.pool.Run(s.fnDecOut)
}

// decodeView is what both passes work on: the visible positions
// first..pos, the row base (first rounded down to 16, as attendGroup) and
// each head's row length n.
func (s *Session) decodeView() (first, pos, base, n int) {
	_, pos, first, _, _ = s.headView(0, 0)
	base = first &^ 15
	return first, pos, base, pos - base + 1
}

// decodeScores is the pool task of the first pass: thread i scores its
// share of the positions, whole groups of 4 (the kernel's step), for every
// query head into decScores (head h's row at h*n).
func (s *Session) decodeScores(i, n int) {
	c := s.lc
	hd, G, kvDim := c.HeadDim, c.Heads/c.KVHeads, c.KVHeads*c.HeadDim
	first, pos, base, rowLen := s.decodeView()
	groups := (pos - first + 4) / 4
	a := first + i*groups/n*4
	b := min(pos+1, first+(i+1)*groups/n*4)
	if a >= b {
		return
	}
	sc := s.decScores[:c.Heads*rowLen]
	s.kern.AttnScoresF16Heads(s.q[:c.Heads*hd], c.KVHeads, G, hd, s.cache.k16[s.kvl][a*kvDim:], kvDim, b-a, sc[a-base:], rowLen)
}

// decodeOutputs is the pool task of the second pass: the softmax and the
// value products of a round-robin share of the KV heads.
func (s *Session) decodeOutputs(i, n int) {
	c := s.lc
	G := c.Heads / c.KVHeads
	first, pos, _, rowLen := s.decodeView()
	for g := i; g < c.KVHeads; g += n {
		s.groupOutput(0, g, first, pos, s.decScores[g*G*rowLen:(g+1)*G*rowLen])
	}
}

// decScoresLen is the length decScores needs for a cache of capacity
// positions: every query head's row (a row may start up to 15 positions
// before the first visible one).
func (s *Session) decScoresLen(capacity int) int {
	h := 0
	for i := range s.m.layers {
		h = max(h, s.m.layers[i].c.Heads)
	}
	return h * (capacity + 16)
}

// headScoresMax bounds decScores in bytes: a larger cache leaves decode
// steps to attendGroup's per-KV-head tasks.
const headScoresMax = 32 << 20

// fitHeadScores sizes decScores for the cache's capacity, or drops it past
// headScoresMax.
func (s *Session) fitHeadScores() {
	n := s.decScoresLen(s.cache.cap)
	if n*4 > headScoresMax {
		s.decScores = nil
		return
	}
	if len(s.decScores) < n {
		s.decScores = make([]float32, n)
	}
}
