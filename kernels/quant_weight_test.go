package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// quantizableTypes are the weight types QuantizeWeightRow supports.
var quantizableTypes = []gguf.Type{gguf.F16, gguf.BF16, gguf.Q2_K, gguf.Q3_K, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q8_0, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ4_NL, gguf.IQ4_XS}

// TestQuantvecQuantizeWeights quantizes quantvec's src rows and compares
// with ggml's own quantization T.q, block by block, and the dequantized
// result with T.deq.
func TestQuantvecQuantizeWeights(t *testing.T) {
	q := openQuantvec(t)
	src := q.f32(t, "src")
	for _, typ := range quantizableTypes {
		t.Run(typ.String(), func(t *testing.T) {
			want := q.tensor(t, typ.String()+".q")
			deq := q.f32(t, typ.String()+".deq")
			_, bb := blockGeom(typ)
			got := make([]byte, len(want.Data))
			rb := len(got) / q.rows
			for r := range q.rows {
				QuantizeWeightRow(typ, src[r*q.cols:(r+1)*q.cols], got[r*rb:(r+1)*rb])
			}
			same := 0
			for b := 0; b < len(got)/bb; b++ {
				if string(got[b*bb:(b+1)*bb]) == string(want.Data[b*bb:(b+1)*bb]) {
					same++
				}
			}
			// ggml's reference quantizers are deterministic float32 code; ours
			// repeat their arithmetic, so the blocks agree byte for byte.
			require.Equal(t, len(got)/bb, same, "%v: blocks identical to ggml's quantization", typ)
			f := make([]float32, q.cols)
			for r := range q.rows {
				DequantizeRow(typ, got[r*rb:(r+1)*rb], f)
				for i, v := range f {
					require.InDelta(t, deq[r*q.cols+i], v, 1e-6, "row %d [%d]", r, i)
				}
			}
		})
	}
}

// TestQuantizeRoundTrip quantizes Gaussian rows and bounds the relative RMS
// error of the dequantized values by uniform quantization noise (step/sqrt(12))
// for each format's step, with a margin: a step of about 4 sigma / levels for
// min/max formats over 32 values, 2*amax/levels for symmetric ones.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	bound := map[gguf.Type]float64{
		gguf.F16:    0x1p-11, // half an ulp at 11 significant bits
		gguf.BF16:   0x1p-8,
		gguf.Q2_K:   0.45,  // 4 levels over 16 values, range ~3.5 sigma: ~0.34
		gguf.Q3_K:   0.25,  // step amax/4 over 16 values, amax ~1.8 sigma: ~0.13
		gguf.Q8_0:   0.010, // step amax/127, amax ~2.5 sigma: noise ~0.006
		gguf.Q4_0:   0.13,  // step amax/8: ~0.09
		gguf.Q4_1:   0.11,  // step range/15, range ~4 sigma: ~0.077
		gguf.Q5_0:   0.065, // step amax/16: ~0.045
		gguf.Q5_1:   0.055, // step range/31: ~0.037
		gguf.Q4_K:   0.11,  // as Q4_1 plus 6-bit scales and mins
		gguf.Q5_K:   0.055, // as Q5_1 plus 6-bit scales and mins
		gguf.Q6_K:   0.03,  // step amax/32 over 16 values: ~0.018
		gguf.IQ4_NL: 0.12,  // 16 non-uniform levels over 32 values: about Q4_0's
		gguf.IQ4_XS: 0.12,
	}
	const n = 4096
	for _, typ := range quantizableTypes {
		x := randomFloats(rng, n, 0.02)
		x[7] = 0.5 // an outlier in one block
		for i := 1024; i < 1024+256; i++ {
			x[i] = 0 // an all-zero block
		}
		q := make([]byte, RowBytes(typ, n))
		QuantizeWeightRow(typ, x, q)
		y := make([]float32, n)
		DequantizeRow(typ, q, y)
		var se, sx float64
		for i := range x {
			d := float64(y[i]) - float64(x[i])
			se += d * d
			sx += float64(x[i]) * float64(x[i])
			if x[i] == 0 && i >= 1024 && i < 1024+256 {
				require.Zero(t, y[i], "%v: zero block stays zero", typ)
			}
		}
		rel := math.Sqrt(se / sx)
		t.Logf("%v: relative RMS error %.4f", typ, rel)
		require.Less(t, rel, bound[typ], "%v", typ)
		// QuantizeRow agrees with QuantizeWeightRow except Q8_0's rounding
		// (activation path); there it may differ only by one level at ties.
		q2 := make([]byte, len(q))
		QuantizeRow(typ, x, q2)
		if typ != gguf.Q8_0 {
			require.Equal(t, q, q2, "%v", typ)
		}
		require.Zero(t, testing.AllocsPerRun(3, func() { QuantizeWeightRow(typ, x, q) }), "%v allocates", typ)
	}
}
