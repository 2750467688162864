package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// simdTypes are the weight types with SIMD row-dot kernels, the formats of
// the real models.
var simdTypes = []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q4_K, gguf.Q6_K, gguf.F16, gguf.F32, gguf.MXFP4}

// simdVariants returns the names of the non-generic kernel sets this build
// and CPU support, skipping the test when there are none (non-amd64, or a
// CPU without AVX2).
func simdVariants(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, v := range Available() {
		if v != "generic" {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		t.Skipf("no SIMD kernel set on this machine (sets %v)", Available())
	}
	return out
}

// simdActBytes is the size of n activations of type vt, from ggml's block
// structs rather than gguf's trait table, so the tests do not take the
// sizes from the code they check.
func simdActBytes(vt gguf.Type, n int) int {
	switch vt {
	case gguf.Q8_0:
		return n / 32 * gguf.BytesQ8_0
	case gguf.Q8_1:
		return n / 32 * gguf.BytesQ8_1
	case gguf.Q8_K:
		return n / 256 * gguf.BytesQ8_K
	case gguf.F16:
		return 2 * n
	}
	return 4 * n
}

// simdLengths are the row lengths tested for t: 1 to 7 blocks and, for the
// float types, lengths that exercise every loop tail.
func simdLengths(t gguf.Type) []int {
	if t == gguf.F16 || t == gguf.F32 {
		return []int{1, 7, 8, 9, 31, 32, 33, 63, 100, 576, 1023}
	}
	bs := t.BlockSize()
	return []int{bs, 2 * bs, 3 * bs, 7 * bs}
}

// simdDotBound is the scale the float rounding error of a reordered sum is
// measured against: sum over i of (|a_i| + |o_i|) * |x_i|, where w_i = a_i +
// o_i splits each dequantized weight into its scaled quant a_i and, for the
// formats with block minimums (Q4_1, Q4_K), the offset o_i, because the
// kernels sum those two parts separately.
func simdDotBound(t *testing.T, typ gguf.Type, n int, w, xq []byte) float64 {
	t.Helper()
	wd := make([]float32, n)
	DequantizeRow(typ, w, wd)
	xd := make([]float32, n)
	DequantizeRow(VecDotType(typ), xq, xd)
	off := make([]float32, n)
	var qsFrom, qsTo int // bytes of each block holding the quants
	switch typ {
	case gguf.Q4_1:
		qsFrom, qsTo = 4, 20
	case gguf.Q4_K:
		qsFrom, qsTo = 16, 144
	}
	if qsTo > 0 {
		// Dequantizing with zero quants leaves only the offsets.
		z := append([]byte(nil), w[:len(w)]...)
		bb := typ.BlockBytes()
		for b := 0; b+bb <= len(z); b += bb {
			clear(z[b+qsFrom : b+qsTo])
		}
		DequantizeRow(typ, z, off)
	}
	var s float64
	for i := range n {
		a := float64(wd[i]) - float64(off[i])
		s += (math.Abs(a) + math.Abs(float64(off[i]))) * math.Abs(float64(xd[i]))
	}
	return s
}

// simdRandomRow fills w with random blocks of type typ: random quant bytes and
// finite random f16 scales (the scale-free parts cover their full ranges,
// unlike what a quantizer of smooth data would emit).
func simdRandomRow(r *rand.Rand, typ gguf.Type, w []byte) {
	le := binary.LittleEndian
	half := func(b []byte, mean float64) {
		le.PutUint16(b, F32ToF16(float32(mean*math.Exp(0.5*r.NormFloat64()))))
	}
	switch typ {
	case gguf.F16:
		for i := 0; i < len(w); i += 2 {
			le.PutUint16(w[i:], F32ToF16(float32(r.NormFloat64())))
		}
		return
	case gguf.F32:
		for i := 0; i < len(w); i += 4 {
			le.PutUint32(w[i:], math.Float32bits(float32(r.NormFloat64())))
		}
		return
	}
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	bb := typ.BlockBytes()
	for b := 0; b+bb <= len(w); b += bb {
		blk := w[b : b+bb]
		switch typ {
		case gguf.Q8_0, gguf.Q4_0:
			half(blk, 0.05)
		case gguf.Q4_1:
			half(blk, 0.1)
			half(blk[2:], -0.8) // min
		case gguf.Q4_K:
			half(blk, 0.01)
			half(blk[2:], 0.005) // dmin
		case gguf.Q6_K:
			half(blk[208:], 0.002)
		case gguf.MXFP4:
			blk[0] = byte(118 + r.IntN(8)) // scales 2^-10 to 2^-3
		}
	}
}

// simdRows makes nrows random rows of n values in one buffer with rows
// stride bytes apart (stride may exceed the row size, so the kernels'
// stride handling is exercised), and one activation vector quantized from
// random values.
func simdRows(r *rand.Rand, typ gguf.Type, n, nrows, pad int) (w []byte, stride int, xq []byte) {
	rb := n / typ.BlockSize() * typ.BlockBytes()
	stride = rb + pad
	w = make([]byte, nrows*stride)
	for i := range nrows {
		simdRandomRow(r, typ, w[i*stride:i*stride+rb])
	}
	vt := VecDotType(typ)
	xq = make([]byte, simdActBytes(vt, n))
	src := make([]float32, n)
	for j := range src {
		src[j] = float32(r.NormFloat64())
	}
	QuantizeRow(vt, src, xq)
	return w, stride, xq
}

// checkVariantRows compares, for nrows rows stride bytes apart, the
// dispatched single-row and multi-row kernels with the generic twin. tol is
// relative to simdDotBound; 0 demands equality.
func checkVariantRows(t *testing.T, ks *Set, typ gguf.Type, n int, w []byte, stride, nrows int, xq []byte, tol float64) {
	t.Helper()
	rb := n / typ.BlockSize() * typ.BlockBytes()
	gen := genericSet.RowDot(typ)
	one := ks.RowDot(typ)
	many := ks.types[typ].rows
	require.NotNil(t, many, "no multi-row kernel for %v in %s", typ, ks.Name())
	y := make([]float32, nrows)
	many(n, w, stride, xq, y)
	for i := range nrows {
		row := w[i*stride : i*stride+rb]
		want := gen(n, row, xq)
		got := one(n, row, xq)
		require.Equal(t, math.Float32bits(got), math.Float32bits(y[i]), "row %d: single-row %v and multi-row %v kernels differ", i, got, y[i])
		if tol == 0 {
			require.Equal(t, want, got, "row %d", i)
			continue
		}
		bound := tol * simdDotBound(t, typ, n, row, xq)
		require.InDelta(t, want, got, bound, "row %d (generic %v, %s %v, allowed %g)", i, want, ks.Name(), got, bound)
	}
}

// TestSIMDMatchesGeneric: every SIMD kernel against the pure-Go twin on
// random quantized rows, odd row counts and padded row strides. Integer
// parts are exact, so the difference is float32 summation order only:
// bounded by 1e-5 of sum |w_i x_i| (simdDotBound).
func TestSIMDMatchesGeneric(t *testing.T) {
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			for _, n := range simdLengths(typ) {
				for _, nrows := range []int{1, 3, 7} {
					t.Run(fmt.Sprintf("%s/%v/n=%d/rows=%d", v, typ, n, nrows), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(n), uint64(nrows)*uint64(typ+1)))
						w, stride, xq := simdRows(r, typ, n, nrows, nrows%3)
						checkVariantRows(t, ks, typ, n, w, stride, nrows, xq, 1e-5)
					})
				}
			}
		}
	}
}

// simdF16Of returns the half bits of an integer-valued f, which must be exact.
func simdF16Of(t *testing.T, f float32) uint16 {
	h := F32ToF16(f)
	require.Equal(t, f, F16ToF32(h), "%v is not exact in f16", f)
	return h
}

// simdIntRow builds nb blocks of weights of type typ and matching activations
// whose scales are all 1 and whose quants are random within the given
// ranges; then every partial sum is an integer below 2^24, exact in
// float32, and every kernel must return the same integer. extreme picks
// only the ends of each range.
func simdIntRow(t *testing.T, r *rand.Rand, typ gguf.Type, nb int, extreme bool) (n int, w, xq []byte) {
	t.Helper()
	pick := func(lo, hi int) int {
		if extreme {
			if r.IntN(2) == 0 {
				return lo
			}
			return hi
		}
		return lo + r.IntN(hi-lo+1)
	}
	one := simdF16Of(t, 1)
	le := binary.LittleEndian
	n = nb * typ.BlockSize()
	w = make([]byte, nb*typ.BlockBytes())
	vt := VecDotType(typ)
	xq = make([]byte, simdActBytes(vt, n))
	// Activations.
	switch vt {
	case gguf.Q8_0, gguf.Q8_1:
		hdr := 2
		if vt == gguf.Q8_1 {
			hdr = 4
		}
		for b := range n / 32 {
			x := xq[b*simdActBytes(vt, 32):]
			le.PutUint16(x, one)
			sum := 0
			for j := range 32 {
				q := pick(-127, 127)
				sum += q
				x[hdr+j] = byte(int8(q))
			}
			if vt == gguf.Q8_1 {
				le.PutUint16(x[2:], F32ToF16(float32(sum))) // ggml rounds d*sum to f16 too
			}
		}
	case gguf.Q8_K:
		lim := 16 // |sum| < 2^24 over 3 blocks for Q4_K and Q6_K
		for b := range n / 256 {
			x := xq[b*292:]
			le.PutUint32(x, math.Float32bits(1))
			for g := range 16 {
				s := 0
				for j := range 16 {
					q := pick(-lim, lim-1)
					s += q
					x[4+16*g+j] = byte(int8(q))
				}
				le.PutUint16(x[260+2*g:], uint16(int16(s)))
			}
		}
	case gguf.F16:
		for i := range n {
			le.PutUint16(xq[2*i:], simdF16Of(t, float32(pick(-64, 64))))
		}
	case gguf.F32:
		for i := range n {
			le.PutUint32(xq[4*i:], math.Float32bits(float32(pick(-100, 100))))
		}
	}
	// Weights.
	bb := typ.BlockBytes()
	for b := range nb {
		blk := w[b*bb : (b+1)*bb]
		switch typ {
		case gguf.Q8_0:
			le.PutUint16(blk, one)
			for j := range 32 {
				blk[2+j] = byte(int8(pick(-128, 127)))
			}
		case gguf.Q4_0:
			le.PutUint16(blk, one)
			for j := range 16 {
				blk[2+j] = byte(pick(0, 255))
			}
		case gguf.MXFP4:
			blk[0] = 128 // a halved scale of 1: the values are the table's integers
			for j := range 16 {
				blk[1+j] = byte(pick(0, 255))
			}
		case gguf.Q4_1:
			le.PutUint16(blk, one)
			le.PutUint16(blk[2:], simdF16Of(t, float32(pick(-16, 16))))
			for j := range 16 {
				blk[4+j] = byte(pick(0, 255))
			}
		case gguf.Q4_K:
			le.PutUint16(blk, one)
			le.PutUint16(blk[2:], one)
			for j := 4; j < 144; j++ {
				blk[j] = byte(pick(0, 255))
			}
		case gguf.Q6_K:
			for j := range 192 {
				blk[j] = byte(pick(0, 255))
			}
			for j := 192; j < 208; j++ {
				blk[j] = byte(int8(pick(-64, 63)))
			}
			le.PutUint16(blk[208:], one)
		case gguf.F16:
			le.PutUint16(blk, simdF16Of(t, float32(pick(-64, 64))))
		case gguf.F32:
			le.PutUint32(blk, math.Float32bits(float32(pick(-100, 100))))
		}
	}
	return n, w, xq
}

// TestSIMDExactIntegers: with unit scales every kernel's result is an exact
// integer, so SIMD and generic must agree bit for bit; this checks the
// integer arithmetic (nibble and bit unpacking, scale decoding, sign
// handling) independently of float rounding, including the range ends
// (weights -128 and 127, nibbles 0 and 15, 6-bit quants 0 and 63).
func TestSIMDExactIntegers(t *testing.T) {
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			for _, extreme := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%v/extreme=%v", v, typ, extreme), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(typ), 7))
					blocks := []int{1, 2, 3}
					if typ == gguf.F16 || typ == gguf.F32 {
						blocks = []int{1, 7, 33, 100, 1000}
					}
					for _, nb := range blocks {
						for range 20 {
							n, w, xq := simdIntRow(t, r, typ, nb, extreme)
							want := genericSet.RowDot(typ)(n, w, xq)
							require.Equal(t, want, float32(math.Round(float64(want))), "generic result is not an integer")
							checkVariantRows(t, ks, typ, n, w, len(w), 1, xq, 0)
						}
					}
				})
			}
		}
	}
}

// TestSIMDLargeValues: quants at the ends of their ranges with real scales
// (large partial sums, where int16 saturation would show).
func TestSIMDLargeValues(t *testing.T) {
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			t.Run(fmt.Sprintf("%s/%v", v, typ), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(typ), 11))
				n, w, xq := simdIntRow(t, r, typ, 4, true)
				// Full-range activations: the extreme test above keeps Q8_K
				// small to stay exact.
				if VecDotType(typ) == gguf.Q8_K {
					for b := range n / 256 {
						x := xq[b*292:]
						binary.LittleEndian.PutUint32(x, math.Float32bits(0.01))
						for g := range 16 {
							s := 0
							for j := range 16 {
								q := -128 + 255*r.IntN(2)
								s += q
								x[4+16*g+j] = byte(int8(q))
							}
							binary.LittleEndian.PutUint16(x[260+2*g:], uint16(int16(s)))
						}
					}
				}
				checkVariantRows(t, ks, typ, n, w, len(w), 1, xq, 1e-5)
			})
		}
	}
}

// TestSIMDQuantvecRows: the multi-row kernels over all 8 rows of ggml's
// quantvec vectors against ggml's own T.dot, within 1e-4 relative (ggml's
// kernel sums in another order; its activations are checked bit for bit by
// TestQuantvecActivations).
func TestSIMDQuantvecRows(t *testing.T) {
	variants := simdVariants(t)
	q := openQuantvec(t)
	x := q.f32(t, "x")
	for _, v := range variants {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			if typ == gguf.F32 || typ == gguf.MXFP4 {
				continue // quantvec has no f32 or mxfp4 weights (TestMXFP4Dot checks ggml's mxfp4 dot)
			}
			t.Run(fmt.Sprintf("%s/%v", v, typ), func(t *testing.T) {
				wq := q.tensor(t, typ.String()+".q")
				want := q.f32(t, typ.String()+".dot")
				xq := make([]byte, simdActBytes(VecDotType(typ), q.cols))
				QuantizeRow(VecDotType(typ), x, xq)
				y := make([]float32, q.rows)
				ks.types[typ].rows(q.cols, wq.Data, len(wq.Data)/q.rows, xq, y)
				for r := range q.rows {
					require.InEpsilon(t, want[r], y[r], 1e-4, "row %d", r)
				}
			})
		}
	}
}

// TestSIMDFloatHelpers: Dot, DotF16 and Axpy of every SIMD set against the
// generic ones, for lengths covering every loop tail. Dot sums in float32
// lanes (generic: float64), so it is within 1e-6 of sum |a_i b_i|; Axpy
// fuses the multiply-add, so each element is within one rounding of it.
func TestSIMDFloatHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 65, 100, 1000} {
			a, b := make([]float32, n), make([]float32, n)
			ah, bh := make([]uint16, n), make([]uint16, n)
			var mag, magh float64
			for i := range n {
				a[i], b[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
				ah[i], bh[i] = F32ToF16(a[i]), F32ToF16(b[i])
				mag += math.Abs(float64(a[i]) * float64(b[i]))
				magh += math.Abs(float64(F16ToF32(ah[i])) * float64(F16ToF32(bh[i])))
			}
			require.InDelta(t, dotF32Generic(a, b), ks.Dot(a, b), 1e-6*mag+1e-30, "%s Dot n=%d", v, n)
			require.InDelta(t, dotF16Generic(ah, bh), ks.DotF16(ah, bh), 1e-6*magh+1e-30, "%s DotF16 n=%d", v, n)
			y1 := append([]float32(nil), b...)
			y2 := append([]float32(nil), b...)
			axpyGeneric(y1, 0.37, a)
			ks.Axpy(y2, 0.37, a)
			for i := range n {
				require.InDelta(t, y1[i], y2[i], 2e-7*(math.Abs(float64(y1[i]))+math.Abs(0.37*float64(a[i]))), "%s Axpy n=%d [%d]", v, n, i)
			}
		}
	}
}

// TestSIMDTokensMatchGeneric: the multi-token (prefill) kernels against the
// generic row dot for every token, with token counts around the kernels'
// group of four, padded activation strides and a y stride; y entries
// between the outputs must stay untouched.
func TestSIMDTokensMatchGeneric(t *testing.T) {
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			multi := ks.types[typ].tokens
			if multi == nil {
				continue
			}
			for _, n := range simdLengths(typ) {
				for _, nTok := range []int{1, 3, 4, 5, 8, 11} {
					t.Run(fmt.Sprintf("%s/%v/n=%d/tok=%d", v, typ, n, nTok), func(t *testing.T) {
						r := rand.New(rand.NewPCG(uint64(n), uint64(nTok)))
						w, _, _ := simdRows(r, typ, n, 1, 0)
						vt := VecDotType(typ)
						ab := simdActBytes(vt, n)
						xStride := ab + nTok%3
						x := make([]byte, nTok*xStride)
						src := make([]float32, n)
						for k := range nTok {
							for i := range src {
								src[i] = float32(r.NormFloat64())
							}
							QuantizeRow(vt, src, x[k*xStride:k*xStride+ab])
						}
						const yStride = 3
						y := make([]float32, nTok*yStride)
						for i := range y {
							y[i] = -12345
						}
						multi(n, w, x, xStride, nTok, y, yStride)
						gen := genericSet.RowDot(typ)
						for k := range nTok {
							xk := x[k*xStride : k*xStride+ab]
							want := gen(n, w, xk)
							bound := 1e-5 * simdDotBound(t, typ, n, w, xk)
							require.InDelta(t, want, y[k*yStride], bound, "token %d (generic %v, got %v)", k, want, y[k*yStride])
							require.Equal(t, float32(-12345), y[k*yStride+1], "y written between outputs")
							require.Equal(t, float32(-12345), y[k*yStride+2], "y written between outputs")
						}
					})
				}
			}
		}
	}
}

// TestNewSets: New builds every set this CPU runs under its name, refuses
// unknown names and sets the CPU cannot run, and Detect is the most
// capable set.
func TestNewSets(t *testing.T) {
	avail := Available()
	require.Equal(t, "generic", avail[0])
	for _, name := range avail {
		s, err := New(name)
		require.NoError(t, err)
		require.Equal(t, name, s.Name())
	}
	require.Equal(t, avail[len(avail)-1], Detect().Name())
	require.Same(t, Detect(), Detect())
	_, err := New("bogus")
	require.ErrorContains(t, err, `no kernel set "bogus"`)
	for _, name := range Known() {
		if !slices.Contains(avail, name) {
			_, err := New(name)
			require.ErrorContains(t, err, "cannot run", name)
		}
	}
}

// TestSIMDNoAllocs: the SIMD kernels and their wrappers do not allocate.
func TestSIMDNoAllocs(t *testing.T) {
	for _, v := range simdVariants(t) {
		ks := mustSet(t, v)
		for _, typ := range simdTypes {
			r := rand.New(rand.NewPCG(4, 4))
			n := 4 * typ.BlockSize() * 32
			if typ.BlockSize() == 1 {
				n = 1000
			}
			w, stride, xq := simdRows(r, typ, n, 5, 0)
			y := make([]float32, 5)
			one, many, multi := ks.RowDot(typ), ks.types[typ].rows, ks.types[typ].tokens
			x5 := bytes.Repeat(xq, 5)
			allocs := testing.AllocsPerRun(20, func() {
				y[0] = one(n, w, xq)
				many(n, w, stride, xq, y)
				if multi != nil {
					multi(n, w, x5, len(xq), 5, y, 1)
				}
			})
			require.Zero(t, allocs, "%s %v", v, typ)
		}
		a, b := make([]float32, 100), make([]float32, 100)
		ah := make([]uint16, 100)
		allocs := testing.AllocsPerRun(20, func() {
			a[0] = ks.Dot(a, b)
			a[1] = ks.DotF16(ah, ah)
			ks.Axpy(a, 0.5, b)
		})
		require.Zero(t, allocs, "%s float helpers", v)
	}
}

// Tests and benchmarks of the SIMD Q5_0 kernels (q50_amd64.s in the avx512
// set, q50_avx2_amd64.s in the avx2 set) against the pure-Go
// dotQ5_0Generic. They go through the dispatch tables, so they compile
// everywhere and skip where neither set is available.

// q50Sets runs f once per SIMD kernel set with q5_0 kernels (avx2 and
// avx512) that this machine supports, as subtests given the set; it skips
// the test if there is none.
func q50Sets(t *testing.T, f func(t *testing.T, ks *Set)) {
	t.Helper()
	var sets []string
	for _, v := range Available() {
		if v == "avx2" || v == "avx512" {
			sets = append(sets, v)
		}
	}
	if len(sets) == 0 {
		t.Skipf("no SIMD kernel set on this machine (sets %v)", Available())
	}
	for _, v := range sets {
		t.Run(v, func(t *testing.T) {
			ks := mustSet(t, v)
			require.NotNil(t, ks.types[gguf.Q5_0].rows, "%s has no multi-row q5_0 kernel", v)
			f(t, ks)
		})
	}
}

// q50Blocks are the row lengths in blocks: the pair loop with and without
// its odd tail, and lengths of real rows (640, 2048, 8192 values).
var q50Blocks = []int{1, 2, 3, 4, 5, 7, 8, 17, 20, 33, 64, 255, 256}

// q50Acts quantizes one random activation vector of n values to Q8_0.
func q50Acts(r *rand.Rand, n int, scale float64) []byte {
	xq := make([]byte, ActivationBytes(gguf.Q5_0, n))
	QuantizeRow(gguf.Q8_0, randomFloats(r, n, scale), xq)
	return xq
}

// q50CheckRows compares, for nrows rows stride bytes apart, the dispatched
// multi-row and single-row kernels with the generic one: within tol of
// sum |w_i x_i| (refDot's scale), and the two SIMD forms bit for bit.
func q50CheckRows(t *testing.T, ks *Set, n int, w []byte, stride, nrows int, xq []byte, tol float64) {
	t.Helper()
	rb := RowBytes(gguf.Q5_0, n)
	y := make([]float32, nrows+1)
	y[nrows] = -12345
	ks.types[gguf.Q5_0].rows(n, w, stride, xq, y[:nrows])
	require.Equal(t, float32(-12345), y[nrows], "multi-row kernel wrote past its rows")
	for i := range nrows {
		row := w[i*stride : i*stride+rb]
		want := dotQ5_0Generic(n, row, xq)
		got := ks.types[gguf.Q5_0].row(n, row, xq)
		require.Equal(t, math.Float32bits(got), math.Float32bits(y[i]), "row %d: single-row %v, multi-row %v", i, got, y[i])
		if tol == 0 {
			require.Equal(t, want, got, "row %d", i)
			continue
		}
		_, mag := refDot(gguf.Q5_0, row, xq, n)
		require.InDelta(t, want, got, tol*mag+1e-30, "row %d of %d values (generic %v, %s %v)", i, n, want, ks.Name(), got)
	}
}

// TestQ5_0RowsMatchGeneric: random rows (randomRow: every quant pattern,
// finite f16 scales) of many lengths, row counts and padded strides.
func TestQ5_0RowsMatchGeneric(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		for _, nb := range q50Blocks {
			for _, nrows := range []int{1, 2, 4, 5, 11} {
				t.Run(fmt.Sprintf("nb=%d/rows=%d", nb, nrows), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(nb), uint64(nrows)))
					n := 32 * nb
					rb := RowBytes(gguf.Q5_0, n)
					stride := rb + nrows%3
					w := make([]byte, nrows*stride)
					for i := range nrows {
						copy(w[i*stride:], randomRow(r, gguf.Q5_0, n))
					}
					q50CheckRows(t, ks, n, w, stride, nrows, q50Acts(r, n, 1), 1e-5)
				})
			}
		}
	})
}

// q50IntRow builds nb blocks with unit scales on both sides, so each
// block's sum is an integer and the whole dot is exact in float32; qh,
// nibble and activation bytes come from the given generators.
func q50IntRow(nb int, qh func() uint32, qs func() byte, x func() int8) (w, xq []byte) {
	one := F32ToF16(1)
	w = make([]byte, nb*gguf.BytesQ5_0)
	xq = make([]byte, nb*gguf.BytesQ8_0)
	for b := range nb {
		blk := w[b*gguf.BytesQ5_0:]
		binary.LittleEndian.PutUint16(blk, one)
		binary.LittleEndian.PutUint32(blk[2:], qh())
		for j := range 16 {
			blk[6+j] = qs()
		}
		a := xq[b*gguf.BytesQ8_0:]
		binary.LittleEndian.PutUint16(a, one)
		for j := range 32 {
			a[2+j] = byte(x())
		}
	}
	return w, xq
}

// q50IntDot is the integer dot of a q50IntRow pair, from the format's
// definition (value j of a block: nibble j%16, low for j < 16, with bit j
// of qh as its fifth bit, minus 16), written apart from dotQ5_0Generic.
func q50IntDot(nb int, w, xq []byte) int64 {
	var s int64
	for b := range nb {
		blk, a := w[b*gguf.BytesQ5_0:], xq[b*gguf.BytesQ8_0:]
		qh := binary.LittleEndian.Uint32(blk[2:])
		for j := range 32 {
			nib := blk[6+j%16] & 0xf
			if j >= 16 {
				nib = blk[6+j%16] >> 4
			}
			q := int64(nib) + 16*int64(qh>>j&1) - 16
			s += q * int64(int8(a[2+j]))
		}
	}
	return s
}

// TestQ5_0ExactIntegers: with unit scales every kernel returns the exact
// integer, so SIMD, generic and the definition agree bit for bit. The cases
// cover the ends of every range: qh all set or clear, nibbles 0 and 15,
// activations -128 and 127 (ggml's quantizer never writes -128, but the
// unsigned-times-signed products do not depend on that).
func TestQ5_0ExactIntegers(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		r := rand.New(rand.NewPCG(50, 1))
		randQh := func() uint32 { return r.Uint32() }
		randQs := func() byte { return byte(r.Uint32()) }
		randX := func() int8 { return int8(r.Uint32()) }
		pick := func(a, b byte) func() byte {
			return func() byte {
				if r.IntN(2) == 0 {
					return a
				}
				return b
			}
		}
		cases := []struct {
			name string
			qh   func() uint32
			qs   func() byte
			x    func() int8
		}{
			{"random", randQh, randQs, randX},
			{"qh=0/nibbles=0/x=127", func() uint32 { return 0 }, func() byte { return 0 }, func() int8 { return 127 }},
			{"qh=0/nibbles=0/x=-128", func() uint32 { return 0 }, func() byte { return 0 }, func() int8 { return -128 }},
			{"qh=~0/nibbles=15/x=127", func() uint32 { return ^uint32(0) }, func() byte { return 0xff }, func() int8 { return 127 }},
			{"qh=~0/nibbles=15/x=-128", func() uint32 { return ^uint32(0) }, func() byte { return 0xff }, func() int8 { return -128 }},
			{"qh=0/random", func() uint32 { return 0 }, randQs, randX},
			{"qh=~0/random", func() uint32 { return ^uint32(0) }, randQs, randX},
			{"alternating", func() uint32 { return 0xaaaa5555 }, pick(0x0f, 0xf0), func() int8 { return int8(127 - 255*r.IntN(2)) }},
			{"random/nibble ends", randQh, pick(0x00, 0xff), randX},
		}
		for _, c := range cases {
			for _, nb := range []int{1, 2, 3, 8, 31} {
				t.Run(fmt.Sprintf("%s/nb=%d", c.name, nb), func(t *testing.T) {
					for range 10 {
						w, xq := q50IntRow(nb, c.qh, c.qs, c.x)
						n := 32 * nb
						want := float32(q50IntDot(nb, w, xq))
						require.Equal(t, want, dotQ5_0Generic(n, w, xq), "generic against the definition")
						q50CheckRows(t, ks, n, w, len(w), 1, xq, 0)
					}
				})
			}
		}
	})
}

// TestQ5_0Scales: large, small and subnormal f16 scales with full-range
// quants; the result stays within 1e-5 of sum |w_i x_i| of the generic one.
func TestQ5_0Scales(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		r := rand.New(rand.NewPCG(50, 2))
		for _, d := range []float32{60000, 100, 1, 1e-3, 6e-5, 6e-8} {
			for _, dx := range []float32{1000, 1, 1e-4} {
				t.Run(fmt.Sprintf("d=%g/dx=%g", d, dx), func(t *testing.T) {
					const nb = 9
					w, xq := q50IntRow(nb, r.Uint32, func() byte { return byte(r.Uint32()) }, func() int8 { return int8(r.Uint32()) })
					for b := range nb {
						// A spread of scales around d and dx.
						f := float32(math.Exp(r.NormFloat64() * 0.3))
						binary.LittleEndian.PutUint16(w[b*gguf.BytesQ5_0:], F32ToF16(min(d*f, 65504)))
						binary.LittleEndian.PutUint16(xq[b*gguf.BytesQ8_0:], F32ToF16(dx*f))
					}
					q50CheckRows(t, ks, 32*nb, w, len(w), 1, xq, 1e-5)
				})
			}
		}
	})
}

// TestQ5_0MatMulMatVec: MatVec and MatMul (which use the row kernels)
// on a matrix of odd shape against the generic row dot.
func TestQ5_0MatMulMatVec(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		r := rand.New(rand.NewPCG(50, 3))
		const rows, cols, nTok = 37, 640, 11
		m := &Matrix{Type: gguf.Q5_0, Rows: rows, Cols: cols}
		for range rows {
			m.Data = append(m.Data, randomRow(r, gguf.Q5_0, cols)...)
		}
		ab := ActivationBytes(gguf.Q5_0, cols)
		var xq []byte
		for range nTok {
			xq = append(xq, q50Acts(r, cols, 1)...)
		}
		y := make([]float32, nTok*rows)
		ks.MatMul(m, xq, nTok, y, 0, rows)
		yv := make([]float32, rows)
		ks.MatVec(m, xq[:ab], yv, 3, rows)
		for k := range nTok {
			for i := range rows {
				xk := xq[k*ab : (k+1)*ab]
				want := dotQ5_0Generic(cols, m.Row(i), xk)
				_, mag := refDot(gguf.Q5_0, m.Row(i), xk, cols)
				require.InDelta(t, want, y[k*rows+i], 1e-5*mag, "MatMul token %d row %d", k, i)
				if k == 0 && i >= 3 {
					require.InDelta(t, want, yv[i], 1e-5*mag, "MatVec row %d", i)
				}
			}
		}
		require.Zero(t, yv[0], "MatVec wrote outside its row range")
	})
}

// TestQ5_0NoAllocs: the kernels and their wrappers do not allocate.
func TestQ5_0NoAllocs(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		r := rand.New(rand.NewPCG(50, 4))
		const n, nrows = 640, 5
		w := make([]byte, 0, nrows*RowBytes(gguf.Q5_0, n))
		for range nrows {
			w = append(w, randomRow(r, gguf.Q5_0, n)...)
		}
		xq := q50Acts(r, n, 1)
		y := make([]float32, nrows)
		allocs := testing.AllocsPerRun(20, func() {
			y[0] = ks.types[gguf.Q5_0].row(n, w, xq)
			ks.types[gguf.Q5_0].rows(n, w, RowBytes(gguf.Q5_0, n), xq, y)
		})
		require.Zero(t, allocs)
	})
}

// Benchmarks: MatVec (decode) of 8192x2048 q5_0 matrices (rows x values)
// cycling through 256 MiB of them, so the weights come from memory as in
// decode; MB/s is weight bytes. Compare with BenchmarkMemRead. MatMul
// (prefill) of 64 tokens against one such matrix reports GFLOP/s.
const (
	q50BenchRows, q50BenchCols, q50BenchTok = 8192, 2048, 64
)

var q50Bench struct {
	data []byte // whole matrices, back to back
	xq   []byte // q50BenchTok activation rows
}

func q50BenchData() ([]byte, []byte) {
	if q50Bench.data == nil {
		mb := q50BenchRows * RowBytes(gguf.Q5_0, q50BenchCols)
		nm := (benchBytes + mb - 1) / mb
		data := make([]byte, nm*mb)
		r := rand.New(rand.NewPCG(50, 5))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		for b := 0; b < len(data); b += gguf.BytesQ5_0 {
			binary.LittleEndian.PutUint16(data[b:], F32ToF16(float32(0.01+0.01*r.Float64())))
		}
		q50Bench.data = data
		q50Bench.xq = benchActivations(gguf.Q5_0, q50BenchCols, q50BenchTok)
	}
	return q50Bench.data, q50Bench.xq
}

func BenchmarkQ5_0MatVec(b *testing.B) {
	data, xq := q50BenchData()
	mb := q50BenchRows * RowBytes(gguf.Q5_0, q50BenchCols)
	y := make([]float32, q50BenchRows)
	for _, v := range Available() {
		ks := mustSet(b, v)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", v, threads), func(b *testing.B) {
				b.SetBytes(int64(mb))
				i := 0
				for b.Loop() {
					off := i % (len(data) / mb) * mb
					m := &Matrix{Type: gguf.Q5_0, Rows: q50BenchRows, Cols: q50BenchCols, Data: data[off : off+mb]}
					splitRows(threads, m.Rows, func(r0, r1 int) { ks.MatVec(m, xq, y, r0, r1) })
					i++
				}
			})
		}
	}
}

func BenchmarkQ5_0MatMul(b *testing.B) {
	data, xq := q50BenchData()
	mb := q50BenchRows * RowBytes(gguf.Q5_0, q50BenchCols)
	m := &Matrix{Type: gguf.Q5_0, Rows: q50BenchRows, Cols: q50BenchCols, Data: data[:mb]}
	y := make([]float32, q50BenchTok*q50BenchRows)
	for _, v := range Available() {
		ks := mustSet(b, v)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", v, threads), func(b *testing.B) {
				for b.Loop() {
					splitRows(threads, m.Rows, func(r0, r1 int) { ks.MatMul(m, xq, q50BenchTok, y, r0, r1) })
				}
				flops := 2 * float64(m.Rows) * float64(m.Cols) * q50BenchTok
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
