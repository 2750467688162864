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

// q4kLayouts returns the pure-Go q4_K layout and the layouts of the kernel
// sets this CPU runs (the GFNI and plain forms of the avx512 kernels where
// the CPU has GFNI), each with its set.
func q4kLayouts(t testing.TB) (sets []*Set, layouts []*PackedLayout) {
	return packedLayoutsOf(t, gguf.Q4_K, &packedQ4KBase)
}

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
	sets, layouts := q4kLayouts(t)
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
					g := make([]byte, l.GroupBytes(cols))
					l.Pack(g, src, cols)
					for _, dot := range []struct {
						name string
						fn   func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
					}{{"DotGeneric", l.DotGeneric}, {"Dot", l.Dot}} {
						// Token counts that reach every kernel path
						// (1, 4 and 8 tokens and their sums).
						for _, nt := range []int{1, 3, 4, 5, 8} {
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

// TestPackedQ4KQuantvec packs ggml's own q4_K rows from quantvec.gguf (its
// 8 rows, then the same rows in reverse order) and checks every layout's
// Dot and DotGeneric against the dot products ggml's CPU kernel computed
// with the file's q8_K activations.
func TestPackedQ4KQuantvec(t *testing.T) {
	q := openQuantvec(t)
	sets, layouts := q4kLayouts(t)
	w := q.tensor(t, "q4_K.q").Data
	x := q.tensor(t, "x.q8_K").Data
	ref := q.f32(t, "q4_K.dot")
	rb := RowBytes(gguf.Q4_K, q.cols)
	require.Len(t, w, q.rows*rb)
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
		bound[i] = simdDotBound(t, gguf.Q4_K, q.cols, w[r*rb:(r+1)*rb], x)
	}
	for li, l := range layouts {
		g := make([]byte, l.GroupBytes(q.cols))
		l.Pack(g, src, q.cols)
		xs := slices.Repeat(x, l.MaxTok)
		for _, dot := range []struct {
			name string
			fn   func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
		}{{"DotGeneric", l.DotGeneric}, {"Dot", l.Dot}} {
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
	sets, layouts := q4kLayouts(t)
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
		g := make([]byte, l.GroupBytes(cols))
		l.Pack(g, src, cols)
		for _, dot := range []struct {
			name string
			fn   func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
		}{{"DotGeneric", l.DotGeneric}, {"Dot", l.Dot}} {
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

// benchQ4KMatrix makes a random rows x cols q4_K matrix, its packed twin
// (nil when no SIMD layout is installed) and nTok quantized tokens.
func benchQ4KMatrix(b *testing.B, rows, cols, nTok int) (m, p *Matrix, xq []byte) {
	ks := Detect()
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	rb := RowBytes(gguf.Q4_K, cols)
	m = &Matrix{Type: gguf.Q4_K, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	simdRandomRow(r, gguf.Q4_K, m.Data)
	ab := ActivationBytes(gguf.Q4_K, cols)
	xq = make([]byte, nTok*ab)
	act := make([]float32, cols)
	for k := range nTok {
		for i := range act {
			act[i] = float32(r.NormFloat64())
		}
		QuantizeRow(gguf.Q8_K, act, xq[k*ab:(k+1)*ab])
	}
	return m, packedCopy(ks, m), xq
}

// BenchmarkPackedQ4K compares MatVec (1 and 2 goroutines) and MatMulTiled
// (64 and 512 tokens) on 1B-shaped q4_K matrices, packed vs GGUF rows:
//
//	go test -run X -bench PackedQ4K -benchtime 20x ./kernels/
func BenchmarkPackedQ4K(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q4_K) == nil {
		b.Skipf("no packed q4_K layout in the %s kernel set", ks.Name())
	}
	for _, shape := range [][2]int{{8192, 2048}, {2048, 8192}} {
		rows, cols := shape[0], shape[1]
		m, p, xq := benchQ4KMatrix(b, rows, cols, 512)
		for _, op := range []struct {
			name      string
			nTok, thr int
		}{{"matvec", 1, 1}, {"matvec-2thr", 1, 2}, {"matmul64", 64, 1}, {"matmul512", 512, 1}} {
			y := make([]float32, op.nTok*rows)
			for _, mat := range []struct {
				name string
				m    *Matrix
			}{{"gguf", m}, {"packed", p}} {
				b.Run(fmt.Sprintf("%dx%d/%s/%s", rows, cols, op.name, mat.name), func(b *testing.B) {
					b.SetBytes(int64(len(m.Data)))
					for range b.N {
						if op.nTok == 1 {
							if op.thr == 1 {
								ks.MatVec(mat.m, xq, y, 0, rows)
								continue
							}
							var wg sync.WaitGroup
							for i := range op.thr {
								wg.Go(func() { ks.MatVec(mat.m, xq, y, rows*i/op.thr, rows*(i+1)/op.thr) })
							}
							wg.Wait()
							continue
						}
						ks.MatMulTiled(mat.m, xq, op.nTok, y, 0, rows)
					}
				})
			}
		}
	}
}

// BenchmarkPackQ4K measures packing speed in MB/s of GGUF rows.
func BenchmarkPackQ4K(b *testing.B) {
	const rows, cols = 2048, 2048
	m, _, _ := benchQ4KMatrix(b, rows, cols, 1)
	dst := make([]byte, packedQ4KBase.PackedSize(rows, cols))
	b.SetBytes(int64(len(m.Data)))
	for range b.N {
		packedQ4KBase.PackRows(m, dst, 0, rows/16)
	}
}

// BenchmarkPackedQ4KDot runs Dot on one L1-resident group (2048 columns)
// for each token count, reporting multiply-adds per nanosecond.
func BenchmarkPackedQ4KDot(b *testing.B) {
	ks := Detect()
	l := ks.Packed(gguf.Q4_K)
	if l == nil {
		b.Skipf("no packed q4_K layout in the %s kernel set", ks.Name())
	}
	const cols = 2048
	m, p, xq := benchQ4KMatrix(b, 16, cols, l.MaxTok)
	_ = m
	ab := ActivationBytes(gguf.Q4_K, cols)
	y := make([]float32, 16*l.MaxTok)
	for nt := 1; nt <= l.MaxTok; nt++ {
		b.Run(fmt.Sprint(nt), func(b *testing.B) {
			for range b.N {
				l.Dot(cols, p.Packed, xq, ab, nt, y, 16)
			}
			b.ReportMetric(float64(16*cols*nt)*float64(b.N)/float64(b.Elapsed().Nanoseconds()), "MAC/ns")
		})
	}
}
