package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// q6kLayouts returns the q6_K layouts of the kernel sets this CPU runs,
// each with its set, the pure-Go base layout first (it runs everywhere).
func q6kLayouts(t testing.TB) (sets []*Set, layouts []*PackedLayout) {
	return packedLayoutsOf(t, gguf.Q6_K, &packedQ6KBase)
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
	names, layouts := q6kLayouts(t)
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

// TestPackedQ6KQuantvec packs the q6_K rows ggml quantized itself
// (quantvec.gguf: 8 rows, repeated in reverse order to fill a group) and
// compares every layout's Dot with the dot products ggml's CPU kernel
// computed against the file's q8_K activations, for every token count.
func TestPackedQ6KQuantvec(t *testing.T) {
	q := openQuantvec(t)
	names, layouts := q6kLayouts(t)
	w := q.tensor(t, "q6_K.q").Data
	x := q.tensor(t, "x.q8_K").Data
	ref := q.f32(t, "q6_K.dot")
	rb := RowBytes(gguf.Q6_K, q.cols)
	require.Len(t, w, q.rows*rb)
	require.Len(t, x, ActivationBytes(gguf.Q6_K, q.cols))
	src := make([]byte, 0, 16*rb)
	want := make([]float32, 16)
	bound := make([]float64, 16)
	for i := 0; i < 16; i++ {
		row := i
		if i >= q.rows {
			row = 15 - i
		}
		src = append(src, w[row*rb:(row+1)*rb]...)
		want[i] = ref[row]
		bound[i] = simdDotBound(t, gguf.Q6_K, q.cols, w[row*rb:(row+1)*rb], x)
	}
	xs := slices.Repeat(x, 8)
	for li, l := range layouts {
		g := make([]byte, l.GroupBytes(q.cols))
		l.Pack(g, src, q.cols)
		for nTok := 1; nTok <= l.MaxTok; nTok++ {
			y := make([]float32, 16*nTok)
			l.Dot(q.cols, g, xs, len(x), nTok, y, 16)
			for k := 0; k < nTok; k++ {
				for i := 0; i < 16; i++ {
					require.InDelta(t, want[i], y[16*k+i], 1e-5*bound[i]+1e-6, "%s: %d tokens: token %d row %d", names[li], nTok, k, i)
				}
			}
		}
	}
}

// benchQ6KMatrix returns a random rows x cols q6_K matrix, its packed twin
// (nil when the detected set has no q6_K layout) and nTok tokens.
func benchQ6KMatrix(b *testing.B, rows, cols, nTok int) (m, p *Matrix, xq []byte) {
	ks := Detect()
	b.Helper()
	rb := RowBytes(gguf.Q6_K, cols)
	m = &Matrix{Type: gguf.Q6_K, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	for i := 0; i < rows; i++ {
		simdRandomRow(r, gguf.Q6_K, m.Data[i*rb:(i+1)*rb])
	}
	return m, packedCopy(ks, m), benchActivations(gguf.Q6_K, cols, nTok)
}

// BenchmarkPackedQ6K compares MatVec (1 and 2 goroutines, bytes/s of
// weights) and MatMul (64 and 512 tokens, GFLOP/s) on the unpacked and
// packed forms of the two 1B-model shapes q6_K takes (attn_v/ffn_down-like
// 2048 x 8192 and 8192 x 2048, cols x rows).
func BenchmarkPackedQ6K(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q6_K) == nil {
		b.Skipf("kernel set %s has no packed q6_K layout", ks.Name())
	}
	for _, shape := range [][2]int{{2048, 8192}, {8192, 2048}} {
		cols, rows := shape[0], shape[1]
		m, p, xq := benchQ6KMatrix(b, rows, cols, 512)
		y := make([]float32, 512*rows)
		for _, form := range []struct {
			name string
			m    *Matrix
		}{{"unpacked", m}, {"packed", p}} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%dx%d/MatVec/%dthr/%s", cols, rows, threads, form.name), func(b *testing.B) {
					b.SetBytes(int64(len(m.Data)))
					for b.Loop() {
						var wg sync.WaitGroup
						for th := 0; th < threads; th++ {
							// Thread shares aligned to the 16-row groups.
							r0, r1 := rows*th/threads/16*16, rows*(th+1)/threads/16*16
							wg.Go(func() { ks.MatVec(form.m, xq, y, r0, r1) })
						}
						wg.Wait()
					}
				})
			}
			for _, nTok := range []int{64, 512} {
				b.Run(fmt.Sprintf("%dx%d/MatMul%d/%s", cols, rows, nTok, form.name), func(b *testing.B) {
					for b.Loop() {
						ks.MatMul(form.m, xq, nTok, y, 0, rows)
					}
					b.ReportMetric(2*float64(rows)*float64(cols)*float64(nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkPackQ6K measures packing (bytes/s of GGUF input).
func BenchmarkPackQ6K(b *testing.B) {
	const rows, cols = 2048, 8192
	l := &packedQ6KBase
	rb := RowBytes(gguf.Q6_K, cols)
	m := &Matrix{Type: gguf.Q6_K, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < rows; i++ {
		simdRandomRow(r, gguf.Q6_K, m.Data[i*rb:(i+1)*rb])
	}
	dst := make([]byte, l.PackedSize(rows, cols))
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		l.PackRows(m, dst, 0, rows/16)
	}
}

// BenchmarkPackedQ6KDot measures the kernel alone on one group whose
// weights and activations stay in L2 (GFLOP/s), per token count.
func BenchmarkPackedQ6KDot(b *testing.B) {
	const cols = 2048
	_, layouts := q6kLayouts(b)
	r := rand.New(rand.NewPCG(3, 4))
	rb := RowBytes(gguf.Q6_K, cols)
	w := make([]byte, 16*rb)
	for i := 0; i < 16; i++ {
		simdRandomRow(r, gguf.Q6_K, w[i*rb:(i+1)*rb])
	}
	x := benchActivations(gguf.Q6_K, cols, 8)
	ab := ActivationBytes(gguf.Q6_K, cols)
	y := make([]float32, 8*16)
	for _, l := range layouts[1:] {
		g := make([]byte, l.GroupBytes(cols))
		l.Pack(g, w, cols)
		for _, nTok := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%s/tok%d", l.Name, nTok), func(b *testing.B) {
				for b.Loop() {
					l.Dot(cols, g, x, ab, nTok, y, 16)
				}
				b.ReportMetric(2*16*cols*float64(nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
