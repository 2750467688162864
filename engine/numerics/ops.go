package numerics

import "github.com/moonlm/moonlm/kernels"

// Ops are the building blocks whose arithmetic a mode changes, chosen once
// when a session is made.
type Ops struct {
	RMSNorm func(dst, x, w []float32, eps float32)
	RoPE    func(x []float32, headDim, nHeads int, cache []float32, neox bool)
	GELU    func(dst, x []float32)
	// Attend, when set, computes one head of one token's attention over
	// an f16 cache in the mode's order; nil leaves attention to the
	// engine's own (ggml's order, which the fast and llama.cpp modes
	// share).
	Attend func(h Head)
	// AttendScratch is the fewest scores Head.Scores must hold.
	AttendScratch int
	// QScaleInAttention: the query scale is applied by Attend to the
	// scores rather than to Q (ik's flash attention takes it as its
	// scale).
	QScaleInAttention bool
	// GroupAttention allows the engine to compute all query heads of a KV
	// head at once, which it does in the tinyBLAS order of its own
	// attention.
	GroupAttention bool
	// GGMLDecode sums a one-token batch's attention products in
	// ggml_vec_dot_f16's order.
	GGMLDecode bool
	// F32GGML computes the products of F32 matrices (a MoE router, an
	// F32 output head) in llama.cpp's order (kernels.MatMulF32GGML)
	// instead of the fast kernels'.
	F32GGML bool
	// Batch is the most tokens one forward pass takes (0: the engine's
	// own limit). The reference engines pick kernels, and so summation
	// orders, by the size of the whole micro-batch (llama.cpp's q4_K and
	// q6_K products from 8 tokens on, the one-token attention order), so
	// the reference modes chunk as they do by default.
	Batch int
}

// RefUbatch is llama.cpp's and ik_llama.cpp's default micro-batch
// (n_ubatch): a prompt is computed 512 tokens at a time.
const RefUbatch = 512

// SessionShape is what of a session its operations depend on.
type SessionShape struct {
	HeadDim int
	KVF32   bool // an f32 KV cache, else f16
	// GGMLDecode asks the fast mode for ggml_vec_dot_f16's one-token
	// attention order (the reference modes always take it).
	GGMLDecode bool
}

// Ops returns the operations of mode m on kernel set set for a session of
// shape sh.
func (m Mode) Ops(set *kernels.Set, sh SessionShape) Ops {
	o := Ops{
		RMSNorm:        kernels.RMSNorm,
		RoPE:           set.RoPEApply,
		GELU:           kernels.GELU,
		GroupAttention: !sh.KVF32 && sh.HeadDim%16 == 0,
		GGMLDecode:     m.Reference() || sh.GGMLDecode,
	}
	if m.Reference() {
		o.Batch = RefUbatch
		o.F32GGML = m != Ik
	}
	if m == Ik {
		o.RMSNorm = rmsNormIk
		o.RoPE = set.RoPEApplyIk
		o.GELU = kernels.GELUIk
		o.GroupAttention = false
		if !sh.KVF32 {
			o.Attend = AttendIk
			o.AttendScratch = ikKStep
			o.QScaleInAttention = true
		}
	}
	return o
}

// rmsNormIk is ik_llama.cpp's RMS norm, (scale*weight)*x, or the plain one
// without a weight.
func rmsNormIk(dst, x, w []float32, eps float32) {
	if w == nil {
		kernels.RMSNorm(dst, x, w, eps)
		return
	}
	kernels.RMSNormIk(dst, x, w, eps)
}
