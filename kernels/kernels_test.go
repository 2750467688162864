package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// weightTypes are the types with a row dot kernel.
var weightTypes = []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0,
	gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ4_NL, gguf.IQ4_XS, gguf.MXFP4}

// randomRow fills a row of n values of type t with random blocks whose
// dequantized values are finite and moderate (random bytes can spell inf/NaN
// or huge scales in f16 fields; such blocks are redrawn).
func randomRow(rng *rand.Rand, t gguf.Type, n int) []byte {
	bs, bb := blockGeom(t)
	row := make([]byte, RowBytes(t, n))
	tmp := make([]float32, bs)
	for b := 0; b < n/bs; b++ {
		blk := row[b*bb : (b+1)*bb]
	retry:
		for {
			for i := range blk {
				blk[i] = byte(rng.Uint32())
			}
			if t == gguf.F32 {
				// Random bits are mostly huge or tiny; use a normal value.
				QuantizeRow(t, []float32{float32(rng.NormFloat64())}, blk)
			}
			DequantizeRow(t, blk, tmp)
			for _, v := range tmp {
				if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 1e4 {
					continue retry
				}
			}
			break
		}
	}
	return row
}

func randomFloats(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

// refDot is the float64 dot of the dequantized row and the dequantized
// converted activations: what every kernel computes, up to float rounding.
// With Q8_1 activations, the weight minimum multiplies the block sum stored
// in the activations (an f16 rounding of the exact sum), as in ggml.
func refDot(t gguf.Type, w, xq []byte, n int) (dot, scale float64) {
	wf := make([]float32, n)
	xf := make([]float32, n)
	DequantizeRow(t, w, wf)
	DequantizeRow(VecDotType(t), xq, xf)
	if VecDotType(t) == gguf.Q8_1 {
		_, wb := blockGeom(t)
		for b := 0; b < n/qk32; b++ {
			m := float64(f16At(w[b*wb+2:]))
			sx := float64(f16At(xq[b*gguf.BytesQ8_1+2:]))
			for i := b * qk32; i < (b+1)*qk32; i++ {
				p := (float64(wf[i]) - m) * float64(xf[i])
				dot += p
				scale += math.Abs(p)
			}
			dot += m * sx
			scale += math.Abs(m * sx)
		}
		return dot, scale
	}
	for i := range wf {
		p := float64(wf[i]) * float64(xf[i])
		dot += p
		scale += math.Abs(p)
	}
	return dot, scale
}

// TestDotRowGenericMatchesDequantized checks each pure-Go row dot against the
// float64 dot of the dequantized operands, on random blocks.
func TestDotRowGenericMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range weightTypes {
		t.Run(typ.String(), func(t *testing.T) {
			bs, _ := blockGeom(typ)
			for _, nb := range []int{1, 2, 5} {
				n := max(bs, 32) * nb
				w := randomRow(rng, typ, n)
				x := randomFloats(rng, n, 1)
				xq := make([]byte, ActivationBytes(typ, n))
				QuantizeRow(VecDotType(typ), x, xq)
				got := genericSet.RowDot(typ)(n, w, xq)
				want, scale := refDot(typ, w, xq, n)
				require.InDelta(t, want, got, 1e-6*scale+1e-30, "n=%d", n)
			}
		})
	}
}

// TestVariantsMatchGeneric runs MatVec and MatMul with every kernel set this
// CPU supports and compares with the generic row dots, on random shapes with
// odd row counts.
func TestVariantsMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, typ := range weightTypes {
		bs, _ := blockGeom(typ)
		unit := max(bs, 32)
		for _, shape := range [][2]int{{1, 1}, {7, 3}, {13, 8}, {3, 17}} {
			rows, cols := shape[0], shape[1]*unit
			m := &Matrix{Type: typ, Rows: rows, Cols: cols}
			for range rows {
				m.Data = append(m.Data, randomRow(rng, typ, cols)...)
			}
			nTok := 3
			ab := ActivationBytes(typ, cols)
			xq := make([]byte, nTok*ab)
			for k := range nTok {
				QuantizeRow(VecDotType(typ), randomFloats(rng, cols, 2), xq[k*ab:(k+1)*ab])
			}
			want := make([]float64, nTok*rows)
			scale := make([]float64, nTok*rows)
			for k := range nTok {
				for r := range rows {
					want[k*rows+r], scale[k*rows+r] = refDot(typ, m.Row(r), xq[k*ab:(k+1)*ab], cols)
				}
			}
			for _, ks := range testSets(t) {
				t.Run(fmt.Sprintf("%v/%dx%d/%s", typ, rows, cols, ks.Name()), func(t *testing.T) {
					y := make([]float32, rows)
					ks.MatVec(m, xq, y, 0, rows)
					for r := range rows {
						require.InDelta(t, want[r], y[r], 1e-5*scale[r]+1e-30, "MatVec row %d", r)
						require.InDelta(t, want[r], ks.DotRow(typ, m.Row(r), xq, cols), 1e-5*scale[r]+1e-30, "DotRow row %d", r)
					}
					// A sub-range leaves the rest untouched.
					y2 := make([]float32, rows)
					for i := range y2 {
						y2[i] = -12345
					}
					ks.MatVec(m, xq, y2, rows/3, rows)
					for r := range rows {
						if r < rows/3 {
							require.Equal(t, float32(-12345), y2[r])
						} else {
							require.Equal(t, y[r], y2[r])
						}
					}
					ym := make([]float32, nTok*rows)
					ks.MatMul(m, xq, nTok, ym, 0, rows)
					for i := range ym {
						require.InDelta(t, want[i], ym[i], 1e-5*scale[i]+1e-30, "MatMul entry %d", i)
					}
				})
			}
		}
	}
}

func TestNoAllocations(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols, nTok = 5, 512, 4
	for _, typ := range weightTypes {
		m := &Matrix{Type: typ, Rows: rows, Cols: cols}
		for range rows {
			m.Data = append(m.Data, randomRow(rng, typ, cols)...)
		}
		x := randomFloats(rng, cols, 1)
		ab := ActivationBytes(typ, cols)
		xq := make([]byte, nTok*ab)
		f := make([]float32, cols)
		y := make([]float32, nTok*rows)
		allocs := testing.AllocsPerRun(10, func() {
			for k := range nTok {
				QuantizeRow(VecDotType(typ), x, xq[k*ab:(k+1)*ab])
			}
			DequantizeRow(typ, m.Row(1), f)
			ks.DotRow(typ, m.Row(2), xq, cols)
			ks.MatVec(m, xq, y, 0, rows)
			ks.MatMul(m, xq, nTok, y, 1, rows)
		})
		require.Zero(t, allocs, "%v", typ)
	}
}

func TestRowBytes(t *testing.T) {
	require.Equal(t, 36*4, RowBytes(gguf.Q8_1, 128))
	require.Equal(t, 292*2, ActivationBytes(gguf.Q4_K, 512))
	require.Equal(t, 34*2, ActivationBytes(gguf.IQ4_NL, 64))
	require.Equal(t, 4*10, ActivationBytes(gguf.F32, 10))
	// Our layouts agree with gguf's traits for every weight type.
	for _, typ := range weightTypes {
		bs, bb := blockGeom(typ)
		require.Equal(t, typ.BlockSize(), bs, "%v", typ)
		require.Equal(t, typ.BlockBytes(), bb, "%v", typ)
	}
}

// TestMatMulTiles uses rows wide enough that the token tile (matMulTileBytes
// of activations) is smaller than the token count, so tiles break mid-way.
func TestMatMulTiles(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(17, 18))
	for _, typ := range []gguf.Type{gguf.F32, gguf.Q8_0, gguf.Q4_K} {
		const rows, cols = 5, 4096
		ab := ActivationBytes(typ, cols)
		nTok := matMulTileBytes/ab*2 + 3
		m := &Matrix{Type: typ, Rows: rows, Cols: cols}
		for range rows {
			m.Data = append(m.Data, randomRow(rng, typ, cols)...)
		}
		xq := make([]byte, nTok*ab)
		for k := range nTok {
			QuantizeRow(VecDotType(typ), randomFloats(rng, cols, 1), xq[k*ab:(k+1)*ab])
		}
		y := make([]float32, nTok*rows)
		ks.MatMul(m, xq, nTok, y, 1, rows)
		for k := range nTok {
			require.Zero(t, y[k*rows], "%v: row 0 is outside the range", typ)
			for r := 1; r < rows; r++ {
				want, scale := refDot(typ, m.Row(r), xq[k*ab:(k+1)*ab], cols)
				require.InDelta(t, want, y[k*rows+r], 1e-5*scale, "%v token %d row %d", typ, k, r)
			}
		}
	}
}
