package engine

import (
	"fmt"
	"math"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/numerics"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// Per-token stages of the forward pass, run by runStage over the batch.
const (
	stEmbed    = iota // embedding, RoPE angles, the first layer's first phase
	stLayer           // token phase s.phase of layer s.il (and with s.chain, phase 0 of the next)
	stFinal           // output norm
	stPerLayer        // per-layer inputs (after their projection), the first layer's first phase
)

// forward runs one chunk of tokens at positions s.pos.. through the model.
// out, when not nil, receives the logits of tokens[first:], one row each.
func (s *Session) forward(tokens []int32, out []float32, first int) error {
	m := s.m
	if err := m.packed.ready(); err != nil {
		return err
	}
	s.batch = tokens
	s.nTok = len(tokens)
	s.p0 = s.pos
	L0 := &m.layers[0]
	s.il, s.pl, s.lc, s.kvl = 0, L0.plan, L0.c, L0.kv
	s.stageRun(stEmbed)
	if m.pleProj != nil {
		// The per-layer inputs' projection of the embeddings quantized by
		// stEmbed, then the inputs themselves.
		s.jobs[0] = mmJob{m.pleProj, s.act(m.pleProj), s.pli}
		s.nJobs = 1
		if err := s.pool.Run(s.fnMat); err != nil {
			return err
		}
		s.stageRun(stPerLayer)
	}
	for il := range m.layers {
		if s.cancelled() {
			return fmt.Errorf("layer %d: %w", il, ErrCancelled)
		}
		L := &m.layers[il]
		pl := L.plan
		last := len(pl.phases) - 1
		s.il, s.pl, s.lc, s.kvl = il, pl, L.c, L.kv
		for pi := 1; pi < last; pi++ {
			ph := &pl.phases[pi]
			if !ph.only.Has(s.c, il) {
				continue // a phase of the other kind of layer (hybrid models)
			}
			var err error
			switch ph.kind {
			case phMatMul:
				s.setJobs(L, ph.proj)
				err = s.pool.Run(s.fnMat)
			case phAttend:
				err = s.runAttend()
			case phMoE:
				err = s.runMoE(L)
			case phDeltaNet:
				s.shiftConvState(il)
				err = s.pool.Run(s.fnDelta)
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
		if s.testAfterLayer != nil {
			s.testAfterLayer(il)
		}
	}
	if out == nil {
		return nil
	}
	if s.cancelled() {
		return fmt.Errorf("output: %w", ErrCancelled)
	}
	s.outFirst = first
	s.stageRun(stFinal)
	if s.multi != nil {
		// The final stage quantized the wanted tokens into rows 0..nOut-1.
		first = s.nTok - s.multi.nOut
	}
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

// alibiSlopes are ALiBi's per-head slopes as ggml's soft_max computes
// them: for the largest power of two n2 <= heads, head h < n2 takes
// m0^(h+1) and the others m1^(2(h-n2)+1), where m0 = 2^(-maxBias/n2) and
// m1 = 2^(-maxBias/2/n2).
func alibiSlopes(heads int, maxBias float32) []float32 {
	n2 := 1
	for n2*2 <= heads {
		n2 *= 2
	}
	m0 := float32(math.Pow(2, float64(-maxBias/float32(n2))))
	m1 := float32(math.Pow(2, float64(-(maxBias/2)/float32(n2))))
	out := make([]float32, heads)
	for h := range out {
		if h < n2 {
			out[h] = float32(math.Pow(float64(m0), float64(h+1)))
		} else {
			out[h] = float32(math.Pow(float64(m1), float64(2*(h-n2)+1)))
		}
	}
	return out
}

// addAlibi adds slope times minus the distance to the query to scores of
// consecutive keys, the first d0 positions from the query (negative:
// before it), as ggml's soft_max adds the slope times the mask.
func addAlibi(scores []float32, slope float32, d0 int) {
	for i := range scores {
		d := d0 + i
		if d < 0 {
			d = -d
		}
		scores[i] += slope * -float32(d)
	}
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
	if stage == stFinal && s.outFirst == s.nTok-1 && s.multi == nil {
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
		if s.ops.F32GGML && job.m.Type == gguf.F32 {
			s.kern.MatMulF32GGML(job.m, job.xq, s.nTok, job.y, lo, hi)
			continue
		}
		if s.nTok == 1 {
			s.kern.MatVec(job.m, job.xq, job.y, lo, hi)
		} else {
			s.kern.MatMul(job.m, job.xq, s.nTok, job.y, lo, hi)
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

// tok is token t's row of buffer b in the current layer.
func (s *Session) tok(b arch.Buf, t int) []float32 { return s.row(s.pl, b, t) }

// row is token t's row of buffer b as plan pl lays it out.
func (s *Session) row(pl *plan, b arch.Buf, t int) []float32 {
	w := pl.width[b]
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
		pos := s.posOf(t)
		if s.packed {
			pos = int(s.packPos[t]) // its position in its own text
		}
		if m.encoder {
			s.encoderEmbed(t, pos)
		}
		freq := s.ropeFreq
		if s.multi != nil {
			freq = s.multi.seq[t].ropeFreq // each session's own context
		}
		kernels.RoPECache(kernels.RoPEParams{NDims: c.Rot, FreqBase: c.RopeBase, FreqScale: c.RopeScale, FreqFactors: freq, AttnFactor: c.AttnFactor,
			ExtFactor: c.YarnExt, CorrDims: m.yarnCorr},
			pos, s.rope[t*c.Rot:(t+1)*c.Rot])
		if s.ropeSWA != nil {
			kernels.RoPECache(kernels.RoPEParams{NDims: c.RotSWA, FreqBase: c.RopeSWA, FreqScale: c.RopeScaleSWA, AttnFactor: c.AttnFactorSWA},
				pos, s.ropeSWA[t*c.RotSWA:(t+1)*c.RotSWA])
		}
		if m.pleProj != nil {
			s.quantizeFor(x, t, m.pleProj) // for the per-layer inputs' projection
			return
		}
		s.tokenOps(m.layers[0].plan.phases[0].ops, 0, t)
	case stPerLayer:
		s.perLayerInputs(t, worker)
		s.tokenOps(m.layers[0].plan.phases[0].ops, 0, t)
	case stLayer:
		s.tokenOps(m.layers[s.il].plan.phases[s.phase].ops, s.il, t)
		if s.chain {
			s.tokenOps(m.layers[s.il+1].plan.phases[0].ops, s.il+1, t)
		}
	case stFinal:
		// Token t's logits are output row t - outFirst; earlier tokens
		// are not wanted.
		row := t - s.outFirst
		if s.multi != nil {
			row = int(s.multi.outRow[t])
		}
		if row < 0 {
			return
		}
		xn := s.tok(arch.XN, t)
		s.norm(xn, s.tok(arch.X, t), m.outputNorm)
		s.quantizeFor(xn, row, m.output)
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

// perLayerInputs computes token t's per-layer inputs in place in its row
// of s.pli, which holds the projection of its embeddings: as llama.cpp,
// the projection times 1/sqrt(dim), RMS-normed per layer, plus the
// token's row of per_layer_token_embd times sqrt(PerLayerDim), all times
// 1/sqrt(2).
func (s *Session) perLayerInputs(t, worker int) {
	c, m := s.c, s.m
	n := c.PerLayerDim
	all := n * c.Layers
	pli := s.pli[t*all : (t+1)*all]
	s.kern.Scale(pli, 1/float32(math.Sqrt(float64(c.Dim))))
	row := s.pleRow[worker]
	kernels.DequantizeRow(m.pleEmbd.Type, m.pleEmbd.Row(int(s.batch[t])), row)
	s.kern.Scale(row, float32(math.Sqrt(float64(n))))
	for j := 0; j < all; j += n {
		s.ops.RMSNorm(pli[j:j+n], pli[j:j+n], m.pleNorm, c.Eps)
	}
	kernels.Add(pli, pli, row)
	s.kern.Scale(pli, 1/float32(math.Sqrt(2)))
}

// tokenOps runs the per-token operations ops of layer il for token t.
func (s *Session) tokenOps(ops []tokOp, il, t int) {
	L := &s.m.layers[il]
	c, pl := L.c, L.plan
	for i := range ops {
		op := &ops[i]
		if !op.only.Has(c, il) || (op.cond != arch.NoRole && L.vecs[op.cond] == nil && L.mats[op.cond].Data == nil) {
			continue
		}
		switch op.kind {
		case tkNorm:
			if w := L.vecs[op.w]; w != nil {
				s.norm(s.row(pl, op.out, t), s.row(pl, op.in, t), w)
			}
		case tkHeadNorm:
			// A weightless norm (w NoRole) is RMS alone; an absent
			// optional weight skips the step.
			w := L.vecs[op.w]
			if w == nil && op.w != arch.NoRole {
				continue
			}
			x := s.row(pl, op.in, t)
			hd := c.HeadDim
			for h := 0; h+hd <= len(x); h += hd {
				s.ops.RMSNorm(x[h:h+hd], x[h:h+hd], w, c.Eps)
			}
		case tkBias:
			for _, p := range op.proj {
				if b := L.vecs[p.Bias]; b != nil {
					y := s.row(pl, p.Out, t)
					kernels.Add(y, y, b)
				}
			}
		case tkRoPE:
			if L.noRope {
				continue
			}
			// The caches' widths are the model's (s.c) RoPE dimensions.
			rc := s.rope[t*s.c.Rot : (t+1)*s.c.Rot]
			if L.sliding && s.ropeSWA != nil {
				rc = s.ropeSWA[t*s.c.RotSWA : (t+1)*s.c.RotSWA]
			}
			s.ops.RoPE(s.row(pl, arch.Q, t), c.HeadDim, c.Heads, rc, c.Neox)
			if !op.qOnly {
				s.ops.RoPE(s.row(pl, arch.K, t), c.HeadDim, c.KVHeads, rc, c.Neox)
			}
		case tkScaleQ:
			if c.QScale != 1 && !s.ops.QScaleInAttention {
				s.kern.Scale(s.row(pl, arch.Q, t), c.QScale)
			}
		case tkTempQ:
			if c.AttnTempScale != 0 {
				if f := attnTemp(c, s.posOf(t)); f != 1 {
					s.kern.Scale(s.row(pl, arch.Q, t), f)
				}
			}
		case tkStoreKV:
			s.storeKV(L, t)
		case tkResidual:
			x, in := s.row(pl, arch.X, t), s.row(pl, op.in, t)
			if c.ResScale != 1 {
				s.kern.Scale(in, c.ResScale)
			}
			kernels.Add(x, x, in)
		case tkGLU:
			g, u := s.row(pl, arch.G, t), s.row(pl, arch.U, t)
			if c.Act == arch.GELU {
				s.ops.GELU(g, g)
				kernels.Mul(g, g, u)
			} else {
				s.kern.FastSwiGLU(g, g, u)
			}
		case tkQuantize:
			s.quantize(s.row(pl, op.in, t), t, L, op.proj)
		case tkLayerNorm:
			if w := L.vecs[op.w]; w != nil { // an absent optional weight skips the step
				layerNorm(s.row(pl, op.out, t), s.row(pl, op.in, t), w, L.vecs[op.b], c.Eps)
			}
		case tkCopy:
			copy(s.row(pl, op.out, t), s.row(pl, op.in, t))
		case tkAct:
			if x := s.row(pl, op.in, t); c.Act == arch.GELU {
				s.ops.GELU(x, x)
			} else {
				kernels.SiLU(x, x)
			}
		case tkShGate:
			var dot [1]float32
			w := L.vecs[op.w]
			s.kern.AttnDotF32RowsSingle(s.row(pl, op.in, t), w, len(w), dot[:], false)
			sharedGate(s.row(pl, op.out, t), s.row(pl, arch.SH, t), dot[0], c.MoE.SharedSigmoid)
		case tkPerLayer:
			n := c.PerLayerDim
			off := (t*c.Layers + il) * n
			x := s.row(pl, op.in, t)
			kernels.Mul(x, x, s.pli[off:off+n])
		case tkScale:
			if w := L.vecs[op.w]; w != nil {
				s.kern.Scale(s.row(pl, op.in, t), w[0])
			}
		case tkSplitGate:
			splitGate(s.row(pl, arch.QG, t), s.row(pl, arch.Q, t), s.row(pl, arch.AG, t), c.HeadDim)
		case tkGate:
			sigmoidGate(s.row(pl, op.in, t), s.row(pl, arch.AG, t))
		case tkConv:
			s.deltaNetToken(L, il, t)
		case tkUngroup:
			s.ungroup(pl, op.in, t)
		}
	}
}

// storeKV writes token t's keys and values into layer L's cache.
func (s *Session) storeKV(L *layer, t int) {
	il := L.kv
	k, v := s.row(L.plan, arch.K, t), s.row(L.plan, arch.V, t)
	kvDim := len(k)
	pos := s.posOf(t)
	kc := s.kvOf(t)
	if kc.q8 {
		s.storeKVQ8(kc, il, pos, k, v)
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
	c := s.lc
	// Causal rows grow with the token, so a contiguous split would give the
	// last thread most of the work: deal (token, head) pairs round-robin.
	if s.cache.q8 && s.m.numerics == NumericsFast {
		for w := i; w < s.nTok*c.KVHeads; w += n {
			s.attendHeadsQ8(w/c.KVHeads, w%c.KVHeads, w%c.KVHeads+1, i, s.scores[i])
		}
		return
	}
	if s.cache.q8 {
		for w := i; w < s.nTok*c.Heads; w += n {
			s.attendHeadQ8(w/c.Heads, w%c.Heads, i)
		}
		return
	}
	if s.multi != nil {
		// Tokens of several sequences: each takes the path its own
		// sequence's batch would (grouped or by head), by KV head.
		G := c.Heads / c.KVHeads
		for w := i; w < s.nTok*c.KVHeads; w += n {
			t, g := w/c.KVHeads, w%c.KVHeads
			if s.groupAttention(t) {
				s.attendGroup(t, g, i)
				continue
			}
			for h := g * G; h < (g+1)*G; h++ {
				s.attend(t, h, i)
			}
		}
		return
	}
	if s.groupAttention(0) {
		for w := i; w < s.nTok*c.KVHeads; w += n {
			s.attendGroup(w/c.KVHeads, w%c.KVHeads, i)
		}
		return
	}
	for w := i; w < s.nTok*c.Heads; w += n {
		s.attend(w/c.Heads, w%c.Heads, i)
	}
}

// posOf is the position of batch token t in its sequence.
func (s *Session) posOf(t int) int {
	if s.multi != nil {
		return s.multi.seq[t].pos + int(s.multi.off[t])
	}
	return s.p0 + t
}

// kvOf is the KV cache of batch token t's sequence.
func (s *Session) kvOf(t int) *kvCache {
	if s.multi != nil {
		return s.multi.seq[t].cache
	}
	return s.cache
}

// seqTokens is how many tokens batch token t's sequence has in the batch.
func (s *Session) seqTokens(t int) int {
	if s.multi != nil {
		return int(s.multi.n[t])
	}
	return s.nTok
}

// groupAttention says whether batch token t's attention goes by KV head
// (attendGroup): where the numerics allow it (an f16 cache summed in the
// tinyBLAS order), for every sequence but one with a single token in the
// batch in ggml's decode order.
func (s *Session) groupAttention(t int) bool {
	return s.ops.GroupAttention && !(s.seqTokens(t) == 1 && s.ops.GGMLDecode)
}

// attendGroup computes the query heads of KV head g for token t: for each
// head exactly what attendHead computes (same products in the same order,
// same softmax), with the heads' products against the shared keys and
// values made together (kernels.AttnDotF16RowsMulti), so each cached f16
// row is converted once for all of them.
func (s *Session) attendGroup(t, g, worker int) {
	c := s.lc
	hd := c.HeadDim
	G := c.Heads / c.KVHeads
	qDim, kvDim := c.Heads*hd, c.KVHeads*hd
	h0 := g * G
	_, pos, first, _, _ := s.headView(t, h0)
	kc := s.kvOf(t)
	base := first &^ 15
	n := pos - base + 1
	// The queries rounded to f16, in place (nothing reads them after
	// attention).
	q := s.q[t*qDim+h0*hd : t*qDim+(h0+G)*hd]
	s.kern.RoundF16(q, q)
	sc := s.scores[worker][:G*n]
	s.kern.AttnDotF16RowsMulti(q, G, hd, hd, kc.k16[s.kvl][first*kvDim+g*hd:], kvDim, pos-first+1, sc[first-base:], n)
	s.groupOutput(t, g, first, pos, sc)
}

// groupOutput finishes attendGroup for the query heads of KV head g of
// token t from their scores sc (one row of pos-base+1 per head, base =
// first rounded down to a multiple of 16, the scores from first-base on):
// the softmax, the weights rounded to f16, and their products with the
// values. sc is overwritten.
func (s *Session) groupOutput(t, g, first, pos int, sc []float32) {
	c := s.lc
	hd := c.HeadDim
	G := c.Heads / c.KVHeads
	qDim := c.Heads * hd
	h0 := g * G
	kc := s.kvOf(t)
	base := first &^ 15
	n := pos - base + 1
	sc = sc[:G*n]
	for j := 0; j < G; j++ {
		row := sc[j*n : (j+1)*n]
		if c.AttnSoftcap != 0 {
			softcap(row[first-base:], c.AttnSoftcap)
		}
		s.kern.Scale(row[first-base:], c.KQScale)
		for i := range row[:first-base] {
			row[i] = float32(math.Inf(-1))
		}
		s.headSoftmax(row, h0+j)
	}
	s.kern.RoundF16(sc, sc) // the softmax weights in f16, as ggml
	s.kern.AttnDotF16RowsMulti(sc, G, n, n, kc.v16[s.kvl][kc.vAt(g*hd)+base:], kc.cap, hd, s.att[t*qDim+h0*hd:t*qDim+(h0+G)*hd], hd)
}

// headSoftmax is the softmax of head h's scores, with the head's sink
// logit when the layer has sinks (as ggml's soft_max with sinks).
func (s *Session) headSoftmax(row []float32, h int) {
	if sinks := s.m.layers[s.il].vecs[arch.Sinks]; sinks != nil {
		s.kern.FastSoftmaxSink(row, sinks[h])
		return
	}
	s.kern.FastSoftmax(row)
}

// headView returns what attention head h of batch token t works on: its KV
// head g, its position (for a non-causal model the sequence's last: the
// last position it may see), the first position it may see (the sliding
// window's start, else 0), its query and its output.
func (s *Session) headView(t, h int) (g, pos, first int, q, out []float32) {
	c := s.lc
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	g = h / (c.Heads / c.KVHeads)
	pos = s.posOf(t)
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
	c := s.lc
	hd := c.HeadDim
	g, pos, first, q, out := s.headView(t, h)
	kc := s.kvOf(t)
	scale := c.KQScale
	if s.ops.QScaleInAttention && s.pl.scalesQ {
		// The ScaleQ step left Q unscaled for the mode's attention.
		scale *= c.QScale
	}
	s.ops.Attend(numerics.Head{
		Q: q, Out: out,
		K: kc.k16[s.kvl][g*hd:], KStride: c.KVHeads * hd,
		V: kc.v16[s.kvl][kc.vAt(g*hd):], VStride: kc.cap,
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
	c := s.lc
	hd := c.HeadDim
	kvDim := c.KVHeads * hd
	g, pos, first, q, out := s.headView(t, h)
	kc := s.kvOf(t)
	single := s.seqTokens(t) == 1 && s.ops.GGMLDecode
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
		K, V := kc.k32[s.kvl], kc.v32[s.kvl]
		s.kern.AttnDotF32RowsSingle(q, K[first*kvDim+g*hd:], kvDim, live, false)
		if c.AttnSoftcap != 0 {
			softcap(live, c.AttnSoftcap)
		}
		s.kern.Scale(live, c.KQScale)
		if s.alibi != nil {
			addAlibi(live, s.alibi[h], first-(s.p0+t))
		}
		for i := range sc[:first-base] {
			sc[i] = float32(math.Inf(-1))
		}
		s.headSoftmax(sc, h)
		if single {
			s.kern.AttnDotF32RowsSingle(sc, V[kc.vAt(g*hd)+base:], kc.cap, out, true)
		} else {
			s.kern.AttnDotF32Rows(sc, V[kc.vAt(g*hd)+base:], kc.cap, out)
		}
		return
	}
	q16 := s.q16[worker][:hd]
	s.kern.FastF16Encode(q16, q)
	K, V := kc.k16[s.kvl], kc.v16[s.kvl]
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
	s.headSoftmax(sc, h)
	w16 := s.w16[worker][:n]
	s.kern.FastF16Encode(w16, sc)
	// Output: value row g*hd+d holds that dimension for every position.
	if single {
		s.kern.AttnDotF16RowsSingle(w16, V[kc.vAt(g*hd)+base:], kc.cap, out, true)
	} else {
		s.kern.AttnDotF16Rows(w16, V[kc.vAt(g*hd)+base:], kc.cap, out)
	}
}
