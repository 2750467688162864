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

// ggmlOrderCase is a random matrix of one weight type with random
// activations for nTok tokens, quantized as the engine does.
type ggmlOrderCase struct {
	t          gguf.Type
	rows, cols int
	w, xq      []byte
	wf, xf     []float32 // dequantized weights and activations
	ab         int
}

func newGGMLOrderCase(t gguf.Type, rows, cols, nTok int, seed uint64) *ggmlOrderCase {
	r := rand.New(rand.NewPCG(seed, 7))
	c := &ggmlOrderCase{t: t, rows: rows, cols: cols, ab: ActivationBytes(t, cols)}
	rb := RowBytes(t, cols)
	c.w = make([]byte, rows*rb)
	c.wf = make([]float32, rows*cols)
	src := make([]float32, cols)
	for i := range rows {
		for j := range src {
			src[j] = float32(r.NormFloat64())
		}
		QuantizeRow(t, src, c.w[i*rb:(i+1)*rb])
		DequantizeRow(t, c.w[i*rb:(i+1)*rb], c.wf[i*cols:(i+1)*cols])
	}
	vt := VecDotType(t)
	c.xq = make([]byte, nTok*c.ab)
	c.xf = make([]float32, nTok*cols)
	for i := range nTok {
		for j := range src {
			src[j] = float32(r.NormFloat64() * 3)
		}
		QuantizeRow(vt, src, c.xq[i*c.ab:(i+1)*c.ab])
		DequantizeRow(vt, c.xq[i*c.ab:(i+1)*c.ab], c.xf[i*cols:(i+1)*cols])
	}
	return c
}

// run multiplies all rows by the first nTok tokens with layout l, one Dot
// call per row as matMulPacked makes them.
func (c *ggmlOrderCase) run(l *PackedLayout, nTok int) []float32 {
	rb := RowBytes(c.t, c.cols)
	y := make([]float32, nTok*c.rows)
	for r := range c.rows {
		l.Dot(c.cols, c.w[r*rb:(r+1)*rb], c.xq, c.ab, nTok, y[r:], c.rows)
	}
	return y
}

// TestGGMLOrderValues checks every ggml-order kernel path against the
// float64 product of the dequantized weights and activations: the paths
// differ from each other only in float32 rounding, so each must be within
// a few float32 ulps of the sum of magnitudes of the exact result. A wrong
// nibble, scale, min or offset is off by far more.
func TestGGMLOrderValues(t *testing.T) {
	for _, tc := range []struct {
		typ  gguf.Type
		rows int
		o    GGMLOrder
		name string
	}{
		{gguf.Q8_0, 5, GGMLRepack, "q8_0.ggml-vecdot.v1"},
		{gguf.Q4_1, 5, GGMLRepack, "q4_1.ggml-vecdot.v1"},
		{gguf.Q5_0, 5, GGMLRepack, "q5_0.ggml-vecdot.v1"},
		{gguf.Q4_K, 8, GGMLRepack, "q4_K.ggml-8x8.v1"},
		{gguf.Q4_K, 6, GGMLRepack, "q4_K.ggml-vecdot-tiled.v1"},
		{gguf.Q4_K, 8, GGMLVecDot, "q4_K.ggml-vecdot-tiled.v1"},
		{gguf.Q6_K, 8, GGMLRepack, "q6_K.ggml-vecdot-tiled.v1"},
		{gguf.MXFP4, 8, GGMLRepack, "mxfp4.ggml-vecdot.v1"},
	} {
		l := PackedExact(tc.typ, tc.rows, tc.o)
		require.NotNil(t, l, "%v", tc.typ)
		assert.Equal(t, tc.name, l.Name)
		assert.Equal(t, 1, l.Rows)
		assert.Equal(t, RowBytes(tc.typ, 768), l.GroupBytes(768))
		// 1, 3, 5 tokens: vec_dot or gemv/gemm mixes; 9 and 13: tiled, or
		// gemm with a gemv remainder.
		for _, nTok := range []int{1, 3, 5, 9, 13} {
			c := newGGMLOrderCase(tc.typ, tc.rows, 768, nTok, uint64(nTok))
			y := c.run(l, nTok)
			for tok := range nTok {
				for r := range tc.rows {
					var exact, mag float64
					if tc.typ == gguf.Q4_1 {
						exact, mag = q41Exact(c, r, tok)
					} else {
						for j := range c.cols {
							p := float64(c.wf[r*c.cols+j]) * float64(c.xf[tok*c.cols+j])
							exact += p
							mag += math.Abs(p)
						}
					}
					assert.InDelta(t, exact, float64(y[tok*tc.rows+r]), 1e-5*mag, "%s: %d tokens, token %d row %d", l.Name, nTok, tok, r)
				}
			}
		}
	}
	assert.Nil(t, PackedExact(gguf.Q5_1, 8, GGMLRepack), "no ggml-order layout for q5_1")
}

// q41Exact is the float64 value of ggml's q4_1 x q8_1 product of row r and
// token tok, which takes each block's min term through the activation's f16
// sum s rather than the sum of its dequantized values: sum over blocks of
// d*d'*(q . a) + m*s.
func q41Exact(c *ggmlOrderCase, r, tok int) (exact, mag float64) {
	rb := RowBytes(gguf.Q4_1, c.cols)
	w, x := c.w[r*rb:(r+1)*rb], c.xq[tok*c.ab:(tok+1)*c.ab]
	for b := range c.cols / 32 {
		wb, yb := w[b*20:], x[b*36:]
		var dot float64
		for e := range 32 {
			q := wb[4+e%16] & 0xf
			if e >= 16 {
				q = wb[4+e%16] >> 4
			}
			p := float64(f16At(wb)) * float64(f16At(yb)) * float64(q) * float64(int8(yb[4+e]))
			dot += p
			mag += math.Abs(p)
		}
		ms := float64(f16At(wb[2:])) * float64(f16At(yb[2:]))
		exact += dot + ms
		mag += math.Abs(ms)
	}
	return exact, mag
}

// TestGGMLOrderBatchRule checks that a token's result depends on the batch
// as llama.cpp's kernel choice does: q4_K/q6_K switch from vec_dot to the
// tiled kernel at 8 tokens, q4_K_8x8 takes gemm for the tokens in whole
// groups of 4 and gemv for the rest, q8_0 never changes.
func TestGGMLOrderBatchRule(t *testing.T) {
	single := func(l *PackedLayout, c *ggmlOrderCase, tok int) []float32 {
		one := *c
		one.xq = c.xq[tok*c.ab : (tok+1)*c.ab]
		return one.run(l, 1)
	}
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q6_K} {
		l := PackedExact(typ, 6, GGMLVecDot)
		c := newGGMLOrderCase(typ, 6, 1024, 8, 11)
		small, big := c.run(l, 7), c.run(l, 8)
		differ := 0
		for tok := range 7 {
			assert.Equal(t, single(l, c, tok), small[tok*6:(tok+1)*6], "%v: under 8 tokens every token is vec_dot's", typ)
			for r := range 6 {
				if small[tok*6+r] != big[tok*6+r] {
					differ++
				}
			}
		}
		assert.Positive(t, differ, "%v: the tiled order (8 tokens) differs somewhere from vec_dot's", typ)
	}
	l := PackedExact(gguf.Q4_K, 8, GGMLRepack)
	c := newGGMLOrderCase(gguf.Q4_K, 8, 1024, 6, 12)
	y := c.run(l, 6)
	differ := 0
	for tok := range 6 {
		one := single(l, c, tok) // gemv
		if tok >= 4 {
			assert.Equal(t, one, y[tok*8:(tok+1)*8], "token %d of 6 is gemv's", tok)
			continue
		}
		for r := range 8 {
			if one[r] != y[tok*8+r] {
				differ++
			}
		}
	}
	assert.Positive(t, differ, "gemm (tokens 0-3 of 6) differs somewhere from gemv")
	l = PackedExact(gguf.Q8_0, 4, GGMLRepack)
	c = newGGMLOrderCase(gguf.Q8_0, 4, 1024, 9, 13)
	y = c.run(l, 9)
	for tok := range 9 {
		assert.Equal(t, single(l, c, tok), y[tok*4:(tok+1)*4], "q8_0 token %d", tok)
	}
}

func TestGGMLOrderNoAlloc(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K} {
		for _, o := range []GGMLOrder{GGMLRepack, GGMLVecDot} {
			l := PackedExact(typ, 8, o)
			c := newGGMLOrderCase(typ, 1, 512, 9, 3)
			y := make([]float32, 9)
			for _, nTok := range []int{1, 9} {
				allocs := testing.AllocsPerRun(10, func() { l.Dot(c.cols, c.w, c.xq, c.ab, nTok, y, 1) })
				assert.Zero(t, allocs, "%s, %d tokens", l.Name, nTok)
			}
		}
	}
}

func BenchmarkGGMLOrder(b *testing.B) {
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_K, gguf.Q6_K} {
		for _, nTok := range []int{1, 16} {
			l := PackedExact(typ, 8, GGMLRepack)
			c := newGGMLOrderCase(typ, 8, 2048, nTok, 5)
			b.Run(l.Name+"/"+map[bool]string{true: "1tok", false: "16tok"}[nTok == 1], func(b *testing.B) {
				rb := RowBytes(typ, c.cols)
				y := make([]float32, nTok*8)
				b.SetBytes(int64(8 * rb))
				for b.Loop() {
					for r := range 8 {
						l.Dot(c.cols, c.w[r*rb:(r+1)*rb], c.xq, c.ab, nTok, y[r:], 8)
					}
				}
			})
		}
	}
}

// TestGGMLOrderWholeBatch checks that MatMul hands a ggml-order layout the
// whole batch (up to llama.cpp's 512-token micro-batch) in one Dot call, so
// the kernel choice follows the batch's size: in a batch of 133 q6_K
// tokens the last 5 take the tiled order, as llama.cpp computes them,
// not vec_dot's, which a 5-token piece would get.
func TestGGMLOrderWholeBatch(t *testing.T) {
	const rows, nTok = 4, 133
	l := PackedExact(gguf.Q6_K, rows, GGMLVecDot)
	c := newGGMLOrderCase(gguf.Q6_K, rows, 512, nTok, 21)
	m := &Matrix{Type: gguf.Q6_K, Rows: rows, Cols: c.cols, Data: c.w, Packed: c.w, Layout: l}
	y := make([]float32, nTok*rows)
	genericSet.MatMul(m, c.xq, nTok, y, 0, rows)
	require.Equal(t, c.run(l, nTok), y, "MatMul against one Dot call of the whole batch")
	tail := *c
	tail.xq = c.xq[(nTok-5)*c.ab:]
	assert.NotEqual(t, tail.run(l, 5), y[(nTok-5)*rows:], "the 5-token vec_dot order differs somewhere from the tiled one")
}

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

// TestGGMLQ4K8x8TieSignIrrelevant: llama.cpp quantizes the activations of
// its repacked q4_K products with ggml_quantize_mat_q8_K_4x8, which breaks
// a tie between +max and -max for the positive one, where
// quantize_row_q8_K (what the engine makes) takes the first. The two
// blocks are then exact negations (d, every quant and every block sum),
// and every product of the layout is sign-symmetric, so both give the same
// bits: that difference cannot move a logit.
func TestGGMLQ4K8x8TieSignIrrelevant(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 786))
	const cols, nTok = 512, 7
	w := make([]byte, RowBytes(gguf.Q4_K, cols))
	simdRandomRow(r, gguf.Q4_K, w)
	ab := RowBytes(gguf.Q8_K, cols)
	x, neg := make([]byte, nTok*ab), make([]byte, nTok*ab)
	src := make([]float32, cols)
	for tok := range nTok {
		for i := range src {
			src[i] = float32(r.NormFloat64())
		}
		for b := range cols / 256 {
			src[256*b+3], src[256*b+200] = -5, 5 // a tie, the negative first
		}
		xt := x[tok*ab : (tok+1)*ab]
		QuantizeRow(gguf.Q8_K, src, xt)
		nt := neg[tok*ab : (tok+1)*ab]
		for b := range cols / 256 {
			blk, nb := xt[b*q8KBlock:(b+1)*q8KBlock], nt[b*q8KBlock:(b+1)*q8KBlock]
			d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
			require.Greater(t, d, float32(0), "quantize_row_q8_K takes the first of the tie, the negative one")
			binary.LittleEndian.PutUint32(nb, math.Float32bits(-d))
			for i := range 256 {
				nb[4+i] = byte(-int8(blk[4+i]))
			}
			for i := range 16 {
				binary.LittleEndian.PutUint16(nb[260+2*i:], uint16(-int16(binary.LittleEndian.Uint16(blk[260+2*i:]))))
			}
		}
	}
	for n := 1; n <= nTok; n++ {
		y1, y2 := make([]float32, n), make([]float32, n)
		ggmlDotQ4K8x8(cols, w, x, ab, n, y1, 1)
		ggmlDotQ4K8x8(cols, w, neg, ab, n, y2, 1)
		for i := range n {
			assert.Equal(t, math.Float32bits(y1[i]), math.Float32bits(y2[i]), "%d tokens, token %d: %g vs %g", n, i, y1[i], y2[i])
		}
	}
}
