package engine

import (
	"math"

	"github.com/moonlm/moonlm/kernels"
)

// siluRow sets x to silu(x) as ggml's silu does over a row on an AVX-512
// build (ggml_vec_silu_f32): x / (1 + ggml's vector expf(-x)) for every
// full 16 values from the row's start, and with libm's expf for the rest.
// The DeltaNet layers take it for their convolution's output and the
// output gate, as the FFN's SwiGLU does (kernels.Set.FastSwiGLU): the
// correctly rounded exp differs from ggml's by an ulp now and then, which
// a later Q8_0 quantization occasionally turns into a visible difference.
func siluRow(x []float32) {
	n16 := len(x) &^ 15
	for i, v := range x[:n16] {
		x[i] = v / (1 + kernels.ExpGGML(-v))
	}
	for i := n16; i < len(x); i++ {
		v := x[i]
		x[i] = v / (1 + float32(math.Exp(float64(-v))))
	}
}

// siluAt is silu(v) for the value at index i of a row of n, as siluRow
// computes it.
func siluAt(v float32, i, n int) float32 {
	if i < n&^15 {
		return v / (1 + kernels.ExpGGML(-v))
	}
	return v / (1 + float32(math.Exp(float64(-v))))
}
