package engine

import (
	"fmt"
	"math"

	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/kernels"
)

// Per-token stages of the forward pass, run by runStage over the batch.
const (
	stEmbed    = iota // embedding, RoPE angles, first layer's attention norm
	stQKV             // biases, Q/K norms, RoPE, KV cache store
	stAttnOut         // quantize the attention output for the O projection
	stResidAtt        // post-attention norm, residual, FFN norm
	stFFNAct          // gate activation times up
	stResidFFN        // post-FFN norm, residual, next layer's attention norm
	stFinal           // output norm
)

// forward runs one chunk of tokens at positions s.pos.. through the model.
// out, when not nil, receives the logits of tokens[first:], one row each.
func (s *Session) forward(tokens []int32, out []float32, first int) error {
	m := s.m
	s.batch = tokens
	s.nTok = len(tokens)
	s.p0 = s.pos
	s.il = 0
	s.stageRun(stEmbed)
	for il := range m.layers {
		if s.cancel.Load() {
			return fmt.Errorf("layer %d: %w", il, ErrCancelled)
		}
		L := &m.layers[il]
		s.il = il
		// xn (normed, quantized) -> q, k, v
		s.setJobs(mmJob{&L.wq, s.act(&L.wq), s.q}, mmJob{&L.wk, s.act(&L.wk), s.k}, mmJob{&L.wv, s.act(&L.wv), s.v})
		if err := s.pool.Run(s.fnMat); err != nil {
			return err
		}
		s.stageRun(stQKV)
		if err := s.pool.Run(s.fnAttn); err != nil {
			return err
		}
		s.stageRun(stAttnOut)
		s.setJobs(mmJob{&L.wo, s.act(&L.wo), s.o})
		if err := s.pool.Run(s.fnMat); err != nil {
			return err
		}
		s.stageRun(stResidAtt)
		s.setJobs(mmJob{&L.gate, s.act(&L.gate), s.g}, mmJob{&L.up, s.act(&L.up), s.u})
		if err := s.pool.Run(s.fnMat); err != nil {
			return err
		}
		s.stageRun(stFFNAct)
		s.setJobs(mmJob{&L.down, s.act(&L.down), s.o})
		if err := s.pool.Run(s.fnMat); err != nil {
			return err
		}
		s.stageRun(stResidFFN)
	}
	if out == nil {
		return nil
	}
	if s.cancel.Load() {
		return fmt.Errorf("output: %w", ErrCancelled)
	}
	s.outFirst = first
	s.stageRun(stFinal)
	// The final stage normed and quantized token first+r into row r.
	s.setJobs(mmJob{&m.output, s.act(&m.output), out})
	s.nTok -= first
	return s.pool.Run(s.fnMat)
}

func (s *Session) act(mt *kernels.Matrix) []byte { return s.acts[kernels.ActType(mt)] }

func (s *Session) setJobs(jobs ...mmJob) {
	s.nJobs = copy(s.jobs[:], jobs)
}

// stageRun runs a per-token stage: inline for one token (dispatching would
// cost more than the work), else split over the pool by tokens.
func (s *Session) stageRun(stage int) {
	s.stage = stage
	if s.nTok == 1 {
		s.stageToken(0, 0)
		return
	}
	if stage == stFinal && s.outFirst == s.nTok-1 {
		s.stageToken(s.nTok-1, 0)
		return
	}
	if err := s.pool.Run(s.fnStage); err != nil {
		panic(err) // re-raised so eval's recover classifies it
	}
}

// runStage is the pool task of stageRun.
func (s *Session) runStage(i, n int) {
	lo, hi := pool.Split(s.nTok, i, n, 1)
	for t := lo; t < hi; t++ {
		s.stageToken(t, i)
	}
}

// runMatrices is the pool task computing the current jobs: each thread
// takes its share of every matrix's rows.
func (s *Session) runMatrices(i, n int) {
	for j := 0; j < s.nJobs; j++ {
		job := &s.jobs[j]
		lo, hi := pool.Split(job.m.Rows, i, n, 16)
		if lo >= hi {
			continue
		}
		if s.nTok == 1 {
			s.kern.MatVec(job.m, job.xq, job.y, lo, hi)
		} else {
			s.kern.MatMulTiled(job.m, job.xq, s.nTok, job.y, lo, hi)
		}
	}
}

// quantize converts row (n values) into row dst of every activation buffer
// the given weight matrices read.
func (s *Session) quantize(row []float32, dst, n int, mats ...*kernels.Matrix) {
	for k, mt := range mats {
		at := kernels.ActType(mt)
		dup := false
		for _, prev := range mats[:k] {
			if kernels.ActType(prev) == at {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		rb := kernels.ActBytes(mt, n)
		s.kern.QuantizeAct(at, row, s.acts[at][dst*rb:(dst+1)*rb])
	}
}

// stageToken runs the current stage for token t of the batch.
func (s *Session) stageToken(t, worker int) {
	c := s.c
	m := s.m
	dim := c.dim
	qDim, kvDim := c.nHead*c.headDim, c.nKV*c.headDim
	L := &m.layers[s.il]
	x := s.x[t*dim : (t+1)*dim]
	xn := s.xn[t*dim : (t+1)*dim]
	switch s.stage {
	case stEmbed:
		id := s.batch[t]
		kernels.DequantizeRow(m.embd.Type, m.embd.Row(int(id)), x)
		if c.embScale != 1 {
			s.kern.Scale(x, c.embScale)
		}
		pos := s.p0 + t
		kernels.RoPECache(kernels.RoPEParams{NDims: c.nRot, FreqBase: c.ropeBase, FreqScale: c.ropeScale, FreqFactors: m.ropeFreqs},
			pos, s.rope[t*c.nRot:(t+1)*c.nRot])
		if s.ropeSWA != nil {
			kernels.RoPECache(kernels.RoPEParams{NDims: c.nRot, FreqBase: c.ropeSWA, FreqScale: 1},
				pos, s.ropeSWA[t*c.nRot:(t+1)*c.nRot])
		}
		s.rmsNorm(xn, x, L.attnNorm)
		s.quantize(xn, t, dim, &L.wq, &L.wk, &L.wv)
	case stQKV:
		q := s.q[t*qDim : (t+1)*qDim]
		k := s.k[t*kvDim : (t+1)*kvDim]
		v := s.v[t*kvDim : (t+1)*kvDim]
		if L.bq != nil {
			kernels.Add(q, q, L.bq)
			kernels.Add(k, k, L.bk)
			kernels.Add(v, v, L.bv)
		}
		if L.qNorm != nil {
			hd := c.headDim
			for h := 0; h < c.nHead; h++ {
				s.rmsNorm(q[h*hd:(h+1)*hd], q[h*hd:(h+1)*hd], L.qNorm)
			}
			for h := 0; h < c.nKV; h++ {
				s.rmsNorm(k[h*hd:(h+1)*hd], k[h*hd:(h+1)*hd], L.kNorm)
			}
		}
		rc := s.rope[t*c.nRot : (t+1)*c.nRot]
		if L.sliding {
			rc = s.ropeSWA[t*c.nRot : (t+1)*c.nRot]
		}
		if s.m.numerics == NumericsIk {
			s.kern.RoPEApplyIk(q, c.headDim, c.nHead, rc, c.neox)
			s.kern.RoPEApplyIk(k, c.headDim, c.nKV, rc, c.neox)
		} else {
			s.kern.RoPEApply(q, c.headDim, c.nHead, rc, c.neox)
			s.kern.RoPEApply(k, c.headDim, c.nKV, rc, c.neox)
		}
		if c.qScale != 1 && !s.ikAttn {
			s.kern.Scale(q, c.qScale)
		}
		pos := s.p0 + t
		kc := s.cache
		if kc.f32 {
			copy(kc.k32[s.il][pos*kvDim:(pos+1)*kvDim], k)
			V := kc.v32[s.il]
			for i, x := range v {
				V[kc.vAt(i)+pos] = x
			}
		} else {
			s.kern.FastF16Encode(kc.k16[s.il][pos*kvDim:(pos+1)*kvDim], k)
			V := kc.v16[s.il]
			for i, x := range v {
				V[kc.vAt(i)+pos] = kernels.F32ToF16(x)
			}
		}
	case stAttnOut:
		s.quantize(s.att[t*qDim:(t+1)*qDim], t, qDim, &L.wo)
	case stResidAtt:
		o := s.o[t*dim : (t+1)*dim]
		if L.postAttnNorm != nil {
			s.rmsNorm(o, o, L.postAttnNorm)
		}
		kernels.Add(x, x, o)
		s.rmsNorm(xn, x, L.ffnNorm)
		s.quantize(xn, t, dim, &L.gate, &L.up)
	case stFFNAct:
		g := s.g[t*c.ff : (t+1)*c.ff]
		u := s.u[t*c.ff : (t+1)*c.ff]
		if c.act == actGELU {
			if s.m.numerics == NumericsIk {
				kernels.GELUIk(g, g)
			} else {
				kernels.GELU(g, g)
			}
			kernels.Mul(g, g, u)
		} else {
			s.kern.FastSwiGLU(g, g, u)
		}
		s.quantize(g, t, c.ff, &L.down)
	case stResidFFN:
		o := s.o[t*dim : (t+1)*dim]
		if L.postFFNNorm != nil {
			s.rmsNorm(o, o, L.postFFNNorm)
		}
		kernels.Add(x, x, o)
		if s.il+1 < len(m.layers) {
			N := &m.layers[s.il+1]
			s.rmsNorm(xn, x, N.attnNorm)
			s.quantize(xn, t, dim, &N.wq, &N.wk, &N.wv)
		}
	case stFinal:
		// Token t's logits are output row t - outFirst; earlier tokens
		// are not wanted.
		if t < s.outFirst {
			return
		}
		s.rmsNorm(xn, x, m.outputNorm)
		s.quantize(xn, t-s.outFirst, dim, &m.output)
	}
}

// rmsNorm is RMSNorm with the session's epsilon, weighted as the model's
// numerics mode asks.
func (s *Session) rmsNorm(dst, x, w []float32) {
	if w != nil && s.m.numerics == NumericsIk {
		kernels.RMSNormIk(dst, x, w, s.c.eps)
		return
	}
	kernels.RMSNorm(dst, x, w, s.c.eps)
}

// runAttention is the pool task of causal attention: thread i takes every
// n-th (token, head) pair.
func (s *Session) runAttention(i, n int) {
	c := s.c
	// Causal rows grow with the token, so a contiguous split would give the
	// last thread most of the work: deal (token, head) pairs round-robin.
	if s.groupAttention() {
		for w := i; w < s.nTok*c.nKV; w += n {
			s.attendGroup(w/c.nKV, w%c.nKV, i)
		}
		return
	}
	for w := i; w < s.nTok*c.nHead; w += n {
		if s.ikAttn {
			s.attendHeadIk(w/c.nHead, w%c.nHead, i)
		} else {
			s.attendHead(w/c.nHead, w%c.nHead, i)
		}
	}
}

// groupAttention says whether this batch's attention goes by KV head
// (attendGroup): with an f16 cache in the tinyBLAS order, which is every
// batch but a one-token one in ggml's decode order, outside the ik mode.
func (s *Session) groupAttention() bool {
	return !s.ikAttn && !s.cache.f32 && s.c.headDim%16 == 0 && !(s.nTok == 1 && s.m.decodeInGGMLOrder())
}

// attendGroup computes the query heads of KV head g for token t: for each
// head exactly what attendHead computes (same products in the same order,
// same softmax), with the heads' products against the shared keys and
// values made together (kernels.AttnDotF16RowsMulti), so each cached f16
// row is converted once for all of them.
func (s *Session) attendGroup(t, g, worker int) {
	c := s.c
	hd := c.headDim
	G := c.nHead / c.nKV
	qDim, kvDim := c.nHead*hd, c.nKV*hd
	h0 := g * G
	_, pos, first, _, _ := s.headView(t, h0)
	kc := s.cache
	base := first &^ 15
	n := pos - base + 1
	// The queries rounded to f16, in place (nothing reads them after
	// attention).
	q := s.q[t*qDim+h0*hd : t*qDim+(h0+G)*hd]
	s.kern.RoundF16(q, q)
	K, V := kc.k16[s.il], kc.v16[s.il]
	sc := s.scores[worker][:G*n]
	s.kern.AttnDotF16RowsMulti(q, G, hd, hd, K[first*kvDim+g*hd:], kvDim, pos-first+1, sc[first-base:], n)
	for j := 0; j < G; j++ {
		row := sc[j*n : (j+1)*n]
		s.kern.Scale(row[first-base:], c.kqScale)
		for i := range row[:first-base] {
			row[i] = float32(math.Inf(-1))
		}
		s.kern.FastSoftmax(row)
	}
	s.kern.RoundF16(sc, sc) // the softmax weights in f16, as ggml
	s.kern.AttnDotF16RowsMulti(sc, G, n, n, V[kc.vAt(g*hd)+base:], kc.cap, hd, s.att[t*qDim+h0*hd:t*qDim+(h0+G)*hd], hd)
}

// headView returns what attention head h of batch token t works on: its KV
// head g, its position, the first position it may see (the sliding window's
// start, else 0), its query and its output.
func (s *Session) headView(t, h int) (g, pos, first int, q, out []float32) {
	c := s.c
	hd, qDim := c.headDim, c.nHead*c.headDim
	g = h / (c.nHead / c.nKV)
	pos = s.p0 + t
	if s.m.layers[s.il].sliding {
		first = max(0, pos-c.swaWindow+1)
	}
	return g, pos, first, s.q[t*qDim+h*hd : t*qDim+(h+1)*hd], s.att[t*qDim+h*hd : t*qDim+(h+1)*hd]
}

// attendHead computes head h of token t's attention output over the cache.
// With an f16 cache it follows ggml's non-flash attention exactly: q and the
// softmax weights rounded to f16, both products summed as llamafile's
// tinyBLAS does (kernels.AttnDotF16Rows), the softmax as ggml's. Rows are
// laid out from a multiple of 16 positions, as llama.cpp's rows start at KV
// cell 0, so the 16-lane sums group the same positions (exact while cells
// hold positions in order, as they do without a sliding window).
func (s *Session) attendHead(t, h, worker int) {
	c := s.c
	hd := c.headDim
	kvDim := c.nKV * hd
	g, pos, first, q, out := s.headView(t, h)
	kc := s.cache
	base := first &^ 15
	n := pos - base + 1
	sc := s.scores[worker][:n]
	live := sc[first-base:]
	single := s.nTok == 1 && s.m.decodeInGGMLOrder()
	if kc.f32 {
		// ggml's f32 products: q is not contiguous in a batch, so the
		// scores always take ggml_vec_dot_f32; the output takes tinyBLAS
		// for a batch and ggml_vec_dot_f32 for one token.
		K, V := kc.k32[s.il], kc.v32[s.il]
		s.kern.AttnDotF32RowsSingle(q, K[first*kvDim+g*hd:], kvDim, live, false)
		s.kern.Scale(live, c.kqScale)
		for i := range sc[:first-base] {
			sc[i] = float32(math.Inf(-1))
		}
		s.kern.FastSoftmax(sc)
		if single {
			s.kern.AttnDotF32RowsSingle(sc, V[kc.vAt(g*hd)+base:], kc.cap, out, true)
		} else {
			s.kern.AttnDotF32Rows(sc, V[kc.vAt(g*hd)+base:], kc.cap, out)
		}
		return
	}
	q16 := s.q16[worker][:hd]
	s.kern.FastF16Encode(q16, q)
	K, V := kc.k16[s.il], kc.v16[s.il]
	// Scores: key j of head g is hd values at j*kvDim+g*hd. Cells before
	// the window are masked (-Inf), as ggml's mask does.
	// ggml sums a one-token batch's products with its own f16 dot, bigger
	// batches with tinyBLAS, which needs a multiple of 16 values (else
	// ggml falls back to its own dot there too).
	if !single && hd%16 == 0 {
		s.kern.AttnDotF16Rows(q16, K[first*kvDim+g*hd:], kvDim, live)
	} else {
		s.kern.AttnDotF16RowsSingle(q16, K[first*kvDim+g*hd:], kvDim, live, false)
	}
	s.kern.Scale(live, c.kqScale)
	for i := range sc[:first-base] {
		sc[i] = float32(math.Inf(-1))
	}
	s.kern.FastSoftmax(sc)
	w16 := s.w16[worker][:n]
	s.kern.FastF16Encode(w16, sc)
	// Output: value row g*hd+d holds that dimension for every position.
	if single {
		s.kern.AttnDotF16RowsSingle(w16, V[kc.vAt(g*hd)+base:], kc.cap, out, true)
	} else {
		s.kern.AttnDotF16Rows(w16, V[kc.vAt(g*hd)+base:], kc.cap, out)
	}
}
