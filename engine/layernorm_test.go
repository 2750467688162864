package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNorm: layerNorm centers, scales to unit variance and applies
// the weight, in place or not, for lengths with and without a remainder
// past its 16-value groups (against a float64 computation).
func TestLayerNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{16, 256, 100} {
		x := make([]float32, n)
		w := make([]float32, n)
		for i := range x {
			x[i] = float32(3 + 2*rng.NormFloat64())
			w[i] = float32(1 + 0.1*rng.NormFloat64())
		}
		var mean, v float64
		for _, a := range x {
			mean += float64(a)
		}
		mean /= float64(n)
		for _, a := range x {
			v += (float64(a) - mean) * (float64(a) - mean)
		}
		v /= float64(n)
		dst := make([]float32, n)
		layerNorm(dst, x, w, nil, 1e-5)
		in := append([]float32(nil), x...)
		layerNorm(in, in, w, nil, 1e-5)
		for i := range x {
			want := (float64(x[i]) - mean) / math.Sqrt(v+1e-5) * float64(w[i])
			if math.Abs(float64(dst[i])-want) > 1e-5 || dst[i] != in[i] {
				t.Fatalf("n %d, value %d: %v (in place %v), want %v", n, i, dst[i], in[i], want)
			}
		}
	}
}
