package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dequantQ8_2 expands ActQ8_2 blocks to d*q.
func dequantQ8_2(a []byte, n int) []float32 {
	out := make([]float32, n)
	for b := 0; b < n/qk32; b++ {
		d, _, qs := q8_2Block(a, b)
		for i := 0; i < qk32; i++ {
			out[b*qk32+i] = d * float32(int8(qs[i]))
		}
	}
	return out
}

// TestQuantizeQ8_2 checks the activation format block by block: the scale is
// bf16(amax/127) (the bf16 rounding can only shrink the quants' range to
// 127.5, so nothing saturates), every quant is x/d rounded to nearest with
// ties to even, and the stored sum is the sum of the quants. Blocks include
// zeros, exact ties and tiny and huge magnitudes.
func TestQuantizeQ8_2(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	const nb = 64
	x := randomFloats(rng, nb*qk32, 2)
	clear(x[0:qk32]) // an all-zero block
	// A block of exact ties: with amax 127 the scale is 1 (bf16 exact).
	for i := 0; i < qk32; i++ {
		x[qk32+i] = float32(i%8) - 3.5
	}
	x[qk32] = 127
	for i := range qk32 {
		x[2*qk32+i] *= 1e-30
		x[3*qk32+i] *= 1e30
	}
	dst := make([]byte, nb*bytesQ8_2)
	QuantizeQ8_2(x, dst)
	for b := 0; b < nb; b++ {
		blk := x[b*qk32 : (b+1)*qk32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d, sum, qs := q8_2Block(dst, b)
		require.Equal(t, BF16ToF32(F32ToBF16(amax/127)), d, "block %d scale", b)
		var want int32
		for i, v := range blk {
			q := int32(int8(qs[i]))
			want += q
			if d == 0 {
				require.Zero(t, q)
				continue
			}
			r := float64(v * (1 / d))
			require.LessOrEqual(t, math.Abs(r-float64(q)), 0.5, "block %d value %d", b, i)
			if math.Abs(r-float64(q)) == 0.5 {
				require.Zero(t, q%2, "block %d value %d: a tie goes to even", b, i)
			}
			require.LessOrEqual(t, math.Abs(r), 127.5)
		}
		require.Equal(t, want, int32(sum), "block %d sum", b)
	}
	_, _, qs := q8_2Block(dst, 1)
	assert.Equal(t, []int8{-4, -2, -2, 0, 0, 2, 2, 4}, []int8{int8(qs[8]), int8(qs[9]), int8(qs[10]), int8(qs[11]),
		int8(qs[12]), int8(qs[13]), int8(qs[14]), int8(qs[15])}, "ties to even")
}

// TestIkDots checks each ik-order product against the float64 dot of the
// dequantized weights and activations, for whole groups of four blocks and
// for q8_0 rows with leftover blocks (ik's one-block path), and that a
// layout's Dot is its row product per token.
func TestIkDots(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	for _, tc := range []struct {
		t    gguf.Type
		cols int
	}{
		{gguf.Q8_0, 256}, {gguf.Q8_0, 96}, {gguf.Q8_0, 160}, {gguf.Q8_0, 32},
		{gguf.Q4_K, 256}, {gguf.Q4_K, 768}, {gguf.Q6_K, 256}, {gguf.Q6_K, 512},
	} {
		l := PackedIk(tc.t)
		require.NotNil(t, l, "%v", tc.t)
		assert.Equal(t, ActQ8_2, l.Act)
		rb := RowBytes(tc.t, tc.cols)
		ab := tc.cols / qk32 * bytesQ8_2
		const nTok = 3
		x := make([]byte, nTok*ab)
		xf := make([][]float32, nTok)
		for k := range nTok {
			QuantizeQ8_2(randomFloats(rng, tc.cols, 3), x[k*ab:(k+1)*ab])
			xf[k] = dequantQ8_2(x[k*ab:], tc.cols)
		}
		for r := 0; r < 8; r++ {
			w := make([]byte, rb)
			QuantizeRow(tc.t, randomFloats(rng, tc.cols, 1), w)
			wf := make([]float32, tc.cols)
			DequantizeRow(tc.t, w, wf)
			y := make([]float32, 2*nTok)
			l.Dot(tc.cols, w, x, ab, nTok, y, 2)
			for k := range nTok {
				var ref, mag float64
				for i := range wf {
					ref += float64(wf[i]) * float64(xf[k][i])
					mag += math.Abs(float64(wf[i]) * float64(xf[k][i]))
				}
				assert.InDelta(t, ref, float64(y[2*k]), 1e-5*mag+1e-30, "%v cols %d row %d token %d", tc.t, tc.cols, r, k)
			}
		}
	}
	assert.Nil(t, PackedIk(gguf.Q4_1))
	m := &Matrix{Type: gguf.Q4_K, Rows: 1, Cols: 512, Layout: PackedIk(gguf.Q4_K)}
	assert.Equal(t, ActQ8_2, ActType(m))
	assert.Equal(t, 16*bytesQ8_2, ActBytes(m, 512))
	m.Layout = nil
	assert.Equal(t, gguf.Q8_K, ActType(m))
	assert.Equal(t, ActivationBytes(gguf.Q4_K, 512), ActBytes(m, 512))
}

// TestIkFloatOps checks the ik variants of RMS norm, GELU and RoPE against
// float64 formulas: they differ from the ggml ones only in rounding.
func TestIkFloatOps(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(17, 19))
	x := randomFloats(rng, 256, 2)
	w := randomFloats(rng, 256, 1)
	got := make([]float32, 256)
	RMSNormIk(got, x, w, 1e-6)
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	sc := 1 / math.Sqrt(ss/256+1e-6)
	for i := range x {
		assert.InDelta(t, sc*float64(w[i])*float64(x[i]), float64(got[i]), 1e-6*math.Abs(sc*float64(w[i]*x[i]))+1e-12)
	}
	// GELU, tanh form, including where ik returns x unchanged (u > 30).
	g := append(randomFloats(rng, 64, 3), 0, -0.5, 20, -20, 9, -9)
	out := make([]float32, len(g))
	GELUIk(out, g)
	for i, v := range g {
		f := float64(v)
		want := 0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*f*(1+0.044715*f*f)))
		assert.InDelta(t, want, float64(out[i]), 2e-6*math.Abs(want)+1e-7, "gelu(%g)", v)
	}
	assert.Equal(t, float32(20), out[len(g)-4])
	// RoPE: the normal layout unfused, NeoX as RoPEApply.
	cache := make([]float32, 64)
	RoPECache(RoPEParams{NDims: 64, FreqBase: 10000, FreqScale: 1}, 7, cache)
	q := randomFloats(rng, 128, 1)
	a, b := append([]float32(nil), q...), append([]float32(nil), q...)
	ks.RoPEApplyIk(a, 64, 2, cache, true)
	ks.RoPEApply(b, 64, 2, cache, true)
	assert.Equal(t, b, a)
	a = append(a[:0], q...)
	ks.RoPEApplyIk(a, 64, 2, cache, false)
	for i := 0; i < 128; i += 2 {
		c, s := cache[i%64], cache[i%64+1]
		assert.Equal(t, float32(q[i]*c)-float32(q[i+1]*s), a[i])
		assert.Equal(t, float32(q[i]*s)+float32(q[i+1]*c), a[i+1])
		assert.InDelta(t, float64(q[i])*float64(c)-float64(q[i+1])*float64(s), float64(a[i]), 1e-6)
	}
}

// TestQ8_2Layout pins the block bytes: bf16 scale, int16 sum, 32 quants.
func TestQ8_2Layout(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1] = 127, -1
	dst := make([]byte, bytesQ8_2)
	QuantizeQ8_2(x, dst)
	assert.Equal(t, uint16(0x3f80), binary.LittleEndian.Uint16(dst[0:])) // bf16 1.0
	assert.Equal(t, uint16(126), binary.LittleEndian.Uint16(dst[2:]))
	assert.Equal(t, byte(127), dst[4])
	assert.Equal(t, byte(0xff), dst[5])
}
