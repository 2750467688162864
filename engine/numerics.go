package engine

import (
	"fmt"

	"github.com/moonlm/moonlm/kernels"
)

// Numerics selects how closely the engine's float arithmetic follows
// llama.cpp's. Both modes compute the same model; they differ in the order
// of float32 additions, which on random-weight models moves
// log-probabilities by a few hundredths (see docs/DESIGN.md, "Numerics
// modes").
type Numerics int

const (
	// NumericsFast uses the fastest kernels of the CPU; it is the zero
	// value (the C library and the command-line tool fill it from
	// MOONLM_NUMERICS).
	NumericsFast Numerics = iota
	// NumericsLlamaCpp reproduces the arithmetic of llama.cpp's x86 CPU
	// backend with its defaults (q4_K matrices repacked to q4_K_8x8):
	// q8_0, q4_1, q5_0, q4_K and q6_K products in ggml's summation order
	// (pure-Go kernels, several times slower than the fast ones) and
	// one-token attention in ggml_vec_dot_f16's order. Weights of other
	// types keep the fast kernels and are not bit-exact.
	NumericsLlamaCpp
	// NumericsLlamaCppNoRepack is NumericsLlamaCpp for llama.cpp run
	// without repacked layouts (use_extra_bufts off): every q4_K matrix in
	// ggml_vec_dot_q4_K_q8_K's order.
	NumericsLlamaCppNoRepack
	// NumericsIk reproduces the arithmetic of ik_llama.cpp (the llama.cpp
	// fork with the iqk kernels) on x86 with AVX-512, run with its defaults
	// (flash attention, fused up/gate and RMS-norm ops): activations
	// quantized to its q8_2 format (bf16 block scales) for q8_0, q4_K and
	// q6_K weights and multiplied in its kernels' order, RMS norms as
	// (scale*weight)*x, GELU as its vector kernel, and attention as its
	// flash attention (f32 scores and weights, 128-key blocks). Pure-Go
	// products: a reference mode, several times slower than the fast one.
	NumericsIk
)

func (n Numerics) String() string {
	switch n {
	case NumericsFast:
		return "fast"
	case NumericsLlamaCpp:
		return "llamacpp"
	case NumericsLlamaCppNoRepack:
		return "llamacpp-norepack"
	case NumericsIk:
		return "ik"
	}
	return fmt.Sprintf("Numerics(%d)", int(n))
}

// resolveNumerics checks n.
func resolveNumerics(n Numerics) (Numerics, error) {
	if n < NumericsFast || n > NumericsIk {
		return n, fmt.Errorf("%w: numerics mode %d", ErrInvalidArgument, int(n))
	}
	return n, nil
}

// applyNumerics adjusts the open parameters for mode n: the reference
// modes need their layouts installed, so they pack whatever p.Pack says,
// and skip the packed-weight cache (their layouts read the mapping
// in place; only weights of types they do not cover are packed).
func applyNumerics(p ModelParams, n Numerics) ModelParams {
	if n != NumericsFast {
		p.Pack = PackOn
		p.PackedCache.Mode = CacheOff
	}
	return p
}

// layoutFor is the packed layout matrix mt takes under the model's
// numerics mode (nil: used as mapped). inPlace says the layout's bytes are
// the GGUF rows unchanged (the numerics modes' one-row layouts), so the
// matrix reads the mapping itself rather than a copy.
func (m *Model) layoutFor(mt *kernels.Matrix) (l *kernels.PackedLayout, inPlace bool) {
	order := kernels.GGMLRepack
	switch m.numerics {
	case NumericsFast:
		return m.kern.Packed(mt.Type), false
	case NumericsIk:
		if l := kernels.PackedIk(mt.Type); l != nil {
			return l, true
		}
		return m.kern.Packed(mt.Type), false
	case NumericsLlamaCppNoRepack:
		order = kernels.GGMLVecDot
	}
	if l := kernels.PackedExact(mt.Type, mt.Rows, order); l != nil {
		return l, true
	}
	return m.kern.Packed(mt.Type), false
}

// numericsOps are the building blocks whose arithmetic a numerics mode
// changes, chosen once when a session is made, so that the block's steps
// call through them instead of asking which mode runs.
type numericsOps struct {
	rmsNorm func(dst, x, w []float32, eps float32)
	rope    func(x []float32, headDim, nHeads int, cache []float32, neox bool)
	gelu    func(dst, x []float32)
	// attendHead computes one head of one token's attention.
	attendHead func(s *Session, t, h, worker int)
	// qScaleInAttention: the ScaleQ step's scale is applied by attendHead
	// to the scores rather than to Q (ik's flash attention takes it as its
	// scale).
	qScaleInAttention bool
	// groupAttention allows attendGroup (all heads of a KV head at once),
	// which computes what attendHead does in the tinyBLAS order.
	groupAttention bool
	// ggmlDecode sums a one-token batch's attention products in
	// ggml_vec_dot_f16's order (see Model.ggmlDecodeOrder).
	ggmlDecode bool
	// batch is the most tokens one forward pass takes; longer prompts go
	// in chunks of it. The reference engines pick kernels, and so summation
	// orders, by the size of the whole micro-batch (llama.cpp's q4_K and
	// q6_K products from 8 tokens on, the one-token attention order), so
	// the reference modes chunk as they do by default.
	batch int
}

// refUbatch is llama.cpp's and ik_llama.cpp's default micro-batch
// (n_ubatch): a prompt is computed 512 tokens at a time.
const refUbatch = 512

// opsFor returns the operations of model m's numerics mode for a session
// with an f32 (else f16) KV cache, on m's kernel set.
func opsFor(m *Model, f32 bool) numericsOps {
	n, c := m.numerics, &m.cfg
	o := numericsOps{
		rmsNorm:        kernels.RMSNorm,
		rope:           m.kern.RoPEApply,
		gelu:           kernels.GELU,
		attendHead:     (*Session).attendHead,
		groupAttention: !f32 && c.HeadDim%16 == 0,
		ggmlDecode:     n != NumericsFast || m.ggmlDecodeOrder,
		batch:          maxBatch,
	}
	if n != NumericsFast {
		o.batch = refUbatch
	}
	if n == NumericsIk {
		o.rmsNorm = rmsNormIk
		o.rope = m.kern.RoPEApplyIk
		o.gelu = kernels.GELUIk
		o.groupAttention = false
		if !f32 {
			o.attendHead = (*Session).attendHeadIk
			o.qScaleInAttention = true
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

// checkNumerics refuses a model that mode n cannot follow its reference
// engine on, naming what it cannot follow.
func checkNumerics(n Numerics, c *config) error {
	if n == NumericsIk && c.LayerNorm {
		return fmt.Errorf("%w: numerics mode ik: layer norms", ErrUnsupported)
	}
	if n == NumericsIk && c.AttnSoftcap != 0 {
		// attendHeadIk follows ik_llama.cpp's flash attention, which is
		// not followed with soft-capped scores.
		return fmt.Errorf("%w: numerics mode ik: attention soft-capping", ErrUnsupported)
	}
	if n == NumericsIk && c.HeadDim%16 != 0 {
		// attendHeadIk follows ik_llama.cpp's iqk flash attention, which
		// takes keys 16 values at a time; ik_llama.cpp computes other head
		// sizes another way, which this mode does not follow.
		return fmt.Errorf("%w: numerics mode ik: head size %d (it follows ik_llama.cpp's flash attention for multiples of 16 only)", ErrUnsupported, c.HeadDim)
	}
	return nil
}

// Numerics returns the model's numerics mode.
func (m *Model) Numerics() Numerics { return m.numerics }

// Kernels returns the kernel set the model computes with.
func (m *Model) Kernels() *kernels.Set { return m.kern }
