package kernels

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// mxfp4Vectors are testdata/mxfp4.json, made by testdata/make_mxfp4.py
// from gguf-py's implementation of ggml's MXFP4.
type mxfp4Vectors struct {
	Blocks  []byte   `json:"blocks"`
	Dequant []string `json:"dequant"`
	Values  []string `json:"values"`
	Quant   []byte   `json:"quant"`
}

func loadMXFP4(t *testing.T) mxfp4Vectors {
	b, err := os.ReadFile("testdata/mxfp4.json")
	require.NoError(t, err)
	var v mxfp4Vectors
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

func hexFloats(t *testing.T, s []string) []float32 {
	out := make([]float32, len(s))
	for i, h := range s {
		f, err := strconv.ParseFloat(h, 64)
		require.NoError(t, err, h)
		out[i] = float32(f)
	}
	return out
}

// TestE8M0Half: every scale byte is 2^(e-128), subnormals included.
func TestE8M0Half(t *testing.T) {
	for e := 0; e < 256; e++ {
		assert.Equal(t, float32(math.Ldexp(1, e-128)), e8m0Half(uint8(e)), "e = %d", e)
	}
}

// TestMXFP4Dequant: bit-exact against ggml's definition on blocks with
// every scale byte and random codes.
func TestMXFP4Dequant(t *testing.T) {
	v := loadMXFP4(t)
	want := hexFloats(t, v.Dequant)
	require.Equal(t, len(v.Blocks)/bytesMXFP4*qk32, len(want))
	got := make([]float32, len(want))
	DequantizeRow(gguf.MXFP4, v.Blocks, got)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("value %d (block %d, scale byte %d): %v, want %v", i, i/qk32, v.Blocks[i/qk32*bytesMXFP4], got[i], want[i])
		}
	}
}

// TestMXFP4Quantize: the reference quantizer writes ggml's bytes.
func TestMXFP4Quantize(t *testing.T) {
	v := loadMXFP4(t)
	vals := hexFloats(t, v.Values)
	got := make([]byte, len(vals)/qk32*bytesMXFP4)
	QuantizeRow(gguf.MXFP4, vals, got)
	require.Equal(t, len(v.Quant), len(got))
	for i := range got {
		if got[i] != v.Quant[i] {
			t.Fatalf("byte %d (block %d): %#x, want %#x", i, i/bytesMXFP4, got[i], v.Quant[i])
		}
	}
}

// TestMXFP4Dot: the MXFP4 x Q8_0 row dot equals the dot of the
// dequantized rows (in float64) to float32 accuracy, and MatVec of every
// kernel set gives the generic dot.
func TestMXFP4Dot(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 1))
	const n, rows = 256, 8
	w := make([]float32, n*rows)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	wq := make([]byte, rows*n/qk32*bytesMXFP4)
	QuantizeRow(gguf.MXFP4, w, wq)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xq := make([]byte, ActivationBytes(gguf.MXFP4, n))
	QuantizeRow(VecDotType(gguf.MXFP4), x, xq)
	wd := make([]float32, n)
	xd := make([]float32, n)
	DequantizeRow(gguf.Q8_0, xq, xd)
	m := &Matrix{Type: gguf.MXFP4, Rows: rows, Cols: n, Data: wq}
	want := make([]float32, rows)
	for r := range rows {
		DequantizeRow(gguf.MXFP4, m.Row(r), wd)
		var ref float64
		for i := range wd {
			ref += float64(wd[i]) * float64(xd[i])
		}
		want[r] = dotMXFP4Generic(n, m.Row(r), xq)
		assert.InDelta(t, ref, float64(want[r]), 1e-5*max(1, math.Abs(ref)), "row %d", r)
	}
	for _, ks := range testSets(t) {
		y := make([]float32, rows)
		ks.MatVec(m, xq, y, 0, rows)
		assert.Equal(t, want, y, "set %s", ks.Name())
	}
}

// TestMXFP4GGMLOrderOddBlocks checks the ggml-order MXFP4 dot on rows of
// an odd number of blocks (the last one through ggml's scalar tail)
// against the float64 product.
func TestMXFP4GGMLOrderOddBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 2))
	for _, n := range []int{32, 96, 160} {
		w, x := make([]float32, n), make([]float32, n)
		for i := range w {
			w[i], x[i] = float32(rng.NormFloat64()*0.05), float32(rng.NormFloat64())
		}
		wq := make([]byte, n/qk32*bytesMXFP4)
		QuantizeRow(gguf.MXFP4, w, wq)
		xq := make([]byte, ActivationBytes(gguf.MXFP4, n))
		QuantizeRow(gguf.Q8_0, x, xq)
		wd, xd := make([]float32, n), make([]float32, n)
		DequantizeRow(gguf.MXFP4, wq, wd)
		DequantizeRow(gguf.Q8_0, xq, xd)
		var ref, mag float64
		for i := range wd {
			ref += float64(wd[i]) * float64(xd[i])
			mag += math.Abs(float64(wd[i]) * float64(xd[i]))
		}
		var y [1]float32
		ggmlDotMXFP4(n, wq, xq, 0, 1, y[:], 0)
		assert.InDelta(t, ref, float64(y[0]), 1e-6*mag, "%d values", n)
	}
}

// TestMatMulF32GGML checks the llama.cpp-order F32 product: a batch of
// two or more tokens in tinyBLAS's order when the rows allow it (a
// multiple of 16 values, of 4 rows), else ggml_vec_dot_f32's, bit for bit
// as the pure-Go definitions of those orders.
func TestMatMulF32GGML(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	forSets(t, func(t *testing.T, ks *Set) {
		for _, c := range []struct{ rows, cols, nTok int }{{8, 256, 1}, {8, 256, 3}, {6, 256, 3}, {8, 72, 2}, {4, 100, 1}} {
			w := make([]float32, c.rows*c.cols)
			x := make([]float32, c.nTok*c.cols)
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			m := &Matrix{Type: gguf.F32, Rows: c.rows, Cols: c.cols, Data: f32Bytes(w)}
			y := make([]float32, c.nTok*c.rows)
			ks.MatMulF32GGML(m, f32Bytes(x), c.nTok, y, 1, c.rows)
			for tok := range c.nTok {
				assert.Zero(t, y[tok*c.rows], "row 0 is not asked for")
				for r := 1; r < c.rows; r++ {
					a, b := x[tok*c.cols:(tok+1)*c.cols], w[r*c.cols:(r+1)*c.cols]
					want := attnDotF32SingleGeneric(a, b, false)
					if c.nTok >= 2 && c.cols%16 == 0 && c.rows%4 == 0 {
						want = attnDotF32Generic(a, b)
					}
					require.Equal(t, want, y[tok*c.rows+r], "%+v token %d row %d", c, tok, r)
				}
			}
		}
	})
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// TestMXFP4SIMDIsGGMLOrder: on rows of an even number of blocks the SIMD
// kernels sum exactly as ggml_vec_dot_mxfp4_q8_0 (ggmlDotMXFP4), over
// random blocks with scales across a wide range.
func TestMXFP4SIMDIsGGMLOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 3))
	forSets(t, func(t *testing.T, ks *Set) {
		if ks.types[gguf.MXFP4].rows == nil {
			t.Skipf("set %s has no MXFP4 kernel (the generic twin sums in its own order)", ks.Name())
		}
		for _, n := range []int{64, 128, 2880} {
			const rows = 5
			w, stride, xq := simdRows(r, gguf.MXFP4, n, rows, 3)
			for i := 0; i < len(w); i += stride {
				for b := 0; b+bytesMXFP4 <= min(stride, len(w)-i); b += bytesMXFP4 {
					w[i+b] = byte(100 + r.IntN(50))
				}
			}
			y := make([]float32, rows)
			ks.types[gguf.MXFP4].rows(n, w, stride, xq, y)
			for k := range rows {
				var want [1]float32
				ggmlDotMXFP4(n, w[k*stride:], xq, 0, 1, want[:], 0)
				require.Equal(t, want[0], y[k], "n %d row %d", n, k)
			}
		}
	})
}
