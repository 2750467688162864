package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// TestMatMulMXFP4Tokens: every set has a multi-token MXFP4 kernel (the
// format table's, which MatMul takes), and through MatMul each token's
// rows are bit-identical to MatVec's for that token alone, for rows of
// even and odd block counts (gpt-oss's 2880 columns among them), token
// counts with and without a remainder of four, and a row range inside the
// matrix.
func TestMatMulMXFP4Tokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, name := range Available() {
		s, err := New(name)
		require.NoError(t, err)
		require.NotNil(t, s.types[gguf.MXFP4].tokens, "%s: no multi-token MXFP4 kernel", name)
		for _, cols := range []int{32, 64, 5 * 32, 2880} {
			const rows = 37
			m := randomMXFP4(rng, rows, cols)
			ab := ActivationBytes(gguf.MXFP4, cols)
			for _, nTok := range []int{1, 3, 4, 7, 9} {
				xq := make([]byte, nTok*ab)
				x := make([]float32, cols)
				for k := 0; k < nTok; k++ {
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					s.QuantizeAct(gguf.Q8_0, x, xq[k*ab:(k+1)*ab])
				}
				for _, rr := range [][2]int{{0, rows}, {5, 30}} {
					got := make([]float32, nTok*rows)
					s.MatMul(&m, xq, nTok, got, rr[0], rr[1])
					want := make([]float32, rows)
					for k := 0; k < nTok; k++ {
						s.MatVec(&m, xq[k*ab:(k+1)*ab], want, rr[0], rr[1])
						for r := rr[0]; r < rr[1]; r++ {
							if math.Float32bits(got[k*rows+r]) != math.Float32bits(want[r]) {
								t.Fatalf("%s: %d cols, %d tokens: token %d row %d: %v, MatVec %v", name, cols, nTok, k, r, got[k*rows+r], want[r])
							}
						}
					}
				}
			}
		}
	}
}

// TestMXFP4Tok4Generic: the generic four-token kernel equals the generic
// row dot, bit for bit, token by token.
func TestMXFP4Tok4Generic(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	for _, nb := range []int{1, 2, 7, 90} {
		m := randomMXFP4(rng, 1, nb*32)
		ab := nb * gguf.BytesQ8_0
		xq := make([]byte, 4*ab+5)
		x := make([]float32, nb*32)
		for k := 0; k < 4; k++ {
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
			}
			quantizeQ8_0(x, xq[k*ab:(k+1)*ab])
		}
		var out [4]float32
		dotMXFP4Tok4Generic(nb, m.Data, xq, ab, &out)
		for k := 0; k < 4; k++ {
			want := dotMXFP4Generic(nb*32, m.Data, xq[k*ab:(k+1)*ab])
			require.Equal(t, math.Float32bits(want), math.Float32bits(out[k]), "%d blocks, token %d", nb, k)
		}
	}
}

// randomMXFP4 is a rows x cols MXFP4 matrix of random codes with scale
// bytes around 1 (so sums stay finite and vary).
func randomMXFP4(rng *rand.Rand, rows, cols int) Matrix {
	m := Matrix{Type: gguf.MXFP4, Rows: rows, Cols: cols, Data: make([]byte, rows*RowBytes(gguf.MXFP4, cols))}
	for i := range m.Data {
		m.Data[i] = byte(rng.IntN(256))
	}
	for b := 0; b < len(m.Data); b += bytesMXFP4 {
		m.Data[b] = byte(120 + rng.IntN(16))
	}
	return m
}

// BenchmarkMatMulMXFP4 is MatMul (with its four-token kernel) against
// MatVec token by token on a gpt-oss-shaped expert slice (2880 columns),
// 32 tokens.
func BenchmarkMatMulMXFP4(b *testing.B) {
	s := Detect()
	rng := rand.New(rand.NewPCG(5, 5))
	const rows, cols, nTok = 512, 2880, 32
	m := randomMXFP4(rng, rows, cols)
	ab := ActivationBytes(gguf.MXFP4, cols)
	xq := make([]byte, nTok*ab)
	x := make([]float32, cols)
	for k := 0; k < nTok; k++ {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		s.QuantizeAct(gguf.Q8_0, x, xq[k*ab:(k+1)*ab])
	}
	y := make([]float32, nTok*rows)
	b.Run("matmul", func(b *testing.B) {
		for range b.N {
			s.MatMul(&m, xq, nTok, y, 0, rows)
		}
	})
	b.Run("matvec", func(b *testing.B) {
		for range b.N {
			for k := range nTok {
				s.MatVec(&m, xq[k*ab:(k+1)*ab], y[k*rows:(k+1)*rows], 0, rows)
			}
		}
	})
}
