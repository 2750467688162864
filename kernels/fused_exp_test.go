package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFastExp checks the vector exp against float64 math.Exp over its whole
// range (relative error within 4 float32 ulp).
func TestFastExp(t *testing.T) {
	ks := Detect()
	var x []float32
	for v := -87.0; v <= 88; v += 0.0137 {
		x = append(x, float32(v))
	}
	x = append(x, 0, -0.5, 0.5, float32(math.Ln2/2), -float32(math.Ln2/2))
	for len(x)%8 != 0 {
		x = append(x, 1)
	}
	got := append([]float32(nil), x...)
	done := ks.expSubVec(got, 0)
	if done == 0 {
		t.Skipf("no vector exp with kernels %q", ks.Name())
	}
	require.Equal(t, len(x), done)
	for i, v := range x {
		want := math.Exp(float64(v))
		require.InDelta(t, 0, (float64(got[i])-want)/want, 4*0x1p-24, "exp(%v) = %v, want %v", v, got[i], want)
	}
}

// TestFastSoftmaxSwiGLU compares FastSoftmax and FastSwiGLU with Softmax and
// SwiGLU with every kernel set, for lengths with and without a scalar tail.
func TestFastSoftmaxSwiGLU(t *testing.T) {
	ks := Detect()
	r := rand.New(rand.NewPCG(3, 4))
	for _, ks := range testSets(t) {
		v := ks.Name()
		for _, n := range []int{1, 7, 8, 13, 64, 517} {
			t.Run(fmt.Sprintf("%s/n=%d", v, n), func(t *testing.T) {
				x := make([]float32, n)
				u := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 8)
					u[i] = float32(r.NormFloat64())
				}
				want := append([]float32(nil), x...)
				Softmax(want)
				got := append([]float32(nil), x...)
				ks.FastSoftmax(got)
				for i := range want {
					require.InDelta(t, want[i], got[i], 1e-6*float64(want[i])+1e-30, "softmax %d", i)
				}
				sw := make([]float32, n)
				SwiGLU(sw, x, u)
				fw := append([]float32(nil), x...)
				ks.FastSwiGLU(fw, fw, u) // aliasing dst and gate, as the engine does
				for i := range sw {
					require.InDelta(t, sw[i], fw[i], 1e-6*math.Abs(float64(sw[i]))+1e-30, "swiglu %d (g %v u %v)", i, x[i], u[i])
				}
			})
		}
	}
	// Extremes: the clamp keeps silu finite and the softmax of a huge range exact enough.
	g := []float32{-200, -100, -88, 88, 100, 200, 0, 1e-30}
	u := []float32{1, 1, 1, 1, 1, 1, 1, 1}
	out := make([]float32, 8)
	ks.FastSwiGLU(out, g, u)
	for i, v := range out {
		require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "silu(%v) = %v", g[i], v)
	}
	require.InDelta(t, 0, out[0], 1e-30)
	require.InDelta(t, 200, out[5], 1e-4)
}
