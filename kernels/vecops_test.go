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
		want := softmaxGGMLRef(x, false)
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

// softmaxGGMLRef is a scalar softmax of x in ggml's order: the maximum,
// each value less it through ExpGGML in 16-value chunks (each chunk summed
// by sum16, the chunk sums in float64), then every value times the float32
// reciprocal of the total. With libmTail the values past the last whole
// chunk take float64 math.Exp instead and are added one by one, as
// SoftmaxRow's scalar tail does; without it a partial chunk is summed as
// the whole ones (FastSoftmax).
func softmaxGGMLRef(x []float32, libmTail bool) []float32 {
	want := make([]float32, len(x))
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	end := len(x)
	if libmTail {
		end &^= 15
	}
	var sum float64
	for i := 0; i < end; i += 16 {
		var c [16]float32
		for j := i; j < min(i+16, end); j++ {
			want[j] = ExpGGML(x[j] - mx)
			c[j-i] = want[j]
		}
		sum += float64(sum16(&c))
	}
	for i := end; i < len(x); i++ {
		want[i] = float32(math.Exp(float64(x[i] - mx)))
		sum += float64(want[i])
	}
	inv := float32(1 / sum)
	for i := range want {
		want[i] *= inv
	}
	return want
}
