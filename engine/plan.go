package engine

import (
	"fmt"
	"slices"

	"github.com/moonlm/moonlm/engine/arch"
)

// A plan is a family's block compiled for the forward pass: its steps
// grouped into phases, each either per-token work (split over the pool by
// tokens, or inline for one token), a set of matrix products (split by
// rows) or attention (split by token and head). A product's input is
// quantized at the end of the token phase before it and its biases are
// added at the start of the one after, so every phase boundary is one pool
// dispatch, as a hand-written block would have it.
type plan struct {
	// phases[0] and phases[len-1] are token phases: the forward pass runs
	// the last of one layer and the first of the next in one dispatch.
	phases []phase
	// width is the per-token length of each buffer (0: unused).
	width [arch.NumBufs]int
	// maxIn is the widest input of a product (the activation buffers'
	// size per token).
	maxIn int
	// scalesQ: the block has a ScaleQ step (which a numerics mode may move
	// into attention).
	scalesQ bool
	// moe: the block has a MoE step (the session needs its scratch).
	moe bool
	// sharedKV: compiled for a layer that attends over an earlier layer's
	// KV cache, without the steps of its own keys and values.
	sharedKV bool
	// deltaNet: the block has a DeltaNet step (the session keeps a
	// recurrent state for the layers that run it).
	deltaNet bool
}

type phaseKind uint8

const (
	phTokens phaseKind = iota
	phMatMul
	phAttend
	phMoE      // the experts of a MoE step (runMoE)
	phDeltaNet // a DeltaNet step's recurrence, split by value head (deltanet.go)
)

// phase is one dispatch of the block.
type phase struct {
	kind phaseKind
	ops  []tokOp     // phTokens
	proj []arch.Proj // phMatMul
	// only is the kind of layer that runs the phase (a token phase: the
	// kind all its operations share, else every layer).
	only arch.LayerKind
}

// tokKind is a per-token operation: the steps' building blocks plus the
// quantization, bias and cache store the compiler inserts.
type tokKind uint8

const (
	tkNorm tokKind = iota
	tkHeadNorm
	tkBias
	tkRoPE
	tkScaleQ
	tkStoreKV
	tkResidual
	tkGLU
	tkTempQ
	tkQuantize
	tkLayerNorm
	tkAct
	tkPerLayer  // in *= the layer's per-layer input
	tkScale     // in *= w[0]
	tkShGate    // MoE shared expert: out += sigmoid(w . in) * SH
	tkSplitGate // QG -> Q and AG
	tkGate      // in *= sigmoid(AG)
	tkConv      // a DeltaNet step's per-token part: convolution, norms, gates
	tkUngroup   // a projection grouped by key head into DeltaNet's layout
	tkCopy      // out = in
)

// tokOp is one per-token operation of a token phase.
type tokOp struct {
	kind    tokKind
	in, out arch.Buf
	w       arch.Role
	b       arch.Role   // tkLayerNorm's bias
	proj    []arch.Proj // tkBias, tkQuantize
	qOnly   bool        // tkRoPE: rotate the queries only (the keys are another layer's)
	only    arch.LayerKind
	cond    arch.Role // the optional tensor a layer needs to run the operation (Step.If), NoRole: none
}

// maxProj is the most products one Project step may hold.
const maxProj = 4

// compilePlan groups fam's block into phases and sizes its buffers from the
// shapes of the tensors it multiplies, for a layer of c's shape; sharedKV
// compiles it for a layer attending over another's KV cache (without the
// products, norms, rotation and store of its own keys and values). A
// description it cannot run is an ErrInternal error (the families' tests
// compile each one).
func compilePlan(fam *arch.Family, c *config, sharedKV bool) (*plan, error) {
	block := fam.Block
	if sharedKV {
		block = withoutOwnKV(block)
	}
	pl := &plan{sharedKV: sharedKV}
	pl.width[arch.X] = c.Dim
	pl.width[arch.XN] = c.Dim
	pl.width[arch.Att] = c.QDim()
	decl := func(r arch.Role) *arch.Tensor {
		for i := range fam.Layer {
			if fam.Layer[i].Role == r {
				return &fam.Layer[i]
			}
		}
		return nil
	}
	// A fused tensor comes before its parts, which add up to it.
	for i := range fam.Layer {
		f := &fam.Layer[i]
		if len(f.Fused) == 0 {
			continue
		}
		sum := 0
		for _, r := range f.Fused {
			j := slices.IndexFunc(fam.Layer, func(t arch.Tensor) bool { return t.Role == r })
			if j <= i || fam.Layer[j].Matrix() != f.Matrix() || (f.Matrix() && fam.Layer[j].Cols != f.Cols) {
				return nil, descriptionError(fam, "part %d of %s is not declared after it with its columns", r, f.Name)
			}
			if f.Matrix() {
				sum += c.Of(fam.Layer[j].Rows, -1)
			} else {
				sum += c.Of(fam.Layer[j].Cols, -1)
			}
		}
		whole := f.Cols
		if f.Matrix() {
			whole = f.Rows
		}
		if sum != c.Of(whole, -1) {
			return nil, descriptionError(fam, "the parts of %s add up to %d, not %d", f.Name, sum, c.Of(whole, -1))
		}
	}
	// Products first: their outputs give the other buffers' widths.
	for _, st := range block {
		if st.Op != arch.OpProject {
			continue
		}
		if len(st.Proj) == 0 || len(st.Proj) > maxProj {
			return nil, descriptionError(fam, "a Project step with %d products", len(st.Proj))
		}
		for _, p := range st.Proj {
			t := decl(p.W)
			if t == nil || !t.Matrix() {
				return nil, descriptionError(fam, "product by role %d, which is not a block matrix", p.W)
			}
			if p.Bias != arch.NoRole {
				if b := decl(p.Bias); b == nil || b.Matrix() || b.Cols != t.Rows {
					return nil, descriptionError(fam, "bias %d of %s does not match its rows", p.Bias, t.Name)
				}
			}
			rows := c.Of(t.Rows, -1)
			if w := pl.width[p.Out]; w != 0 && w != rows {
				return nil, descriptionError(fam, "%s writes %d values into a buffer of %d", t.Name, rows, w)
			}
			pl.width[p.Out] = rows
		}
	}
	for _, st := range block {
		switch st.Op {
		case arch.OpSplitGate:
			if pl.width[arch.QG] != 2*c.QDim() {
				return nil, descriptionError(fam, "queries and gates of %d values for %d query values", pl.width[arch.QG], c.QDim())
			}
			pl.width[arch.Q], pl.width[arch.AG] = c.QDim(), c.QDim()
		case arch.OpUngroup:
			if err := ungroupWidths(fam, c, pl, st.In); err != nil {
				return nil, err
			}
		case arch.OpDeltaNet:
			if err := checkDeltaNet(fam, c, pl); err != nil {
				return nil, err
			}
			pl.width[arch.CV], pl.width[arch.DN] = c.SSM.ConvDim(), c.SSM.Inner
			pl.deltaNet = true
		case arch.OpCopy:
			if w := pl.width[st.Out]; w != 0 && w != pl.width[st.In] {
				return nil, descriptionError(fam, "a copy of %d values into a buffer of %d", pl.width[st.In], w)
			}
			pl.width[st.Out] = pl.width[st.In]
		}
		if st.If != arch.NoRole {
			if t := decl(st.If); t == nil || !t.Optional {
				return nil, descriptionError(fam, "a step run if the layer has tensor role %d, which is not an optional block tensor", st.If)
			}
			switch st.Op {
			case arch.OpProject, arch.OpAttend, arch.OpMoE, arch.OpDeltaNet:
				return nil, descriptionError(fam, "a conditional step %d (only per-token steps may be)", st.Op)
			}
		}
	}
	if pl.width[arch.Q] != c.QDim() || (!sharedKV && (pl.width[arch.K] != c.KVDim() || pl.width[arch.V] != c.KVDim())) {
		return nil, descriptionError(fam, "Q, K, V are not written with %d, %d, %d values", c.QDim(), c.KVDim(), c.KVDim())
	}
	cur := phase{kind: phTokens}
	flush := func() {
		cur.only = tokensOnly(cur.ops)
		pl.phases = append(pl.phases, cur)
		cur = phase{kind: phTokens}
	}
	for _, st := range block {
		ownOut := st.Op != arch.OpProject && !(sharedKV && st.Op == arch.OpRoPE) // a sharing layer rotates no keys
		if pl.width[st.In] == 0 || (ownOut && pl.width[st.Out] == 0) {
			return nil, descriptionError(fam, "step %d reads or writes a buffer nothing writes", st.Op)
		}
		nOps, nPhases := len(cur.ops), len(pl.phases)
		switch st.Op {
		case arch.OpProject:
			for _, p := range st.Proj {
				if cols := c.Of(decl(p.W).Cols, -1); cols != pl.width[st.In] {
					return nil, descriptionError(fam, "%s has %d columns for an input of %d", decl(p.W).Name, cols, pl.width[st.In])
				}
			}
			pl.maxIn = max(pl.maxIn, pl.width[st.In])
			cur.ops = append(cur.ops, tokOp{kind: tkQuantize, in: st.In, proj: st.Proj, only: st.Only})
			flush()
			pl.phases = append(pl.phases, phase{kind: phMatMul, proj: st.Proj, only: st.Only})
			for _, p := range st.Proj {
				if p.Bias != arch.NoRole {
					cur.ops = append(cur.ops, tokOp{kind: tkBias, proj: st.Proj, only: st.Only})
					break
				}
			}
			continue // its operations and phases carry st.Only already
		case arch.OpAttend:
			if !sharedKV {
				cur.ops = append(cur.ops, tokOp{kind: tkStoreKV})
			}
			flush()
			pl.phases = append(pl.phases, phase{kind: phAttend})
		case arch.OpSplitGate:
			cur.ops = append(cur.ops, tokOp{kind: tkSplitGate})
		case arch.OpGate:
			if pl.width[st.In] != c.QDim() {
				return nil, descriptionError(fam, "an output gate over %d values", pl.width[st.In])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkGate, in: st.In})
		case arch.OpUngroup:
			cur.ops = append(cur.ops, tokOp{kind: tkUngroup, in: st.In})
			if st.In == arch.MXZ {
				// The convolution reads earlier tokens' MX, which
				// another worker may be writing: all of it first.
				flush()
			}
		case arch.OpDeltaNet:
			cur.ops = append(cur.ops, tokOp{kind: tkConv})
			flush()
			pl.phases = append(pl.phases, phase{kind: phDeltaNet})
		case arch.OpNorm:
			if pl.width[st.In] != pl.width[st.Out] {
				return nil, descriptionError(fam, "a norm from %d to %d values", pl.width[st.In], pl.width[st.Out])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkNorm, in: st.In, out: st.Out, w: st.W})
		case arch.OpHeadNorm:
			if pl.width[st.In]%c.HeadDim != 0 {
				return nil, descriptionError(fam, "a per-head norm of %d values in heads of %d", pl.width[st.In], c.HeadDim)
			}
			cur.ops = append(cur.ops, tokOp{kind: tkHeadNorm, in: st.In, w: st.W})
		case arch.OpRoPE:
			cur.ops = append(cur.ops, tokOp{kind: tkRoPE, qOnly: sharedKV})
		case arch.OpPerLayer:
			if c.PerLayerDim == 0 || pl.width[st.In] != c.PerLayerDim {
				return nil, descriptionError(fam, "a per-layer input of %d values for a buffer of %d", c.PerLayerDim, pl.width[st.In])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkPerLayer, in: st.In})
		case arch.OpScale:
			if t := decl(st.W); t == nil || t.Matrix() || t.Cols != arch.One {
				return nil, descriptionError(fam, "a scale whose weight is not a single value")
			}
			cur.ops = append(cur.ops, tokOp{kind: tkScale, in: st.In, w: st.W})
		case arch.OpScaleQ:
			cur.ops = append(cur.ops, tokOp{kind: tkScaleQ})
			pl.scalesQ = true
		case arch.OpResidual:
			if pl.width[st.In] != c.Dim {
				return nil, descriptionError(fam, "a residual of %d values", pl.width[st.In])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkResidual, in: st.In})
		case arch.OpTempQ:
			cur.ops = append(cur.ops, tokOp{kind: tkTempQ})
		case arch.OpMoE:
			if err := checkMoE(fam, c, pl, st); err != nil {
				return nil, err
			}
			flush()
			pl.phases = append(pl.phases, phase{kind: phMoE})
			pl.moe = true
		case arch.OpShGate:
			if pl.width[st.In] != c.Dim || pl.width[st.Out] != c.Dim || pl.width[arch.SH] != c.Dim {
				return nil, descriptionError(fam, "a shared-expert gate over %d, %d and %d values", pl.width[st.In], pl.width[st.Out], pl.width[arch.SH])
			}
			if t := decl(st.W); t == nil || t.Matrix() || t.Cols != arch.Dim {
				return nil, descriptionError(fam, "a shared-expert gate whose weight is not a vector of Dim")
			}
			cur.ops = append(cur.ops, tokOp{kind: tkShGate, in: st.In, out: st.Out, w: st.W})
		case arch.OpGLU:
			if pl.width[arch.G] != pl.width[arch.U] {
				return nil, descriptionError(fam, "a GLU of %d gate and %d up values", pl.width[arch.G], pl.width[arch.U])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkGLU})
		case arch.OpLayerNorm:
			if pl.width[st.In] != pl.width[st.Out] {
				return nil, descriptionError(fam, "a layer norm from %d to %d values", pl.width[st.In], pl.width[st.Out])
			}
			cur.ops = append(cur.ops, tokOp{kind: tkLayerNorm, in: st.In, out: st.Out, w: st.W, b: st.B})
		case arch.OpAct:
			cur.ops = append(cur.ops, tokOp{kind: tkAct, in: st.In})
		case arch.OpCopy:
			cur.ops = append(cur.ops, tokOp{kind: tkCopy, in: st.In, out: st.Out})
		default:
			return nil, descriptionError(fam, "unknown step %d", st.Op)
		}
		// The step's operations and phases run on its kind of layer
		// (and, a conditional step's, where the layer has its tensor).
		for i := nOps; i < len(cur.ops); i++ {
			cur.ops[i].only, cur.ops[i].cond = st.Only, st.If
		}
		for i := nPhases; i < len(pl.phases); i++ {
			if pl.phases[i].kind != phTokens {
				pl.phases[i].only = st.Only
			}
		}
		if nPhases < len(pl.phases) {
			// The step flushed the token phase its first operations
			// joined (after those of earlier steps).
			flushed := &pl.phases[nPhases]
			for i := nOps; i < len(flushed.ops); i++ {
				flushed.ops[i].only, flushed.ops[i].cond = st.Only, st.If
			}
			flushed.only = tokensOnly(flushed.ops)
		}
	}
	flush()
	if pl.phases[0].kind != phTokens || len(pl.phases) < 3 {
		return nil, descriptionError(fam, "a block of %d phases", len(pl.phases))
	}
	attends := 0
	for _, ph := range pl.phases {
		if ph.kind == phAttend {
			attends++
		}
	}
	if attends != 1 {
		return nil, descriptionError(fam, "%d attention steps (the KV cache holds one per layer)", attends)
	}
	return pl, nil
}

// withoutOwnKV is block without what computes a layer's own keys and
// values: their products (a Project step left with none is dropped) and
// their norms. The RoPE and attention steps stay (compilePlan makes them
// rotate only the queries and store nothing).
func withoutOwnKV(block []arch.Step) []arch.Step {
	var out []arch.Step
	for _, st := range block {
		switch st.Op {
		case arch.OpProject:
			var ps []arch.Proj
			for _, p := range st.Proj {
				if p.Out != arch.K && p.Out != arch.V {
					ps = append(ps, p)
				}
			}
			if len(ps) == 0 {
				continue
			}
			st.Proj = ps
		case arch.OpHeadNorm:
			if st.In == arch.K || st.In == arch.V {
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

// tokensOnly is the kind of layer a token phase of ops runs on: the kind
// all of them share, else every layer.
func tokensOnly(ops []tokOp) arch.LayerKind {
	if len(ops) == 0 {
		return arch.AllLayers
	}
	k := ops[0].only
	for _, op := range ops[1:] {
		if op.only != k {
			return arch.AllLayers
		}
	}
	return k
}

// checkDeltaNet checks what a DeltaNet step reads: the mixed Q, K, V of
// the convolution's channels, the output gate of every value head and one
// write strength and decay input per value head, and the tensors its
// recurrence takes.
func checkDeltaNet(fam *arch.Family, c *config, pl *plan) error {
	s := &c.SSM
	if s.VHeads == 0 {
		return descriptionError(fam, "a DeltaNet step without DeltaNet hyperparameters")
	}
	if pl.width[arch.MX] != s.ConvDim() || pl.width[arch.Z] != s.Inner || pl.width[arch.BT] != s.VHeads || pl.width[arch.AL] != s.VHeads {
		return descriptionError(fam, "a DeltaNet step over %d, %d, %d and %d values", pl.width[arch.MX], pl.width[arch.Z], pl.width[arch.BT], pl.width[arch.AL])
	}
	for _, r := range []arch.Role{arch.SSMConv, arch.SSMDt, arch.SSMA, arch.SSMNorm} {
		if fam.Tensor(r) == nil {
			return descriptionError(fam, "a DeltaNet step without tensor role %d", r)
		}
	}
	return nil
}

// ungroupWidths checks an Ungroup step's input, MXZ (Q, K, V and Z of
// every key head) or BA (the write strengths and decay inputs of every
// value head), and sizes the buffers it writes.
func ungroupWidths(fam *arch.Family, c *config, pl *plan, in arch.Buf) error {
	s := &c.SSM
	if s.VHeads == 0 || s.KHeads == 0 || s.VHeads%s.KHeads != 0 {
		return descriptionError(fam, "an Ungroup step without DeltaNet hyperparameters")
	}
	switch in {
	case arch.MXZ:
		if pl.width[in] != s.ConvDim()+s.Inner {
			return descriptionError(fam, "an Ungroup step over %d values, not %d", pl.width[in], s.ConvDim()+s.Inner)
		}
		pl.width[arch.MX], pl.width[arch.Z] = s.ConvDim(), s.Inner
	case arch.BA:
		if pl.width[in] != 2*s.VHeads {
			return descriptionError(fam, "an Ungroup step over %d values, not %d", pl.width[in], 2*s.VHeads)
		}
		pl.width[arch.BT], pl.width[arch.AL] = s.VHeads, s.VHeads
	default:
		return descriptionError(fam, "an Ungroup step over buffer %d", in)
	}
	return nil
}

// blockMatrices lists the block matrices of fam that products read, in
// declaration order (the packing order): a fused matrix is read through
// its parts, which are listed instead, but for the experts' fused gate
// and up (PerExpert), which is read whole and listed with its parts (a
// layer has one or the others).
func blockMatrices(fam *arch.Family) []*arch.Tensor {
	var ts []*arch.Tensor
	for i := range fam.Layer {
		if t := &fam.Layer[i]; t.Matrix() && (len(t.Fused) == 0 || t.PerExpert) {
			ts = append(ts, &fam.Layer[i])
		}
	}
	return ts
}

// matrixName is block matrix t's name for messages: its own, or, for a
// part that exists only inside a fused tensor, that tensor's with the
// part's index.
func matrixName(fam *arch.Family, t *arch.Tensor) string {
	if t.Name != "" {
		return t.Name
	}
	for _, f := range fam.Layer {
		if i := slices.Index(f.Fused, t.Role); i >= 0 {
			return fmt.Sprintf("%s[%d]", f.Name, i)
		}
	}
	return fmt.Sprintf("role %d", t.Role)
}
