package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// deltaStepSequential is the delta rule as written, one operation after
// another: decay, the key's product, the update, the query's product.
func deltaStepSequential(state, k, q, v, out []float32, g, beta float32) {
	n := len(k)
	for j := range v {
		row := state[j*n : (j+1)*n]
		var a float64
		for i := range row {
			row[i] *= g
			a += float64(row[i]) * float64(k[i])
		}
		d := beta * (v[j] - float32(a))
		var b float64
		for i := range row {
			row[i] += d * k[i]
			b += float64(row[i]) * float64(q[i])
		}
		out[j] = float32(b)
	}
}

// TestDeltaStep: every kernel set's DeltaStep follows the rule as written
// over several steps, for row lengths that take the AVX-512 kernel (a
// multiple of 32), the AVX2 one (of 16) and neither.
func TestDeltaStep(t *testing.T) {
	for _, s := range testSets(t) {
		for _, n := range []int{128, 32, 48, 20} {
			rows := n + 3
			rng := rand.New(rand.NewPCG(uint64(n), 7))
			unit := func() []float32 {
				x := make([]float32, n)
				var ss float64
				for i := range x {
					x[i] = float32(rng.NormFloat64())
					ss += float64(x[i] * x[i])
				}
				for i := range x {
					x[i] /= float32(math.Sqrt(ss))
				}
				return x
			}
			got := make([]float32, rows*n)
			for i := range got {
				got[i] = float32(rng.NormFloat64()) * 0.1
			}
			want := append([]float32(nil), got...)
			outG, outW := make([]float32, rows), make([]float32, rows)
			for step := range 5 {
				k, q := unit(), unit()
				v := make([]float32, rows)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				g, beta := float32(0.3+0.1*float64(step)), float32(0.2+0.15*float64(step))
				s.DeltaStep(got, k, q, v, outG, g, beta)
				deltaStepSequential(want, k, q, v, outW, g, beta)
				for j := range outW {
					require.InDelta(t, outW[j], outG[j], 1e-5, "%s n=%d step %d out[%d]", s.Name(), n, step, j)
				}
			}
			for i := range want {
				require.InDelta(t, want[i], got[i], 1e-5, "%s n=%d state[%d]", s.Name(), n, i)
			}
		}
	}
}

// TestDeltaStepGenericTwin: the SIMD kernels equal the pure-Go twin to
// float32 rounding on the same inputs (one step from the same state).
func TestDeltaStepGenericTwin(t *testing.T) {
	const n, rows = 128, 64
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(m int) []float32 {
		x := make([]float32, m)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * 0.2
		}
		return x
	}
	state, k, q, v := rnd(rows*n), rnd(n), rnd(n), rnd(rows)
	want, outW := append([]float32(nil), state...), make([]float32, rows)
	genericSet.DeltaStep(want, k, q, v, outW, 0.7, 0.4)
	for _, s := range testSets(t) {
		got, outG := append([]float32(nil), state...), make([]float32, rows)
		s.DeltaStep(got, k, q, v, outG, 0.7, 0.4)
		for j := range outW {
			require.InDelta(t, outW[j], outG[j], 2e-6, "%s out[%d]", s.Name(), j)
		}
		for i := range want {
			require.InDelta(t, want[i], got[i], 2e-6, "%s state[%d]", s.Name(), i)
		}
	}
}

// TestDeltaStepBounds: lengths that do not fit panic rather than write
// outside the slices.
func TestDeltaStepBounds(t *testing.T) {
	s := genericSet
	require.Panics(t, func() {
		s.DeltaStep(make([]float32, 10), make([]float32, 4), make([]float32, 4), make([]float32, 3), make([]float32, 3), 1, 1)
	})
	require.Panics(t, func() {
		s.DeltaStep(make([]float32, 12), make([]float32, 4), make([]float32, 3), make([]float32, 3), make([]float32, 3), 1, 1)
	})
}

func BenchmarkDeltaStep(b *testing.B) {
	const n = 128
	for _, s := range testSets(b) {
		b.Run(s.Name(), func(b *testing.B) {
			state, k, q, v, out := make([]float32, n*n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range k {
				k[i], q[i], v[i] = 0.01, 0.02, 0.5
			}
			b.SetBytes(4 * n * n)
			for b.Loop() {
				s.DeltaStep(state, k, q, v, out, 0.9, 0.5)
			}
		})
	}
}

// TestDotsF32: every kernel set's DotsF32 gives each vector's dot product
// with each row (float64 reference) for counts of vectors and rows that
// take the four-vector, two-row kernel, its tails and neither, with
// strides wider than the vectors; it writes nothing outside its outputs.
func TestDotsF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range testSets(t) {
		for _, n := range []int{16, 20, 128} {
			for _, nx := range []int{1, 3, 4, 5, 8} {
				for _, m := range []int{1, 2, 7, 8} {
					xStride, stride, yStride := n+3, n+5, m+2
					x := make([]float32, (nx-1)*xStride+n)
					rows := make([]float32, (m-1)*stride+n)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					for i := range rows {
						rows[i] = float32(rng.NormFloat64())
					}
					y := make([]float32, (nx-1)*yStride+m+1)
					for i := range y {
						y[i] = -7
					}
					s.DotsF32(x, nx, xStride, n, rows, stride, m, y, yStride)
					for g := range nx {
						for i := range m {
							var want float64
							for e := range n {
								want += float64(x[g*xStride+e]) * float64(rows[i*stride+e])
							}
							require.InDelta(t, want, y[g*yStride+i], 1e-4, "%s n=%d nx=%d m=%d y[%d][%d]", s.Name(), n, nx, m, g, i)
						}
						if g < nx-1 {
							for i := m; i < yStride; i++ {
								require.Equal(t, float32(-7), y[g*yStride+i], "%s: padding written", s.Name())
							}
						}
					}
					require.Equal(t, float32(-7), y[len(y)-1], "%s: past the end written", s.Name())
				}
			}
		}
	}
	require.Panics(t, func() {
		genericSet.DotsF32(make([]float32, 8), 2, 4, 4, make([]float32, 8), 4, 2, make([]float32, 3), 2)
	})
}
