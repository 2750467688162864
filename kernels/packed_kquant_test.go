package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// The format-specific tests of the packed q4_K and q6_K layouts: their
// bytes as docs/FORMATS.md documents them and their dots on extreme and
// structured inputs. The tests every layout shares are in packed_test.go.

// TestPackedQ4KBytes decodes the packed bytes by the layout documented in
// packed_q4k.go and docs/FORMATS.md and compares every value with
// DequantizeRow of the original rows.
func TestPackedQ4KBytes(t *testing.T) {
	const cols = 3 * 256
	r := rand.New(rand.NewPCG(7, 11))
	rb := RowBytes(gguf.Q4_K, cols)
	src := make([]byte, 16*rb)
	simdRandomRow(r, gguf.Q4_K, src)
	dst := make([]byte, packedQ4KBase.GroupBytes(cols))
	packedQ4KBase.Pack(dst, src, cols)
	want := make([]float32, cols)
	le := binary.LittleEndian
	for row := range 16 {
		DequantizeRow(gguf.Q4_K, src[row*rb:(row+1)*rb], want)
		for b := range cols / 256 {
			p := dst[b*2368 : (b+1)*2368]
			d := F16ToF32(le.Uint16(p[2*row:]))
			dmin := F16ToF32(le.Uint16(p[32+2*row:]))
			for v := range 256 {
				s, k, i := v/32, v%32/8, v%8
				sc := p[64+16*s+row]
				m := p[192+32*(s/2)+2*row+s%2]
				q := p[320+256*s+64*k+4*row+i%4]
				if i < 4 {
					q &= 0xf
				} else {
					q >>= 4
				}
				got := float32(d*float32(sc))*float32(q) - dmin*float32(m)
				require.Equal(t, want[256*b+v], got, "row %d block %d value %d", row, b, v)
			}
		}
	}
}

// q4kHandRows builds 16 q4_K rows of cols values with d = dmin = 1, so every
// dot is an integer; fill sets each block's scale bytes and quants.
func q4kHandRows(cols int, fill func(row, blk int, scales, qs []byte)) []byte {
	rb := RowBytes(gguf.Q4_K, cols)
	src := make([]byte, 16*rb)
	one := F32ToF16(1)
	for row := range 16 {
		for b := range cols / 256 {
			blk := src[row*rb+b*144 : row*rb+(b+1)*144]
			binary.LittleEndian.PutUint16(blk, one)
			binary.LittleEndian.PutUint16(blk[2:], one)
			fill(row, b, blk[4:16], blk[16:])
		}
	}
	return src
}

// q8KHand builds a q8_K activation row with d = 1 from quants that may use
// the whole int8 range (-128 too, which the quantizer never emits), with
// bsums computed here.
func q8KHand(qs []int8) []byte {
	out := make([]byte, len(qs)/256*292)
	for b := range len(qs) / 256 {
		blk := out[b*292 : (b+1)*292]
		binary.LittleEndian.PutUint32(blk, math.Float32bits(1))
		for j := range 16 {
			var s int
			for i := range 16 {
				v := qs[256*b+16*j+i]
				blk[4+16*j+i] = byte(v)
				s += int(v)
			}
			binary.LittleEndian.PutUint16(blk[260+2*j:], uint16(int16(s)))
		}
	}
	return out
}

// TestPackedQ4KExact checks integer exactness at the extremes: with d =
// dmin = dy = 1 and sums below 2^24 every dot is an exactly representable
// integer, computed here in int64 from DequantizeRow of the unpacked rows
// (values sc*q - m). Cases: every quant 15 with scale and min 63 against
// +127 and -128 activations (the largest sums), zero scales, random bytes,
// and alternating signs; one block and four blocks.
func TestPackedQ4KExact(t *testing.T) {
	sets, layouts := packedLayoutsOf(t, gguf.Q4_K, &packedQ4KBase)
	r := rand.New(rand.NewPCG(3, 5))
	type wcase struct {
		name string
		fill func(row, blk int, scales, qs []byte)
	}
	wcases := []wcase{
		{"max", func(_, _ int, sc, qs []byte) {
			for i := range sc {
				sc[i] = 0xff
			}
			for i := range qs {
				qs[i] = 0xff
			}
		}},
		{"zero-scales", func(_, _ int, sc, qs []byte) {
			clear(sc)
			for i := range qs {
				qs[i] = byte(r.Uint32())
			}
		}},
		{"random", func(_, _ int, sc, qs []byte) {
			for i := range sc {
				sc[i] = byte(r.Uint32())
			}
			for i := range qs {
				qs[i] = byte(r.Uint32())
			}
		}},
		{"rows-differ", func(row, blk int, sc, qs []byte) {
			for i := range sc {
				sc[i] = byte(row*17 + blk*5 + i*3)
			}
			for i := range qs {
				qs[i] = byte(row + 16*(i%16))
			}
		}},
	}
	acases := map[string]func(i int) int8{
		"+127":   func(int) int8 { return 127 },
		"-128":   func(int) int8 { return -128 },
		"alt":    func(i int) int8 { return int8(127 - 255*(i%2)) },
		"random": func(int) int8 { return int8(r.Uint32()) },
	}
	exact := 0
	for _, cols := range []int{256, 1024} {
		for _, wc := range wcases {
			src := q4kHandRows(cols, wc.fill)
			rb := RowBytes(gguf.Q4_K, cols)
			vals := make([][]float32, 16)
			for row := range 16 {
				vals[row] = make([]float32, cols)
				DequantizeRow(gguf.Q4_K, src[row*rb:(row+1)*rb], vals[row])
				for _, v := range vals[row] {
					require.Equal(t, float32(int32(v)), v, "weights are integers")
				}
			}
			for an, af := range acases {
				const nTok = 8
				qs := make([]int8, nTok*cols)
				for i := range qs {
					qs[i] = af(i)
				}
				x := q8KHand(qs)
				ab := len(x) / nTok
				want := make([]float32, nTok*16)
				bound := make([]float64, nTok*16)
				for tok := range nTok {
					for row := range 16 {
						// bound: sum of (|sc*q| + m) * |a| over the row,
						// with |sc*q| <= |v| + m and m <= 63.
						var s, bnd int64
						for i, v := range vals[row] {
							a := int64(qs[tok*cols+i])
							s += int64(v) * a
							bnd += (int64(math.Abs(float64(v))) + 2*63) * max(a, -a)
						}
						want[tok*16+row] = float32(s)
						bound[tok*16+row] = float64(bnd)
					}
				}
				for li, l := range layouts {
					g := packedGroupOf(l, src, cols)
					for _, dot := range packedDots(l) {
						// Every token count: the SIMD sets have a
						// kernel for each.
						for nt := 1; nt <= 8; nt++ {
							if nt > l.MaxTok {
								continue
							}
							got := make([]float32, nTok*16)
							dot.fn(cols, g, x, ab, nt, got, 16)
							for i := range nt * 16 {
								// Below 2^24 every partial sum is exact in
								// float32; above, the int32 sums are
								// converted with one rounding each.
								what := fmt.Sprintf("%s %s %s: %d cols, weights %s, activations %s, %d tokens, output %d",
									sets[li].Name(), l.Name, dot.name, cols, wc.name, an, nt, i)
								if bound[i] < 1<<24 {
									exact++
									require.Equal(t, want[i], got[i], what)
								} else {
									require.InDelta(t, want[i], got[i], 1e-6*bound[i], what)
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d outputs compared exactly", exact)
	require.Greater(t, exact, 1000, "most small cases are compared exactly")
}

// TestPackedQ4KQuantvec checks every q4_K layout against ggml's own dot
// products (checkPackedQuantvec).
func TestPackedQ4KQuantvec(t *testing.T) {
	checkPackedQuantvec(t, gguf.Q4_K, &packedQ4KBase)
}

// checkPackedQuantvec packs ggml's own rows of typ from quantvec.gguf (its
// 8 rows, then the same rows in reverse order to fill a group of 16) and
// checks every layout's Dot and DotGeneric, for every token count, against
// the dot products ggml's CPU kernel computed with the file's q8_K
// activations.
func checkPackedQuantvec(t *testing.T, typ gguf.Type, base *PackedLayout) {
	q := openQuantvec(t)
	sets, layouts := packedLayoutsOf(t, typ, base)
	w := q.tensor(t, typ.String()+".q").Data
	x := q.tensor(t, "x.q8_K").Data
	ref := q.f32(t, typ.String()+".dot")
	rb := RowBytes(typ, q.cols)
	require.GreaterOrEqual(t, q.rows, 8, "the rows and their mirror fill a group")
	require.Len(t, w, q.rows*rb)
	require.Len(t, x, ActivationBytes(typ, q.cols))
	require.Len(t, ref, q.rows)
	src := make([]byte, 0, 16*rb)
	want := make([]float32, 16)
	bound := make([]float64, 16)
	for i := range 16 {
		r := i
		if i >= q.rows {
			r = 2*q.rows - 1 - i
		}
		src = append(src, w[r*rb:(r+1)*rb]...)
		want[i] = ref[r]
		bound[i] = simdDotBound(t, typ, q.cols, w[r*rb:(r+1)*rb], x)
	}
	for li, l := range layouts {
		g := packedGroupOf(l, src, q.cols)
		xs := slices.Repeat(x, l.MaxTok)
		for _, dot := range packedDots(l) {
			for nt := 1; nt <= l.MaxTok; nt++ {
				y := make([]float32, 16*nt)
				dot.fn(q.cols, g, xs, len(x), nt, y, 16)
				for k := range nt {
					for i := range 16 {
						require.InDelta(t, want[i], y[16*k+i], 1e-5*bound[i]+1e-6, "%s %s %s: %d tokens: token %d row %d", sets[li].Name(), l.Name, dot.name, nt, k, i)
					}
				}
			}
		}
	}
}

// TestPackedQ4KManyBlocks compares every layout with dotQ4KGeneric on long
// rows (64 blocks) with padded token and output strides, and checks that
// Dot writes nothing outside its 16 x nTok outputs and allocates nothing.
func TestPackedQ4KManyBlocks(t *testing.T) {
	sets, layouts := packedLayoutsOf(t, gguf.Q4_K, &packedQ4KBase)
	const cols, nTok = 64 * 256, 8
	r := rand.New(rand.NewPCG(9, 1))
	rb := RowBytes(gguf.Q4_K, cols)
	src := make([]byte, 16*rb)
	simdRandomRow(r, gguf.Q4_K, src)
	ab := ActivationBytes(gguf.Q4_K, cols)
	xStride := ab + 100 // padding between tokens
	x := make([]byte, nTok*xStride)
	act := make([]float32, cols)
	for k := range nTok {
		for i := range act {
			act[i] = float32(r.NormFloat64())
		}
		QuantizeRow(gguf.Q8_K, act, x[k*xStride:k*xStride+ab])
	}
	const yStride = 21
	want := make([]float64, nTok*16)
	bound := make([]float64, nTok*16)
	for k := range nTok {
		for row := range 16 {
			w, xk := src[row*rb:(row+1)*rb], x[k*xStride:k*xStride+ab]
			want[k*16+row] = float64(dotQ4KGeneric(cols, w, xk))
			bound[k*16+row] = simdDotBound(t, gguf.Q4_K, cols, w, xk)
		}
	}
	for li, l := range layouts {
		g := packedGroupOf(l, src, cols)
		for _, dot := range packedDots(l) {
			for nt := 1; nt <= l.MaxTok && nt <= nTok; nt++ {
				y := make([]float32, nTok*yStride)
				for i := range y {
					y[i] = -7
				}
				dot.fn(cols, g, x, xStride, nt, y, yStride)
				for k := range nTok {
					for i := 0; i < yStride; i++ {
						got := y[k*yStride+i]
						if k >= nt || i >= 16 {
							require.Equal(t, float32(-7), got, "%s %s: %d tokens wrote token %d slot %d", l.Name, dot.name, nt, k, i)
							continue
						}
						require.InDelta(t, want[k*16+i], float64(got), 1e-5*bound[k*16+i]+1e-6,
							"%s %s %s: %d tokens: token %d row %d", sets[li].Name(), l.Name, dot.name, nt, k, i)
					}
				}
			}
		}
		y := make([]float32, nTok*yStride)
		allocs := testing.AllocsPerRun(3, func() { l.Dot(cols, g, x, xStride, l.MaxTok, y, yStride) })
		require.Zero(t, allocs, "%s Dot allocates", l.Name)
	}
}

// q6kHandRows builds 16 q6_K rows of cols values: quant q(row, i) (0..63),
// the int8 scale of sub-block s of a row from sc(row, s), f16 d per row.
func q6kHandRows(cols int, d func(row int) uint16, sc func(row, s int) int8, q func(row, i int) int) []byte {
	rb := RowBytes(gguf.Q6_K, cols)
	out := make([]byte, 16*rb)
	vals := make([]float32, qkK)
	for r := 0; r < 16; r++ {
		for b := 0; b < cols/qkK; b++ {
			blk := out[r*rb+b*gguf.BytesQ6_K : r*rb+(b+1)*gguf.BytesQ6_K]
			// Write the quants with the layout of ggml's quantize_row_q6_K:
			// value 128h+32k+l in nibble k/2 of ql[64h+32(k%2)+l] and bits
			// 2k of qh[32h+l].
			for i := 0; i < qkK; i++ {
				v := q(r, b*qkK+i)
				h, k, l := i/128, i%128/32, i%32
				blk[64*h+32*(k%2)+l] |= byte(v&0xf) << (4 * (k / 2))
				blk[128+32*h+l] |= byte(v>>4) << (2 * k)
			}
			for s := 0; s < 16; s++ {
				blk[192+s] = byte(sc(r, b*16+s))
			}
			binary.LittleEndian.PutUint16(blk[208:], d(r))
			// The layout above must round-trip through the GGUF decoder.
			DequantizeRow(gguf.Q6_K, blk, vals)
			for i := 0; i < qkK; i++ {
				want := f16At(blk[208:]) * float32(int8(blk[192+i/16])) * float32(q(r, b*qkK+i)-32)
				if vals[i] != want && !(math.IsNaN(float64(want)) && math.IsNaN(float64(vals[i]))) {
					panic(fmt.Sprintf("q6kHandRows: row %d value %d decodes to %g, want %g", r, b*qkK+i, vals[i], want))
				}
			}
		}
	}
	return out
}

// q6kHandTokens builds nTok q8_K activation rows from quants q(tok, i) with
// d = 1 and the sub-block sums q8_K carries.
func q6kHandTokens(cols, nTok int, xd float32, q func(tok, i int) int8) []byte {
	ab := ActivationBytes(gguf.Q6_K, cols)
	out := make([]byte, nTok*ab)
	for t := 0; t < nTok; t++ {
		for b := 0; b < cols/qkK; b++ {
			blk := out[t*ab+b*gguf.BytesQ8_K : t*ab+(b+1)*gguf.BytesQ8_K]
			binary.LittleEndian.PutUint32(blk, math.Float32bits(xd))
			for s := 0; s < 16; s++ {
				var sum int
				for j := 0; j < 16; j++ {
					v := q(t, b*qkK+16*s+j)
					blk[4+16*s+j] = byte(v)
					sum += int(v)
				}
				binary.LittleEndian.PutUint16(blk[4+qkK+2*s:], uint16(int16(sum)))
			}
		}
	}
	return out
}

// TestPackedQ6KBytes reads the packed bytes by the layout documented in
// packed_q6k.go and checks that every value dequantizes bit for bit as the
// GGUF rows do (DequantizeRow is the reference).
func TestPackedQ6KBytes(t *testing.T) {
	l := &packedQ6KBase
	r := rand.New(rand.NewPCG(6, 6))
	for _, cols := range []int{256, 1024} {
		rb := RowBytes(gguf.Q6_K, cols)
		src := make([]byte, 16*rb)
		for i := 0; i < 16; i++ {
			simdRandomRow(r, gguf.Q6_K, src[i*rb:(i+1)*rb])
		}
		dst := make([]byte, l.GroupBytes(cols))
		l.Pack(dst, src, cols)
		want := make([]float32, cols)
		for row := 0; row < 16; row++ {
			DequantizeRow(gguf.Q6_K, src[row*rb:(row+1)*rb], want)
			for i := 0; i < cols; i++ {
				blk := dst[i/qkK*3360 : (i/qkK+1)*3360]
				e := i % qkK
				s, j := e/16, e%16
				rec := blk[208*s : 208*(s+1)]
				v, k := j/4, j%4 // operand v, byte k of the lane
				var q int32
				if v < 3 {
					q = int32(rec[64*v+4*row+k] & 0x3f)
				} else {
					for u := 0; u < 3; u++ { // bits 2u..2u+1 at the top of A, B, C
						q |= int32(rec[64*u+4*row+k]>>6) << (2 * u)
					}
				}
				d := f16At(blk[3328+2*row:])
				sc := int8(rec[192+row])
				got := float32(d*float32(sc)) * float32(q-32)
				if math.Float32bits(got) != math.Float32bits(want[i]) {
					t.Fatalf("cols %d row %d value %d: packed gives %g, GGUF %g", cols, row, i, got, want[i])
				}
			}
		}
	}
}

// TestPackedQ6KExact runs each kernel on extreme and structured inputs
// against the generic row kernel of the unpacked rows. With d = 1 and
// token d = 1 every partial sum here is an integer below 2^24, so results
// must match exactly; the scaled cases get the layouts' 1e-5 tolerance.
func TestPackedQ6KExact(t *testing.T) {
	type tcase struct {
		name string
		cols int
		d    func(row int) uint16
		sc   func(row, s int) int8
		q    func(row, i int) int
		x    func(tok, i int) int8
		xd   float32
		// exact: every partial sum is an integer that float32 holds
		exact bool
	}
	one := func(int) uint16 { return 0x3c00 }
	r := rand.New(rand.NewPCG(61, 62))
	rq := make([]int, 16*qkK*40)
	for i := range rq {
		rq[i] = r.IntN(64)
	}
	rx := make([]int8, 8*qkK*40)
	for i := range rx {
		rx[i] = int8(r.IntN(256) - 128)
	}
	rsc := make([]int8, 16*16*40)
	for i := range rsc {
		rsc[i] = int8(r.IntN(256) - 128)
	}
	cases := []tcase{
		// q-32 = 31 at the largest scale, x = 127: every sub-block sum is
		// 16*31*127 = 62992, times 127 per sub-block, 16 per block.
		{"max positive", 256, one, func(int, int) int8 { return 127 }, func(int, int) int { return 63 },
			func(int, int) int8 { return 127 }, 1, false},
		// q-32 = -32, scale -128, x = -128: the largest magnitudes of
		// every factor and the largest |bsum| (-2048).
		{"max magnitude", 256, one, func(int, int) int8 { return -128 }, func(int, int) int { return 0 },
			func(int, int) int8 { return -128 }, 1, false},
		// q = 32 is a zero weight: the -32*bsum correction must cancel
		// exactly for any activations.
		{"zero weights", 512, func(r int) uint16 { return 0x5bff }, func(r, s int) int8 { return rsc[r*16+s%16] },
			func(int, int) int { return 32 }, func(t, i int) int8 { return rx[t*qkK*2+i] }, 3.5, true},
		// Small exact sums: every product an integer, block sums < 2^24.
		{"exact mixed", 256, one, func(r, s int) int8 { return int8(s - 8 + r%3) },
			func(r, i int) int { return (r*7 + i*13) % 64 }, func(t, i int) int8 { return int8((t*5+i*3)%15 - 7) }, 1, true},
		{"scales alternate", 256, one, func(r, s int) int8 { return int8(1 - 2*(s%2)) },
			func(r, i int) int { return rq[r*qkK+i] }, func(t, i int) int8 { return rx[t*qkK+i] }, 1, true},
		// Random everything over many blocks (the pointer walk over 40
		// packed blocks), with realistic d.
		{"random 40 blocks", 40 * qkK, func(r int) uint16 { return F32ToF16(0.002 * float32(r+1)) },
			func(r, s int) int8 { return rsc[r*16*40+s] }, func(r, i int) int { return rq[r*qkK*40+i] },
			func(t, i int) int8 { return rx[t*qkK*40+i] }, 0.01, false},
	}
	names, layouts := packedLayoutsOf(t, gguf.Q6_K, &packedQ6KBase)
	for _, c := range cases {
		w := q6kHandRows(c.cols, c.d, c.sc, c.q)
		x := q6kHandTokens(c.cols, 8, c.xd, c.x)
		rb, ab := RowBytes(gguf.Q6_K, c.cols), ActivationBytes(gguf.Q6_K, c.cols)
		want := make([]float32, 8*16)
		bounds := make([]float64, 8*16) // sum of |w*x|: the scale of float error
		for tok := 0; tok < 8; tok++ {
			for row := 0; row < 16; row++ {
				want[tok*16+row] = dotQ6KGeneric(c.cols, w[row*rb:(row+1)*rb], x[tok*ab:(tok+1)*ab])
				bounds[tok*16+row] = simdDotBound(t, gguf.Q6_K, c.cols, w[row*rb:(row+1)*rb], x[tok*ab:(tok+1)*ab])
			}
		}
		for li, l := range layouts {
			g := make([]byte, l.GroupBytes(c.cols))
			l.Pack(g, w, c.cols)
			for nTok := 1; nTok <= l.MaxTok; nTok++ {
				got := make([]float32, 8*16)
				l.Dot(c.cols, g, x, ab, nTok, got, 16)
				for tok := 0; tok < 8; tok++ {
					for row := 0; row < 16; row++ {
						i := tok*16 + row
						if tok >= nTok {
							require.Zero(t, got[i], "%s %s nTok %d: token %d written", c.name, names[li], nTok, tok)
							continue
						}
						if c.exact {
							require.Equal(t, want[i], got[i], "%s %s nTok %d token %d row %d", c.name, names[li], nTok, tok, row)
						} else {
							require.InDelta(t, want[i], got[i], 1e-5*bounds[i]+1e-6,
								"%s %s nTok %d token %d row %d", c.name, names[li], nTok, tok, row)
						}
					}
				}
			}
		}
	}
}

// TestPackedQ6KQuantvec checks every q6_K layout against ggml's own dot
// products (checkPackedQuantvec).
func TestPackedQ6KQuantvec(t *testing.T) {
	checkPackedQuantvec(t, gguf.Q6_K, &packedQ6KBase)
}
