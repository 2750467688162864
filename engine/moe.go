package engine

import (
	"fmt"
	"math"
	"slices"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// The MoE step: each token's router logits (buffer R, a product of the
// block before it) choose MoE.Used experts; each chosen expert runs its
// SwiGLU network on the token and the outputs are summed, weighted by the
// router's probabilities of the chosen experts, into the step's output.
//
// The batch is computed as llama.cpp's mul_mat_id does: the (token,
// expert) pairs, "slots", are sorted by expert, each expert's tokens'
// activations gathered into consecutive rows, and every expert's matrix
// multiplied by all its tokens at once, so each expert's weights are read
// once per batch. Experts whose gate and up are fused in one tensor
// (GateUpExps) are multiplied by one product of both (the gate's rows,
// then the up's), which leaves each slot's gate and up side by side. All
// experts' products are one pool job, each thread taking its share of
// every expert's rows: a step is five dispatches for a batch (routing,
// gate and up, the activation, down, the weighted sum) and two for one
// token (whose routing, activation and sum run inline), however many
// experts it uses. Nothing is allocated per token.

// moeScratch is a session's MoE buffers, sized for its batch capacity.
type moeScratch struct {
	k, ff int // experts per token, expert hidden size
	// Routing, per token t: sel[t*k+j] is its j-th expert (most probable
	// first), w[t*k+j] that expert's weight, slotOf[t*k+j] the sorted slot
	// of that pair.
	sel     []int32
	w       []float32
	slotOf  []int32
	slotExp []int32     // each sorted slot's expert
	probs   [][]float32 // per worker: the router's probabilities
	// Slots sorted by expert: off[e] is expert e's first slot; jobs are
	// the experts with tokens.
	off  []int32
	fill []int32
	jobs []moeJob
	// xqTok holds each token's input quantized for the gate and the up
	// matrices (one buffer when their formats agree); xqG and xqU the same
	// rows gathered by slot.
	xqTok    [2][]byte
	xqG, xqU []byte
	// g and u are the gate and up outputs, slot x ff each (gateUp); a
	// layer of fused experts writes both into g, slot x 2ff, each slot's
	// gate then its up (u is then unused; g holds 2ff per slot when any
	// layer's are fused, and u none when all are). The gate's values
	// become the activation.
	g, u       []float32
	hq         []byte    // slot rows of the activation quantized for down
	y          []float32 // slot x Dim: each expert's output
	maxG, maxD int       // act bytes of a row, the most of any layer (Dim for gate/up, ff for down)

	// the current step
	L      *layer
	stage  int
	gate   *kernels.Matrix // the gate's (or fused gate and up's) expert 0, whose format the input is quantized for
	up     *kernels.Matrix // the up's expert 0 (gate when fused)
	fused  bool            // L's gate and up are one matrix per expert (GateUpExps)
	rbG    int             // act bytes of a gate/up row
	rbD    int             // act bytes of a down row
	sameGU bool
	fn     pool.Task
	// perToken multiplies each token by its experts one at a time, as
	// llama.cpp's repacked mul_mat_id does (a gemv per token): the
	// reference numerics modes follow its summation order.
	perToken bool
}

// moeJob is one expert's share of the batch: slots off..off+n.
type moeJob struct{ e, off, n int }

const (
	moeRoute = iota
	moeGateUp
	moeAct
	moeDown
	moeSum
)

// checkMoE checks a MoE step against the description and the
// hyperparameters.
func checkMoE(fam *arch.Family, c *config, pl *plan, st arch.Step) error {
	e := &c.MoE
	if e.Experts <= 0 || e.Used <= 0 || e.Used > e.Experts || e.FF <= 0 {
		return descriptionError(fam, "a MoE step with %d of %d experts of %d", e.Used, e.Experts, e.FF)
	}
	if pl.width[st.In] != c.Dim || pl.width[st.Out] != c.Dim {
		return descriptionError(fam, "a MoE step from %d to %d values", pl.width[st.In], pl.width[st.Out])
	}
	if pl.width[arch.R] != e.Experts {
		return descriptionError(fam, "a MoE step with %d router logits for %d experts", pl.width[arch.R], e.Experts)
	}
	// Gate and up may be fused, but only as GateUpExps of the two (which
	// runMoE reads as the gate's rows, then the up's); apart they are
	// required unless that fused tensor may stand in.
	fused := fam.Tensor(arch.GateUpExps)
	if fused != nil && (!fused.PerExpert || !slices.Equal(fused.Fused, []arch.Role{arch.GateExps, arch.UpExps})) {
		return descriptionError(fam, "a per-expert gate and up fused other than as GateUpExps of GateExps and UpExps")
	}
	for i := range fam.Layer {
		if t := &fam.Layer[i]; t.PerExpert && len(t.Fused) > 0 && t.Role != arch.GateUpExps {
			return descriptionError(fam, "a fused per-expert tensor %s other than GateUpExps", t.Name)
		}
	}
	for _, r := range []arch.Role{arch.GateExps, arch.UpExps, arch.DownExps} {
		t := fam.Tensor(r)
		if t == nil || !t.PerExpert || (t.Optional && (fused == nil || r == arch.DownExps)) {
			return descriptionError(fam, "a MoE step without the required per-expert role %d", r)
		}
	}
	return nil
}

// checkExperts checks that a MoE layer's weights (named with prefix) hold
// the experts' gate and up matrices, fused or apart: the parts are
// optional when the fused tensor may stand in, and a file must give one
// or the other.
func checkExperts(fam *arch.Family, prefix string, w *weights) error {
	if w.exps[arch.GateUpExps] != nil {
		return nil
	}
	for _, r := range []arch.Role{arch.GateExps, arch.UpExps} {
		if w.exps[r] == nil {
			return missingMatrix(fam, prefix, r)
		}
	}
	return nil
}

// asExperts returns the 3-D tensor t, of shape [cols, rows, experts], as
// one matrix per expert viewing the mapping.
func asExperts(t *gguf.Tensor, cols, rows, experts int) ([]kernels.Matrix, error) {
	if len(t.Shape) != 3 || t.Shape[0] != int64(cols) || t.Shape[1] != int64(rows) || t.Shape[2] != int64(experts) {
		return nil, fmt.Errorf("%w: %s: shape %v, want [%d %d %d]", ErrBadFile, t.Name, t.Shape, cols, rows, experts)
	}
	if !kernels.Supported(t.Type) {
		return nil, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, t.Name, t.Type)
	}
	if cols%t.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: tensor %s: row of %d is not a whole number of %s blocks", ErrBadFile, t.Name, cols, t.Type)
	}
	one := kernels.Matrix{Type: t.Type, Rows: rows, Cols: cols}
	size := one.RowBytes() * rows
	if len(t.Data)/experts < size {
		return nil, fmt.Errorf("%w: tensor %s has %d bytes, want %d", ErrBadFile, t.Name, len(t.Data), size*experts)
	}
	ms := make([]kernels.Matrix, experts)
	for e := range ms {
		ms[e] = one
		ms[e].Data = t.Data[e*size : (e+1)*size : (e+1)*size]
	}
	return ms, nil
}

// asExpertVectors returns the 2-D tensor t, of shape [n, experts] (one
// vector of n per expert, as the experts' biases), converted to float32:
// expert e's vector at e*n.
func asExpertVectors(t *gguf.Tensor, n, experts int) ([]float32, error) {
	if len(t.Shape) != 2 || t.Shape[0] != int64(n) || t.Shape[1] != int64(experts) {
		return nil, fmt.Errorf("%w: %s: shape %v, want [%d %d]", ErrBadFile, t.Name, t.Shape, n, experts)
	}
	if !kernels.Supported(t.Type) || n%t.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, t.Name, t.Type)
	}
	rb, err := t.Type.RowBytes(int64(n))
	if err != nil || int64(len(t.Data)) < rb*int64(experts) {
		return nil, fmt.Errorf("%w: tensor %s is truncated", ErrBadFile, t.Name)
	}
	out := make([]float32, n*experts)
	for e := 0; e < experts; e++ {
		kernels.DequantizeRow(t.Type, t.Data[int64(e)*rb:int64(e+1)*rb], out[e*n:(e+1)*n])
	}
	return out, nil
}

// newMoEScratch sizes the MoE buffers for nb tokens.
func (s *Session) newMoEScratch(nb int) *moeScratch {
	c := s.c
	k, ff := c.MoE.Used, c.MoE.FF
	ms := &moeScratch{k: k, ff: ff}
	gWidth, uWidth := 0, 0 // values per slot of g and u
	for i := range s.m.layers {
		L := &s.m.layers[i]
		gate, up, fused := L.gateUpExps()
		ms.maxG = max(ms.maxG, kernels.ActBytes(gate, c.Dim), kernels.ActBytes(up, c.Dim))
		ms.maxD = max(ms.maxD, kernels.ActBytes(&L.exps[arch.DownExps][0], ff))
		if fused {
			gWidth = 2 * ff
		} else {
			gWidth, uWidth = max(gWidth, ff), ff
		}
	}
	slots := nb * k
	ms.sel = make([]int32, slots)
	ms.w = make([]float32, slots)
	ms.slotOf = make([]int32, slots)
	ms.slotExp = make([]int32, slots)
	ms.probs = make([][]float32, s.pool.Threads())
	for i := range ms.probs {
		ms.probs[i] = make([]float32, c.MoE.Experts)
	}
	ms.off = make([]int32, c.MoE.Experts+1)
	ms.fill = make([]int32, c.MoE.Experts)
	ms.jobs = make([]moeJob, 0, c.MoE.Experts)
	ms.xqTok = [2][]byte{make([]byte, nb*ms.maxG), make([]byte, nb*ms.maxG)}
	ms.xqG = make([]byte, slots*ms.maxG)
	ms.xqU = make([]byte, slots*ms.maxG)
	ms.g = make([]float32, slots*gWidth)
	ms.u = make([]float32, slots*uWidth)
	ms.hq = make([]byte, slots*ms.maxD)
	ms.y = make([]float32, slots*c.Dim)
	ms.fn = s.runMoEStage
	ms.perToken = s.m.numerics != NumericsFast
	return ms
}

// gateUpExps returns expert 0 of layer L's matrices that multiply the
// MoE input: the fused gate and up twice (fused true), or the gate's and
// the up's.
func (L *layer) gateUpExps() (gate, up *kernels.Matrix, fused bool) {
	if gu := L.exps[arch.GateUpExps]; gu != nil {
		return &gu[0], &gu[0], true
	}
	return &L.exps[arch.GateExps][0], &L.exps[arch.UpExps][0], false
}

// gateUp is slot sl's gate and up outputs of the current step.
func (ms *moeScratch) gateUp(sl int) (g, u []float32) {
	ff := ms.ff
	if ms.fused {
		row := ms.g[2*sl*ff : 2*(sl+1)*ff]
		return row[:ff:ff], row[ff:]
	}
	return ms.g[sl*ff : (sl+1)*ff], ms.u[sl*ff : (sl+1)*ff]
}

// runMoE runs layer L's MoE step on the batch.
func (s *Session) runMoE(L *layer) error {
	ms := s.moe
	c := s.c
	down := &L.exps[arch.DownExps][0]
	ms.L = L
	ms.gate, ms.up, ms.fused = L.gateUpExps()
	ms.rbG, ms.rbD = kernels.ActBytes(ms.gate, c.Dim), kernels.ActBytes(down, ms.ff)
	ms.sameGU = kernels.ActType(ms.gate) == kernels.ActType(ms.up)
	width := ms.ff
	if ms.fused {
		width = 2 * ms.ff
	}
	if ms.rbG > ms.maxG || kernels.ActBytes(ms.up, c.Dim) > ms.maxG || ms.rbD > ms.maxD ||
		len(ms.g) < s.nTok*ms.k*width || (!ms.fused && len(ms.u) < s.nTok*ms.k*ms.ff) {
		return fmt.Errorf("%w: MoE activation rows outgrew their buffers", ErrInternal)
	}
	one := s.nTok == 1
	if err := s.moeStage(moeRoute, one); err != nil {
		return err
	}
	s.moeSort()
	if err := s.moeStage(moeGateUp, false); err != nil {
		return err
	}
	if err := s.moeStage(moeAct, one); err != nil {
		return err
	}
	if err := s.moeStage(moeDown, false); err != nil {
		return err
	}
	return s.moeStage(moeSum, one)
}

// moeStage runs one stage of the step, inline or over the pool.
func (s *Session) moeStage(stage int, inline bool) error {
	s.moe.stage = stage
	if inline {
		s.runMoEStage(0, 1)
		return nil
	}
	return s.pool.Run(s.moe.fn)
}

// runMoEStage is the pool task of the current MoE stage: per-token and
// per-slot stages split the tokens or slots, the products split every
// chosen expert's rows.
func (s *Session) runMoEStage(i, n int) {
	ms := s.moe
	c := s.c
	L := ms.L
	switch ms.stage {
	case moeRoute:
		lo, hi := pool.Split(s.nTok, i, n, 1)
		for t := lo; t < hi; t++ {
			s.moeRouteToken(t, i)
		}
	case moeGateUp:
		if ms.fused {
			// One product per expert of its gate's and up's rows.
			lo, hi := pool.Split(2*ms.ff, i, n, 16)
			gu := L.exps[arch.GateUpExps]
			for _, j := range ms.jobs {
				s.expertMul(&gu[j.e], ms.xqG[j.off*ms.rbG:], j.n, ms.g[2*j.off*ms.ff:], lo, hi)
			}
			return
		}
		lo, hi := pool.Split(ms.ff, i, n, 16)
		gate, up := L.exps[arch.GateExps], L.exps[arch.UpExps]
		xqU := ms.xqU
		if ms.sameGU {
			xqU = ms.xqG
		}
		for _, j := range ms.jobs {
			s.expertMul(&gate[j.e], ms.xqG[j.off*ms.rbG:], j.n, ms.g[j.off*ms.ff:], lo, hi)
			s.expertMul(&up[j.e], xqU[j.off*ms.rbG:], j.n, ms.u[j.off*ms.ff:], lo, hi)
		}
	case moeAct:
		at := kernels.ActType(&L.exps[arch.DownExps][0])
		lo, hi := pool.Split(s.nTok*ms.k, i, n, 1)
		bg, bu := L.vecs[arch.BGateExps], L.vecs[arch.BUpExps]
		for sl := lo; sl < hi; sl++ {
			g, u := ms.gateUp(sl)
			e := int(ms.slotExp[sl])
			if bg != nil {
				kernels.Add(g, g, bg[e*ms.ff:(e+1)*ms.ff])
			}
			if bu != nil {
				kernels.Add(u, u, bu[e*ms.ff:(e+1)*ms.ff])
			}
			if c.MoE.Act == arch.SwiGLUOAI {
				swigluOAI(g, u)
			} else {
				s.kern.FastSwiGLU(g, g, u)
			}
			s.kern.QuantizeAct(at, g, ms.hq[sl*ms.rbD:(sl+1)*ms.rbD])
		}
	case moeDown:
		lo, hi := pool.Split(c.Dim, i, n, 16)
		down := L.exps[arch.DownExps]
		for _, j := range ms.jobs {
			s.expertMul(&down[j.e], ms.hq[j.off*ms.rbD:], j.n, ms.y[j.off*c.Dim:], lo, hi)
		}
	case moeSum:
		lo, hi := pool.Split(s.nTok, i, n, 1)
		for t := lo; t < hi; t++ {
			s.moeSumToken(t)
		}
	}
}

// expertMul computes rows lo..hi of expert matrix m for its n gathered
// tokens.
func (s *Session) expertMul(m *kernels.Matrix, xq []byte, n int, y []float32, lo, hi int) {
	if lo >= hi {
		return
	}
	if n == 1 || s.moe.perToken {
		rb := kernels.ActBytes(m, m.Cols)
		for t := 0; t < n; t++ {
			s.kern.MatVec(m, xq[t*rb:], y[t*m.Rows:], lo, hi)
		}
		return
	}
	s.kern.MatMul(m, xq, n, y, lo, hi)
}

// moeRouteToken chooses token t's experts and their weights and quantizes
// its input for the gate and up matrices. As llama.cpp: the softmax of the
// logits, the Used most probable experts (most probable first), their
// probabilities renormalized to sum to 1 when NormW; or, with
// WeightSoftmax, the Used largest logits, weighted by their own softmax.
func (s *Session) moeRouteToken(t, worker int) {
	ms := s.moe
	c := s.c
	p := ms.probs[worker]
	copy(p, s.tok(arch.R, t))
	if !c.MoE.WeightSoftmax {
		// A router row has no padding: ggml's scalar tail for the last
		// values (SoftmaxRow), unlike an attention row.
		s.kern.SoftmaxRow(p)
	}
	chooseExperts(p, ms.sel[t*ms.k:(t+1)*ms.k], ms.w[t*ms.k:(t+1)*ms.k], &c.MoE, s.kern.SoftmaxRow)
	xn := s.tok(arch.XN, t)
	s.kern.QuantizeAct(kernels.ActType(ms.gate), xn, ms.xqTok[0][t*ms.rbG:(t+1)*ms.rbG])
	if !ms.sameGU {
		s.kern.QuantizeAct(kernels.ActType(ms.up), xn, ms.xqTok[1][t*ms.rbG:(t+1)*ms.rbG])
	}
}

// chooseExperts writes the len(sel) largest scores of probs (the router's
// softmax, or its logits with e.WeightSoftmax) into sel, largest first
// (the lower index first among equals; a NaN only when nothing else is
// left), and their weights into w: with e.WeightSoftmax the softmax (by
// softmax) of the chosen logits; renormalized to sum to 1 when e.NormW
// (the sum clamped below at 2^-14, as llama.cpp does); then times
// e.WScale.
func chooseExperts(probs []float32, sel []int32, w []float32, e *arch.MoEParams, softmax func([]float32)) {
	for j := range sel {
		best := -1
	next:
		for i, x := range probs {
			for _, taken := range sel[:j] {
				if int(taken) == i {
					continue next
				}
			}
			if best < 0 || x > probs[best] || (probs[best] != probs[best] && x == x) {
				best = i
			}
		}
		sel[j], w[j] = int32(best), probs[best]
	}
	if e.WeightSoftmax {
		softmax(w)
	}
	if e.NormW {
		var sum float64
		for _, x := range w {
			sum += float64(x)
		}
		d := max(float32(sum), 6.103515625e-5) // the smallest normal f16
		for j := range w {
			w[j] /= d
		}
	}
	if e.WScale != 1 {
		for j := range w {
			w[j] *= e.WScale
		}
	}
}

// swigluOAI sets g = gpt-oss's clamped SwiGLU of gate g and up u, as
// ggml's swiglu_oai computes it (alpha 1.702, limit 7): x = min(g, 7),
// y = clamp(u, -7, 7), x / (1 + expf(alpha * -x)) * (y + 1), in float32
// with libm's expf.
func swigluOAI(g, u []float32) {
	const alpha, limit = float32(1.702), float32(7)
	for i, x := range g {
		x = min(x, limit)
		y := min(max(u[i], -limit), limit)
		glu := x / (1 + expf(alpha*(-x)))
		g[i] = glu * (y + 1)
	}
}

// moeSort orders the batch's (token, expert) slots by expert, gathers each
// slot's quantized input and lists the experts with tokens.
func (s *Session) moeSort() {
	ms := s.moe
	nSlots := s.nTok * ms.k
	clear(ms.off)
	for _, e := range ms.sel[:nSlots] {
		ms.off[e+1]++
	}
	for e := 1; e < len(ms.off); e++ {
		ms.off[e] += ms.off[e-1]
	}
	copy(ms.fill, ms.off)
	rb := ms.rbG
	for i, e := range ms.sel[:nSlots] {
		sl := int(ms.fill[e])
		ms.fill[e]++
		ms.slotOf[i] = int32(sl)
		ms.slotExp[sl] = e
		t := i / ms.k
		copy(ms.xqG[sl*rb:(sl+1)*rb], ms.xqTok[0][t*rb:(t+1)*rb])
		if !ms.sameGU {
			copy(ms.xqU[sl*rb:(sl+1)*rb], ms.xqTok[1][t*rb:(t+1)*rb])
		}
	}
	ms.jobs = ms.jobs[:0]
	for e := range ms.fill {
		if n := int(ms.off[e+1] - ms.off[e]); n > 0 {
			ms.jobs = append(ms.jobs, moeJob{e: e, off: int(ms.off[e]), n: n})
		}
	}
}

// moeSumToken writes token t's step output: its experts' outputs times
// their weights, added in the order the experts were chosen (as llama.cpp
// adds them; each product is rounded to float32 before the sum).
func (s *Session) moeSumToken(t int) {
	ms := s.moe
	dim := s.c.Dim
	out := s.tok(arch.O, t)
	bd := ms.L.vecs[arch.BDownExps]
	for j := 0; j < ms.k; j++ {
		i := t*ms.k + j
		sl := int(ms.slotOf[i])
		y, w := ms.y[sl*dim:(sl+1)*dim], ms.w[i]
		if bd != nil {
			// The expert's down bias, added before the weighting (in
			// place: each slot is summed once).
			e := int(ms.sel[i])
			kernels.Add(y, y, bd[e*dim:(e+1)*dim])
		}
		if j == 0 {
			for d := range out {
				out[d] = y[d] * w
			}
			continue
		}
		for d := range out {
			out[d] += float32(y[d] * w)
		}
	}
}

// sharedGate adds the shared expert's output sh to out, scaled by
// sigmoid(dot), dot being the gate's product w . x (which llama.cpp sums
// as ggml_vec_dot_f32, a one-row F32 product). With sigmoid the gate is
// 1/(1 + expf(-s)), as llama.cpp's qwen35moe and qwen3next compute it;
// otherwise as its qwen2moe does, silu(s)/s, with s = 0 (where that is
// 0/0) taking sigmoid(0) = 1/2.
func sharedGate(out, sh []float32, dot float32, sigmoid bool) {
	g := float32(0.5)
	switch {
	case sigmoid:
		g = 1 / (1 + float32(math.Exp(float64(-dot))))
	case dot != 0:
		silu := dot / (1 + float32(math.Exp(float64(-dot))))
		g = silu / dot
	}
	for d := range out {
		out[d] += float32(sh[d] * g)
	}
}
