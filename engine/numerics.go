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

// numericsFeatures are the parts of c a numerics mode may refuse.
func numericsFeatures(c *config) numerics.Features {
	return numerics.Features{HeadDim: c.HeadDim, NonCausal: c.NonCausal, LayerNorm: c.LayerNorm, AttnSinks: c.AttnSinks, AttnSoftcap: c.AttnSoftcap != 0, LayerShapes: c.Shapes != nil}
}
