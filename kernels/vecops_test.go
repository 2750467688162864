package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSoftmaxHelpers checks FastSoftmax and Scale, whose maximum, chunk sums
// and scaling run on AVX-512 helpers where the CPU has them, against a plain
// scalar softmax in ggml's order (ExpGGML, each 16-value chunk summed by
// sum16, chunk sums in float64, the float32 reciprocal), bit for bit, over
// lengths with and without a partial chunk and rows with masked (-Inf)
// cells.
func TestSoftmaxHelpers(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(41, 43))
	for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 64, 100, 512, 1000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 4)
			if rng.IntN(8) == 0 {
				x[i] = float32(math.Inf(-1))
			}
		}
		x[rng.IntN(n)] = 3 // at least one finite value
		want := append([]float32(nil), x...)
		mx := float32(math.Inf(-1))
		for _, v := range want {
			mx = max(mx, v)
		}
		var sum float64
		for i := 0; i < n; i += 16 {
			var c [16]float32
			for j := i; j < min(i+16, n); j++ {
				want[j] = ExpGGML(want[j] - mx)
				c[j-i] = want[j]
			}
			sum += float64(sum16(&c))
		}
		sc := float32(1 / sum)
		for i := range want {
			want[i] *= sc
		}
		got := append([]float32(nil), x...)
		ks.FastSoftmax(got)
		for i := range want {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "n %d value %d", n, i)
		}
		s := float32(rng.NormFloat64())
		want = append(want[:0], x...)
		for i := range want {
			want[i] *= s
		}
		got = append(got[:0], x...)
		ks.Scale(got, s)
		require.Equal(t, want, got, "scale, n %d", n)
	}
}
