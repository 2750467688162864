package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// TestMatMulTiledQ4_1 checks MatMulTiled against the generic kernels' MatMul
// (within rounding) and the same set's MatMul (exactly) on shapes with and without whole 4x4 tiles (leftover rows and tokens, an
// odd block count that the tile kernel refuses, row sub-ranges).
func TestMatMulTiledQ4_1(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{64, 96, 576, 1536} {
		for _, rows := range []int{4, 7, 33} {
			for _, nTok := range []int{1, 4, 6, 13} {
				for _, rng := range [][2]int{{0, rows}, {1, rows}, {rows / 2, rows}} {
					name := fmt.Sprintf("cols=%d/rows=%d/tok=%d/r=%d-%d", cols, rows, nTok, rng[0], rng[1])
					t.Run(name, func(t *testing.T) {
						m, xq := tiledCase(r, cols, rows, nTok)
						want := make([]float32, nTok*rows)
						genericSet.MatMul(m, xq, nTok, want, rng[0], rng[1])
						for _, ks := range testSets(t) {
							v := ks.Name()
							got := make([]float32, nTok*rows)
							ks.MatMulTiled(m, xq, nTok, got, rng[0], rng[1])
							// In whole 4x4 tiles the tile kernel repeats the
							// multi-token kernel's (and ggml's) operations in
							// order: bit-identical. Leftover rows and tokens
							// take other kernels (within rounding).
							same := make([]float32, nTok*rows)
							ks.MatMul(m, xq, nTok, same, rng[0], rng[1])
							for k := range nTok / 4 * 4 {
								for i := rng[0]; i < rng[0]+(rng[1]-rng[0])/4*4; i++ {
									require.Equal(t, same[k*rows+i], got[k*rows+i], "%s: token %d row %d differs from MatMul", v, k, i)
								}
							}
							for k := range nTok {
								for i := range rows {
									w, g := want[k*rows+i], got[k*rows+i]
									if i < rng[0] {
										require.Zero(t, g, "%s wrote row %d outside the range", v, i)
										continue
									}
									tol := 1e-4 * (1 + math.Abs(float64(w)))
									require.InDelta(t, w, g, tol, "%s: token %d row %d", v, k, i)
								}
							}
						}
					})
				}
			}
		}
	}
}

// tiledCase makes a random Q4_1 matrix and nTok q8_1 activation rows.
func tiledCase(r *rand.Rand, cols, rows, nTok int) (*Matrix, []byte) {
	rb := RowBytes(gguf.Q4_1, cols)
	m := &Matrix{Type: gguf.Q4_1, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	x := make([]float32, cols)
	for i := range rows {
		for j := range x {
			x[j] = float32(r.NormFloat64()) + 0.3
		}
		QuantizeRow(gguf.Q4_1, x, m.Data[i*rb:(i+1)*rb])
	}
	ab := ActivationBytes(gguf.Q4_1, cols)
	xq := make([]byte, nTok*ab)
	for k := range nTok {
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		QuantizeRow(VecDotType(gguf.Q4_1), x, xq[k*ab:(k+1)*ab])
	}
	return m, xq
}

// BenchmarkMatMulTiled compares MatMul and MatMulTiled on a Q4_1 matrix of
// SmolLM2's FFN shape (1536 x 576) over 64 tokens, as one prefill chunk.
func BenchmarkMatMulTiled(b *testing.B) {
	ks := Detect()
	r := rand.New(rand.NewPCG(1, 2))
	m, xq := tiledCase(r, 576, 1536, 64)
	y := make([]float32, 64*m.Rows)
	for _, tiled := range []bool{false, true} {
		b.Run(fmt.Sprintf("tiled=%v", tiled), func(b *testing.B) {
			for b.Loop() {
				if tiled {
					ks.MatMulTiled(m, xq, 64, y, 0, m.Rows)
				} else {
					ks.MatMul(m, xq, 64, y, 0, m.Rows)
				}
			}
			b.ReportMetric(2*float64(m.Rows*m.Cols*64)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
