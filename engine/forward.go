package engine

import (
	"fmt"
	"math"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/numerics"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/kernels"
)

// Per-token stages of the forward pass, run by runStage over the batch.
const (
	stEmbed = iota // embedding, RoPE angles, the first layer's first phase
	stLayer        // token phase s.phase of layer s.il (and with s.chain, phase 0 of the next)
	stFinal        // output norm
)

// forward runs one chunk of tokens at positions s.pos.. through the model.
// out, when not nil, receives the logits of tokens[first:], one row each.
func (s *Session) forward(tokens []int32, out []float32, first int) error {
	m := s.m
	if err := m.packed.ready(); err != nil {
		return err
	}
	pl := m.plan
	s.batch = tokens
	s.nTok = len(tokens)
	s.p0 = s.pos
	s.il = 0
	s.stageRun(stEmbed)
	last := len(pl.phases) - 1
	for il := range m.layers {
		if s.cancelled() {
			return fmt.Errorf("layer %d: %w", il, ErrCancelled)
		}
		L := &m.layers[il]
		s.il = il
		for pi := 1; pi < last; pi++ {
			ph := &pl.phases[pi]
			var err error
			switch ph.kind {
			case phMatMul:
				s.setJobs(L, ph.proj)
				err = s.pool.Run(s.fnMat)
			case phAttend:
				err = s.pool.Run(s.fnAttn)
			case phMoE:
				err = s.runMoE(L)
			case phTokens:
				s.phase, s.chain = pi, false
				s.stageRun(stLayer)
			}
			if err != nil {
				return err
			}
		}
		// This layer's last phase and the next one's first in one dispatch.
		s.phase, s.chain = last, il+1 < len(m.layers)
		s.stageRun(stLayer)
	}
	if out == nil {
		return nil
	}
	if s.cancelled() {
		return fmt.Errorf("output: %w", ErrCancelled)
	}
	s.outFirst = first
	s.stageRun(stFinal)
	// The final stage normed and quantized token first+r into row r.
	s.jobs[0] = mmJob{m.output, s.act(m.output), out}
	s.nJobs = 1
	s.nTok -= first
	if err := s.pool.Run(s.fnMat); err != nil {
		return err
	}
	if c := s.c; c.LogitScale != 1 {
		s.kern.Scale(out[:s.nTok*m.output.Rows], c.LogitScale)
	}
	if c := s.c; c.FinalSoftcap != 0 {
		softcap(out[:s.nTok*m.output.Rows], c.FinalSoftcap)
	}
	return nil
}

// attnTemp is Llama 4's attention temperature at position pos, computed
// as llama.cpp does: the position over the floor scale in float32, the
// logarithm and the rest in float64, rounded to float32.
func attnTemp(c *config, pos int) float32 {
	fl := math.Floor(float64(float32(pos) / float32(c.AttnTempFloor)))
	return float32(math.Log(fl+1)*float64(c.AttnTempScale) + 1)
}

// softcap replaces each x by c*tanh(x/c), as ggml computes it: x times
// 1/c, tanh in float32, times c.
func softcap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

func (s *Session) act(mt *kernels.Matrix) []byte { return s.acts[kernels.ActType(mt)] }

// setJobs makes the products of proj with layer L's matrices the current
// jobs.
func (s *Session) setJobs(L *layer, proj []arch.Proj) {
	for j, p := range proj {
		mt := &L.mats[p.W]
		s.jobs[j] = mmJob{mt, s.act(mt), s.bufs[p.Out]}
	}
	s.nJobs = len(proj)
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

// quantize converts row into row dst of every activation buffer that the
// products proj of layer L read (each format once).
func (s *Session) quantize(row []float32, dst int, L *layer, proj []arch.Proj) {
	for k, p := range proj {
		mt := &L.mats[p.W]
		at := kernels.ActType(mt)
		dup := false
		for _, prev := range proj[:k] {
			if kernels.ActType(&L.mats[prev.W]) == at {
				dup = true
				break
			}
		}
		if !dup {
			s.quantizeFor(row, dst, mt)
		}
	}
}

// quantizeFor converts row into row dst of the activation buffer mt reads.
func (s *Session) quantizeFor(row []float32, dst int, mt *kernels.Matrix) {
	rb := kernels.ActBytes(mt, len(row))
	s.kern.QuantizeAct(kernels.ActType(mt), row, s.acts[kernels.ActType(mt)][dst*rb:(dst+1)*rb])
}

// tok is token t's row of buffer b.
func (s *Session) tok(b arch.Buf, t int) []float32 {
	w := s.m.plan.width[b]
	return s.bufs[b][t*w : (t+1)*w]
}

// stageToken runs the current stage for token t of the batch.
func (s *Session) stageToken(t, worker int) {
	c := s.c
	m := s.m
	switch s.stage {
	case stEmbed:
		x := s.tok(arch.X, t)
		id := s.batch[t]
		kernels.DequantizeRow(m.embd.Type, m.embd.Row(int(id)), x)
		if c.EmbScale != 1 {
			s.kern.Scale(x, c.EmbScale)
		}
		pos := s.p0 + t
		if s.packed {
			pos = int(s.packPos[t]) // its position in its own text
		}
		if m.encoder {
			s.encoderEmbed(t, pos)
		}
		kernels.RoPECache(kernels.RoPEParams{NDims: c.Rot, FreqBase: c.RopeBase, FreqScale: c.RopeScale, FreqFactors: s.ropeFreq, AttnFactor: c.AttnFactor,
			ExtFactor: c.YarnExt, CorrDims: m.yarnCorr},
			pos, s.rope[t*c.Rot:(t+1)*c.Rot])
		if s.ropeSWA != nil {
			kernels.RoPECache(kernels.RoPEParams{NDims: c.Rot, FreqBase: c.RopeSWA, FreqScale: c.RopeScaleSWA, AttnFactor: c.AttnFactorSWA},
				pos, s.ropeSWA[t*c.Rot:(t+1)*c.Rot])
		}
		s.tokenOps(m.plan.phases[0].ops, 0, t)
	case stLayer:
		s.tokenOps(m.plan.phases[s.phase].ops, s.il, t)
		if s.chain {
			s.tokenOps(m.plan.phases[0].ops, s.il+1, t)
		}
	case stFinal:
		// Token t's logits are output row t - outFirst; earlier tokens
		// are not wanted.
		if t < s.outFirst {
			return
		}
		xn := s.tok(arch.XN, t)
		s.norm(xn, s.tok(arch.X, t), m.outputNorm)
		s.quantizeFor(xn, t-s.outFirst, m.output)
	}
}

// norm is the model's norm kind: RMS (in the numerics mode's order) or a
// layer norm.
func (s *Session) norm(dst, x, w []float32) {
	if s.c.LayerNorm {
		layerNorm(dst, x, w, nil, s.c.Eps)
		return
	}
	s.ops.RMSNorm(dst, x, w, s.c.Eps)
}

// layerNorm is ggml's norm followed by the weight, in its order on x86
// with AVX-512: the mean from a float64 sum, the centered values and the
// variance from their squares (16 at a time, each group reduced as
// _mm512_reduce_add_ps does and added in float64), then scaled by
// 1/sqrt(variance+eps), multiplied by w and plus b (either may be nil:
// then skipped). dst may be x.
func layerNorm(dst, x, w, b []float32, eps float32) {
	n := len(x)
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum) / float32(n)
	var sq float64
	i := 0
	var lane [16]float32
	for ; i+15 < n; i += 16 {
		for j := range 16 {
			d := x[i+j] - mean
			dst[i+j] = d
			lane[j] = d * d
		}
		var t3 [8]float32
		for j := range 8 {
			t3[j] = lane[8+j] + lane[j]
		}
		var t6 [4]float32
		for j := range 4 {
			t6[j] = t3[4+j] + t3[j]
		}
		sq += float64((t6[0] + t6[2]) + (t6[1] + t6[3]))
	}
	for ; i < n; i++ {
		d := x[i] - mean
		dst[i] = d
		sq += float64(d * d)
	}
	variance := float32(sq / float64(n))
	scale := 1 / float32(math.Sqrt(float64(variance+eps)))
	for i := range dst[:n] {
		dst[i] *= scale
		if w != nil {
			dst[i] *= w[i]
		}
	}
	if b != nil {
		kernels.Add(dst[:n], dst[:n], b[:n])
	}
}

// tokenOps runs the per-token operations ops of layer il for token t.
func (s *Session) tokenOps(ops []tokOp, il, t int) {
	c := s.c
	L := &s.m.layers[il]
	for i := range ops {
		op := &ops[i]
		switch op.kind {
		case tkNorm:
			if w := L.vecs[op.w]; w != nil {
				s.norm(s.tok(op.out, t), s.tok(op.in, t), w)
			}
		case tkHeadNorm:
			w := L.vecs[op.w]
			if w == nil {
				continue
			}
			x := s.tok(op.in, t)
			hd := c.HeadDim
			for h := 0; h+hd <= len(x); h += hd {
				s.ops.RMSNorm(x[h:h+hd], x[h:h+hd], w, c.Eps)
			}
		case tkBias:
			for _, p := range op.proj {
				if b := L.vecs[p.Bias]; b != nil {
					y := s.tok(p.Out, t)
					kernels.Add(y, y, b)
				}
			}
		case tkRoPE:
			if L.noRope {
				continue
			}
			rc := s.rope[t*c.Rot : (t+1)*c.Rot]
			if L.sliding && s.ropeSWA != nil {
				rc = s.ropeSWA[t*c.Rot : (t+1)*c.Rot]
			}
			s.ops.RoPE(s.tok(arch.Q, t), c.HeadDim, c.Heads, rc, c.Neox)
			s.ops.RoPE(s.tok(arch.K, t), c.HeadDim, c.KVHeads, rc, c.Neox)
		case tkScaleQ:
			if c.QScale != 1 && !s.ops.QScaleInAttention {
				s.kern.Scale(s.tok(arch.Q, t), c.QScale)
			}
		case tkTempQ:
			if c.AttnTempScale != 0 {
				if f := attnTemp(c, s.p0+t); f != 1 {
					s.kern.Scale(s.tok(arch.Q, t), f)
				}
			}
		case tkStoreKV:
			s.storeKV(il, t)
		case tkResidual:
			x, in := s.tok(arch.X, t), s.tok(op.in, t)
			if c.ResScale != 1 {
				s.kern.Scale(in, c.ResScale)
			}
			kernels.Add(x, x, in)
		case tkGLU:
			g, u := s.tok(arch.G, t), s.tok(arch.U, t)
			if c.Act == arch.GELU {
				s.ops.GELU(g, g)
				kernels.Mul(g, g, u)
			} else {
				s.kern.FastSwiGLU(g, g, u)
			}
		case tkQuantize:
			s.quantize(s.tok(op.in, t), t, L, op.proj)
		case tkLayerNorm:
			layerNorm(s.tok(op.out, t), s.tok(op.in, t), L.vecs[op.w], L.vecs[op.b], c.Eps)
		case tkAct:
			if x := s.tok(op.in, t); c.Act == arch.GELU {
				s.ops.GELU(x, x)
			} else {
				kernels.SiLU(x, x)
			}
		case tkShGate:
			sharedGate(s.tok(op.out, t), s.tok(arch.SH, t), s.tok(op.in, t), L.vecs[op.w])
		}
	}
}

// storeKV writes token t's keys and values into layer il's cache.
func (s *Session) storeKV(il, t int) {
	k, v := s.tok(arch.K, t), s.tok(arch.V, t)
	kvDim := len(k)
	pos := s.p0 + t
	kc := s.cache
	if kc.q8 {
		s.storeKVQ8(il, pos, k, v)
		return
	}
	if kc.f32 {
		copy(kc.k32[il][pos*kvDim:(pos+1)*kvDim], k)
		V := kc.v32[il]
		for i, x := range v {
			V[kc.vAt(i)+pos] = x
		}
	} else {
		s.kern.FastF16Encode(kc.k16[il][pos*kvDim:(pos+1)*kvDim], k)
		V := kc.v16[il]
		for i, x := range v {
			V[kc.vAt(i)+pos] = kernels.F32ToF16(x)
		}
	}
}

// runAttention is the pool task of causal attention: thread i takes every
// n-th (token, head) pair.
func (s *Session) runAttention(i, n int) {
	c := s.c
	// Causal rows grow with the token, so a contiguous split would give the
	// last thread most of the work: deal (token, head) pairs round-robin.
	if s.cache.q8 {
		for w := i; w < s.nTok*c.Heads; w += n {
			s.attendHeadQ8(w/c.Heads, w%c.Heads, i)
		}
		return
	}
	if s.groupAttention() {
		for w := i; w < s.nTok*c.KVHeads; w += n {
			s.attendGroup(w/c.KVHeads, w%c.KVHeads, i)
		}
		return
	}
	for w := i; w < s.nTok*c.Heads; w += n {
		s.attend(w/c.Heads, w%c.Heads, i)
	}
}

// groupAttention says whether this batch's attention goes by KV head
// (attendGroup): where the numerics allow it (an f16 cache summed in the
// tinyBLAS order), for every batch but a one-token one in ggml's decode
// order.
func (s *Session) groupAttention() bool {
	return s.ops.GroupAttention && !(s.nTok == 1 && s.ops.GGMLDecode)
}

// attendGroup computes the query heads of KV head g for token t: for each
// head exactly what attendHead computes (same products in the same order,
// same softmax), with the heads' products against the shared keys and
// values made together (kernels.AttnDotF16RowsMulti), so each cached f16
// row is converted once for all of them.
func (s *Session) attendGroup(t, g, worker int) {
	c := s.c
	hd := c.HeadDim
	G := c.Heads / c.KVHeads
	qDim, kvDim := c.Heads*hd, c.KVHeads*hd
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
		if c.AttnSoftcap != 0 {
			softcap(row[first-base:], c.AttnSoftcap)
		}
		s.kern.Scale(row[first-base:], c.KQScale)
		for i := range row[:first-base] {
			row[i] = float32(math.Inf(-1))
		}
		s.kern.FastSoftmax(row)
	}
	s.kern.RoundF16(sc, sc) // the softmax weights in f16, as ggml
	s.kern.AttnDotF16RowsMulti(sc, G, n, n, V[kc.vAt(g*hd)+base:], kc.cap, hd, s.att[t*qDim+h0*hd:t*qDim+(h0+G)*hd], hd)
}

// headView returns what attention head h of batch token t works on: its KV
// head g, its position (for a non-causal model the sequence's last: the
// last position it may see), the first position it may see (the sliding
// window's start, else 0), its query and its output.
func (s *Session) headView(t, h int) (g, pos, first int, q, out []float32) {
	c := s.c
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	g = h / (c.Heads / c.KVHeads)
	pos = s.p0 + t
	if c.NonCausal {
		// pos is the last position the head sees: the sequence's end.
		pos = s.p0 + s.nTok - 1
	}
	if s.packed {
		// Several texts in the batch: a token sees its own text's cells.
		first = s.p0 + int(s.packFirst[t])
		if c.NonCausal {
			pos = s.p0 + int(s.packLast[t])
		}
	}
	if s.m.layers[s.il].sliding {
		first = max(0, pos-c.SWAWindow+1)
	}
	return g, pos, first, s.q[t*qDim+h*hd : t*qDim+(h+1)*hd], s.att[t*qDim+h*hd : t*qDim+(h+1)*hd]
}

// attendMode computes head h of token t's attention with the numerics
// mode's own attention (an f16 cache).
func (s *Session) attendMode(t, h, worker int) {
	c := s.c
	hd := c.HeadDim
	g, pos, first, q, out := s.headView(t, h)
	kc := s.cache
	scale := c.KQScale
	if s.ops.QScaleInAttention && s.m.plan.scalesQ {
		// The ScaleQ step left Q unscaled for the mode's attention.
		scale *= c.QScale
	}
	s.ops.Attend(numerics.Head{
		Q: q, Out: out,
		K: kc.k16[s.il][g*hd:], KStride: c.KVHeads * hd,
		V: kc.v16[s.il][kc.vAt(g*hd):], VStride: kc.cap,
		First: first, Pos: pos, Scale: scale, Scores: s.scores[worker],
	})
}

// attendHead computes head h of token t's attention output over the cache.
// With an f16 cache it follows ggml's non-flash attention exactly: q and the
// softmax weights rounded to f16, both products summed as llamafile's
// tinyBLAS does (kernels.AttnDotF16Rows), the softmax as ggml's. Rows are
// laid out from a multiple of 16 positions (64 for one token), as
// llama.cpp's rows start at KV cell 0, so the lane sums group the same
// positions (exact while cells hold positions in order, as llama.cpp's
// full-size cache keeps them within its size, sliding window or not).
func (s *Session) attendHead(t, h, worker int) {
	c := s.c
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	g, pos, first, q, out := s.headView(t, h)
	kc := s.cache
	single := s.nTok == 1 && s.ops.GGMLDecode
	// ggml's rows start at KV cell 0: tinyBLAS groups cells by 16 lanes,
	// ggml_vec_dot (one token) by 64-value steps of four 16-lane
	// accumulators, so a row past a sliding window's start begins at the
	// boundary below it that keeps the grouping.
	base := first &^ 15
	if single {
		base = first &^ 63
	}
	n := pos - base + 1
	sc := s.scores[worker][:n]
	live := sc[first-base:]
	if kc.f32 {
		// ggml's f32 products: q is not contiguous in a batch, so the
		// scores always take ggml_vec_dot_f32; the output takes tinyBLAS
		// for a batch and ggml_vec_dot_f32 for one token.
		K, V := kc.k32[s.il], kc.v32[s.il]
		s.kern.AttnDotF32RowsSingle(q, K[first*kvDim+g*hd:], kvDim, live, false)
		if c.AttnSoftcap != 0 {
			softcap(live, c.AttnSoftcap)
		}
		s.kern.Scale(live, c.KQScale)
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
	if c.AttnSoftcap != 0 {
		softcap(live, c.AttnSoftcap)
	}
	s.kern.Scale(live, c.KQScale)
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
