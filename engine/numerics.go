package engine

import (
	"fmt"
	"os"
	"strings"

	"github.com/moonlm/moonlm/kernels"
)

// Numerics selects how closely the engine's float arithmetic follows
// llama.cpp's. Both modes compute the same model; they differ in the order
// of float32 additions, which on random-weight models moves
// log-probabilities by a few hundredths (see docs/DESIGN.md, "Numerics
// modes").
type Numerics int

const (
	// NumericsFast uses the fastest kernels of the CPU, unless the
	// environment variable MOONLM_NUMERICS asks for a llama.cpp mode
	// ("llamacpp" or "llamacpp-norepack"); it is the zero value.
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

// resolveNumerics applies MOONLM_NUMERICS to the zero value and checks n.
func resolveNumerics(n Numerics) (Numerics, error) {
	if n == NumericsFast {
		switch env := strings.TrimSpace(os.Getenv("MOONLM_NUMERICS")); strings.ToLower(env) {
		case "", "fast":
		case "llamacpp", "llama.cpp":
			n = NumericsLlamaCpp
		case "llamacpp-norepack", "llama.cpp-norepack":
			n = NumericsLlamaCppNoRepack
		case "ik", "ik_llama.cpp":
			n = NumericsIk
		default:
			return n, fmt.Errorf("%w: MOONLM_NUMERICS=%q (want fast, llamacpp, llamacpp-norepack or ik)", ErrInvalidArgument, env)
		}
	}
	if n < NumericsFast || n > NumericsIk {
		return n, fmt.Errorf("%w: numerics mode %d", ErrInvalidArgument, int(n))
	}
	return n, nil
}

// applyNumerics adjusts the open parameters for mode n: the llama.cpp
// modes need their layouts installed, so they pack whatever MOONLM_PACK
// says, and skip the packed-weight cache (the layouts are plain copies,
// cheaper to make than to read back).
func applyNumerics(p ModelParams, n Numerics) ModelParams {
	if n != NumericsFast {
		p.Pack = PackOn
		p.PackedCache.Mode = CacheOff
	}
	return p
}

// layoutFor is the packed layout matrix mt takes under the model's
// numerics mode (nil: used as mapped).
func (m *Model) layoutFor(mt *kernels.Matrix) *kernels.PackedLayout {
	order := kernels.GGMLRepack
	switch m.numerics {
	case NumericsFast:
		return m.kern.Packed(mt.Type)
	case NumericsIk:
		if l := kernels.PackedIk(mt.Type); l != nil {
			return l
		}
		return m.kern.Packed(mt.Type)
	case NumericsLlamaCppNoRepack:
		order = kernels.GGMLVecDot
	}
	if l := kernels.PackedExact(mt.Type, mt.Rows, order); l != nil {
		return l
	}
	return m.kern.Packed(mt.Type)
}

// decodeInGGMLOrder says whether a one-token batch sums its attention
// products as ggml_vec_dot_f16 does (see ggmlDecodeOrder).
func (m *Model) decodeInGGMLOrder() bool {
	return m.numerics != NumericsFast || m.ggmlDecodeOrder
}

// Numerics returns the model's numerics mode, after MOONLM_NUMERICS.
func (m *Model) Numerics() Numerics { return m.numerics }

// Kernels returns the kernel set the model computes with.
func (m *Model) Kernels() *kernels.Set { return m.kern }
