// Package numerics holds the engine's verification modes: arithmetic that
// follows another engine's float32 rounding (llama.cpp's x86 CPU backend,
// ik_llama.cpp) instead of the fastest kernels of the CPU. A mode is one
// value, chosen when a model is opened; what it changes in a session is one
// Ops value, chosen when the session is made, so the forward pass calls
// through it instead of asking which mode runs. The modes read the mapped
// weights in place through the reference layouts of package kernels.
//
// A mode either follows its engine on a model or refuses it with
// arch.ErrUnsupported naming what it cannot follow (CheckModel,
// CheckMatrix, CheckSession); it is never silently approximate in a way it
// does not document.
package numerics

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// Mode selects how closely the engine's float arithmetic follows a
// reference engine's. All modes compute the same model; they differ in the
// order of float32 additions, which on random-weight models moves
// log-probabilities by a few hundredths (see docs/DESIGN.md, "Numerics
// modes").
type Mode int

const (
	// Fast uses the fastest kernels of the CPU; it is the zero value.
	Fast Mode = iota
	// LlamaCpp reproduces the arithmetic of llama.cpp's x86 CPU backend
	// with its defaults (q4_K matrices repacked to q4_K_8x8): q8_0, q4_1,
	// q5_0, q4_K and q6_K products in ggml's summation order (pure-Go
	// kernels, several times slower than the fast ones), mxfp4 as
	// ggml_vec_dot_mxfp4_q8_0, f32 matrices (a MoE router) as tinyBLAS for
	// a batch and ggml_vec_dot_f32 for one token, and one-token attention
	// in ggml_vec_dot_f16's order. F16 weight matrices keep the fast
	// kernels and are not bit-exact; other quantized types are refused.
	LlamaCpp
	// LlamaCppNoRepack is LlamaCpp for llama.cpp run without repacked
	// layouts (use_extra_bufts off): every q4_K matrix in
	// ggml_vec_dot_q4_K_q8_K's order.
	LlamaCppNoRepack
	// Ik reproduces the arithmetic of ik_llama.cpp (the llama.cpp fork
	// with the iqk kernels) on x86 with AVX-512, run with its defaults
	// (flash attention, fused up/gate and RMS-norm ops): activations
	// quantized to its q8_2 format (bf16 block scales) for q8_0, q4_K and
	// q6_K weights and multiplied in its kernels' order, RMS norms as
	// (scale*weight)*x, GELU as its vector kernel, and attention as its
	// flash attention over an f16 cache (f32 scores and weights, 128-key
	// blocks). Float weight matrices keep the fast kernels' order (within
	// 2e-3 of ik_llama.cpp on the synthetic models); other quantized types,
	// head sizes that are not a multiple of 16 and an f32 KV cache are
	// refused. Pure-Go products: a reference mode, several times slower
	// than the fast one.
	Ik
)

func (m Mode) String() string {
	switch m {
	case Fast:
		return "fast"
	case LlamaCpp:
		return "llamacpp"
	case LlamaCppNoRepack:
		return "llamacpp-norepack"
	case Ik:
		return "ik"
	}
	return fmt.Sprintf("Numerics(%d)", int(m))
}

// Valid says whether m is one of the modes.
func (m Mode) Valid() bool { return m >= Fast && m <= Ik }

// Reference says whether m follows another engine (every mode but Fast).
func (m Mode) Reference() bool { return m != Fast }

// Layout is the packed layout a matrix takes under mode m with kernel set
// set (nil: used as mapped). inPlace says the layout's bytes are the GGUF
// rows unchanged (the reference modes' one-row layouts), so the matrix
// reads the mapping itself rather than a copy.
func (m Mode) Layout(set *kernels.Set, mt *kernels.Matrix) (l *kernels.PackedLayout, inPlace bool) {
	if l := m.refLayout(mt); l != nil {
		return l, true
	}
	return set.Packed(mt.Type), false
}

// refLayout is the reference layout of mt under m, or nil (the fast mode,
// or a type the mode has none for).
func (m Mode) refLayout(mt *kernels.Matrix) *kernels.PackedLayout {
	switch m {
	case LlamaCpp:
		return kernels.PackedExact(mt.Type, mt.Rows, kernels.GGMLRepack)
	case LlamaCppNoRepack:
		return kernels.PackedExact(mt.Type, mt.Rows, kernels.GGMLVecDot)
	case Ik:
		return kernels.PackedIk(mt.Type)
	}
	return nil
}

// Features are the parts of a model's blocks that a mode may not follow.
type Features struct {
	HeadDim     int
	NonCausal   bool // an encoder: attention over every position
	LayerNorm   bool // layer norms rather than RMS norms
	AttnSinks   bool // learned per-head sink logits in the softmax
	AttnSoftcap bool // soft-capped attention scores
	LayerShapes bool // layers of different shapes (gemma4)
}

// CheckModel refuses a model whose blocks mode m cannot follow its
// reference engine on, naming what it cannot follow.
func (m Mode) CheckModel(f Features) error {
	if m != Ik {
		return nil
	}
	switch {
	case f.HeadDim%16 != 0:
		// AttendIk follows ik_llama.cpp's iqk flash attention, which takes
		// keys 16 values at a time; ik_llama.cpp computes other head sizes
		// another way, which this mode does not follow.
		return fmt.Errorf("%w: numerics mode ik: head size %d (it follows ik_llama.cpp's flash attention for multiples of 16 only)", arch.ErrUnsupported, f.HeadDim)
	case f.NonCausal:
		return fmt.Errorf("%w: numerics mode ik: encoders (it follows ik_llama.cpp's causal attention over an f16 cache only)", arch.ErrUnsupported)
	case f.LayerNorm:
		return fmt.Errorf("%w: numerics mode ik: layer norms (it follows ik_llama.cpp's RMS norms only)", arch.ErrUnsupported)
	case f.LayerShapes:
		// ik_llama.cpp's Gemma 4 graph differs from llama.cpp's (its
		// default soft-cap, the per-layer projection's norm), and its
		// attention is followed here for one head size per model.
		return fmt.Errorf("%w: numerics mode ik: layers of different shapes", arch.ErrUnsupported)
	case f.AttnSinks:
		return fmt.Errorf("%w: numerics mode ik: attention sinks (it follows ik_llama.cpp's flash attention without sinks only)", arch.ErrUnsupported)
	case f.AttnSoftcap:
		return fmt.Errorf("%w: numerics mode ik: attention soft-capping (it follows ik_llama.cpp's flash attention without soft-capped scores only)", arch.ErrUnsupported)
	}
	return nil
}

// CheckMatrix refuses a weight matrix (named name, for the message) whose
// products mode m cannot follow: a quantized type it has no reference
// layout for would silently take the fast kernels' order. Float matrices
// keep the fast kernels in every mode, as the modes document.
func (m Mode) CheckMatrix(name string, mt *kernels.Matrix) error {
	if !m.Reference() || isFloat(mt.Type) || m.refLayout(mt) != nil {
		return nil
	}
	return fmt.Errorf("%w: numerics mode %v: %s is %v, whose products this mode does not follow", arch.ErrUnsupported, m, name, mt.Type)
}

func isFloat(t gguf.Type) bool {
	return t == gguf.F32 || t == gguf.F16 || t == gguf.BF16
}

// CheckSession refuses a KV cache mode m cannot follow: ik_llama.cpp's
// flash attention, which the ik mode reproduces, is followed for an f16
// cache only (with an f32 one the mode would compute llama.cpp's attention,
// not ik_llama.cpp's).
func (m Mode) CheckSession(kvF32 bool) error {
	if m == Ik && kvF32 {
		return fmt.Errorf("%w: numerics mode ik: an f32 KV cache (it follows ik_llama.cpp's flash attention over an f16 cache only)", arch.ErrUnsupported)
	}
	return nil
}

// ikMaxBatch is the largest batch whose products the ik mode follows: from
// 32 tokens ik_llama.cpp multiplies q8_0 and q4_K weights another way (it
// converts them to its row-interleaved q8_0_r8 and q8_1 forms first; q6_K
// from 64), which this mode does not reproduce.
const ikMaxBatch = 31

// CheckBatch refuses a forward pass over n tokens at once where mode m
// would no longer follow its engine (the ik mode: more than ikMaxBatch).
func (m Mode) CheckBatch(n int) error {
	if m == Ik && n > ikMaxBatch {
		return fmt.Errorf("%w: numerics mode ik: a batch of %d tokens (it follows ik_llama.cpp's products for batches of up to %d tokens; from 32 ik_llama.cpp converts q8_0 and q4_K weights to other layouts first)", arch.ErrUnsupported, n, ikMaxBatch)
	}
	return nil
}

// CheckPositions refuses a session reaching n positions where mode m would
// no longer follow its engine: the ik mode follows ik_llama.cpp's flash
// attention while every query's keys fit one 128-key block; past it
// ik_llama.cpp's decode splits the keys across threads and combines the
// parts, an order this mode does not reproduce.
func (m Mode) CheckPositions(n int) error {
	if m == Ik && n > ikKStep {
		return fmt.Errorf("%w: numerics mode ik: %d positions (it follows ik_llama.cpp's flash attention up to %d, one key block)", arch.ErrUnsupported, n, ikKStep)
	}
	return nil
}
