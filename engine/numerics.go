package engine

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/numerics"
	"github.com/moonlm/moonlm/kernels"
)

// Numerics selects how closely the engine's float arithmetic follows
// llama.cpp's or ik_llama.cpp's (package numerics holds the modes); the
// zero value is NumericsFast.
type Numerics = numerics.Mode

// The numerics modes (see package numerics).
const (
	NumericsFast             = numerics.Fast
	NumericsLlamaCpp         = numerics.LlamaCpp
	NumericsLlamaCppNoRepack = numerics.LlamaCppNoRepack
	NumericsIk               = numerics.Ik
)

// resolveNumerics checks n.
func resolveNumerics(n Numerics) (Numerics, error) {
	if !n.Valid() {
		return n, fmt.Errorf("%w: numerics mode %d", ErrInvalidArgument, int(n))
	}
	return n, nil
}

// applyNumerics adjusts the open parameters for mode n: the reference
// modes need their layouts installed, so they pack whatever p.Pack says,
// and skip the packed-weight cache (their layouts read the mapping
// in place; only weights of types they do not cover are packed).
func applyNumerics(p ModelParams, n Numerics) ModelParams {
	if n.Reference() {
		p.Pack = PackOn
		p.PackedCache.Mode = CacheOff
	}
	return p
}

// checkNumericsWeights refuses a model with a weight matrix the model's
// numerics mode cannot follow.
func (m *Model) checkNumericsWeights() error {
	var err error
	m.eachMatrix(func(name string, mt *kernels.Matrix) {
		if err == nil {
			err = m.numerics.CheckMatrix(name, mt)
		}
	})
	return err
}

// Numerics returns the model's numerics mode.
func (m *Model) Numerics() Numerics { return m.numerics }

// Kernels returns the kernel set the model computes with.
func (m *Model) Kernels() *kernels.Set { return m.kern }

// checkNumericsBlock refuses block features that mode n's reference
// arithmetic is not followed with, naming them.
func checkNumericsBlock(n Numerics, c *config) error {
	if n == NumericsIk && c.NonCausal {
		return fmt.Errorf("%w: numerics mode ik: encoders (non-causal attention over an f32 cache)", ErrUnsupported)
	}
	if n == NumericsIk && c.LayerNorm {
		return fmt.Errorf("%w: numerics mode ik: layer norms", ErrUnsupported)
	}
	if n == NumericsIk && c.Shapes != nil {
		// ik_llama.cpp's Gemma 4 graph differs from llama.cpp's (its
		// default soft-cap, the per-layer projection's norm), and its
		// attention here is followed for one head size per model.
		return fmt.Errorf("%w: numerics mode ik: layers of different shapes (%s)", ErrUnsupported, c.Arch)
	}
	if n == NumericsIk && c.AttnSoftcap != 0 {
		// ik's flash attention is followed without soft-capped scores only.
		return fmt.Errorf("%w: numerics mode ik: attention soft-capping", ErrUnsupported)
	}
	return nil
}
