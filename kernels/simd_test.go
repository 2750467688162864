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
var simdTypes = []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q4_K, gguf.Q6_K, gguf.F16, gguf.F32}

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
			if typ == gguf.F32 {
				continue // quantvec has no f32 weights
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
