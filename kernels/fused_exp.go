package kernels

import "math"

// FastSoftmax is Softmax with a vectorized float32 exp (within a few ulp of
// math.Exp, as ggml's own SIMD exp is) where the CPU has one; the sum is
// still accumulated in float64. Attention spends a good part of prefill
// here, and in FastSwiGLU.
func FastSoftmax(x []float32) {
	if len(x) == 0 {
		return
	}
	max := float32(math.Inf(-1))
	for _, v := range x {
		if v > max {
			max = v
		}
	}
	done := expSubVec(x, max)
	for i := done; i < len(x); i++ {
		x[i] = float32(math.Exp(float64(x[i] - max)))
	}
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	scale := float32(1 / sum)
	for i := range x {
		x[i] *= scale
	}
}

// FastSwiGLU is SwiGLU (dst = silu(gate) * up, dst may alias gate) with the
// vectorized exp of FastSoftmax.
func FastSwiGLU(dst, gate, up []float32) {
	dst, up = dst[:len(gate)], up[:len(gate)]
	done := swigluVec(dst, gate, up)
	for i := done; i < len(gate); i++ {
		g := gate[i]
		dst[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}
