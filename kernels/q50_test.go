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
			require.NotNil(t, ks.types[gguf.Q5_0].tokens, "%s has no multi-token q5_0 kernel", v)
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
						// 13 tokens: the eight-, four- and one-token kernels.
						y := make([]float32, 13)
						ks.types[gguf.Q5_0].tokens(n, w, slices.Repeat(xq, len(y)), len(xq), len(y), y, 1)
						for k := range y {
							require.Equal(t, want, y[k], "token %d", k)
						}
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

// TestQ5_0TokensMatchGeneric: the multi-token kernel for every token count
// 1..8 (and 13), with padded activation strides and a y stride whose gaps
// must stay untouched.
func TestQ5_0TokensMatchGeneric(t *testing.T) {
	q50Sets(t, func(t *testing.T, ks *Set) {
		multi := ks.types[gguf.Q5_0].tokens
		for _, nb := range []int{1, 2, 3, 7, 20, 64} {
			for _, nTok := range []int{1, 2, 3, 4, 5, 6, 7, 8, 13} {
				t.Run(fmt.Sprintf("nb=%d/tok=%d", nb, nTok), func(t *testing.T) {
					r := rand.New(rand.NewPCG(uint64(nb), uint64(100+nTok)))
					n := 32 * nb
					w := randomRow(r, gguf.Q5_0, n)
					ab := ActivationBytes(gguf.Q5_0, n)
					xStride := ab + nTok%3
					x := make([]byte, nTok*xStride)
					for k := range nTok {
						copy(x[k*xStride:], q50Acts(r, n, 2))
					}
					const yStride = 3
					y := make([]float32, nTok*yStride)
					for i := range y {
						y[i] = -12345
					}
					multi(n, w, x, xStride, nTok, y, yStride)
					for k := range nTok {
						xk := x[k*xStride : k*xStride+ab]
						want := dotQ5_0Generic(n, w, xk)
						_, mag := refDot(gguf.Q5_0, w, xk, n)
						require.InDelta(t, want, y[k*yStride], 1e-5*mag+1e-30, "token %d (generic %v, %s %v)", k, want, ks.Name(), y[k*yStride])
						require.Equal(t, float32(-12345), y[k*yStride+1], "y written between outputs")
						require.Equal(t, float32(-12345), y[k*yStride+2], "y written between outputs")
					}
				})
			}
		}
	})
}

// TestQ5_0MatMulMatVec: MatVec and MatMul (which use the three kernels)
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
		x5 := slices.Repeat(xq, 5)
		y := make([]float32, nrows)
		allocs := testing.AllocsPerRun(20, func() {
			y[0] = ks.types[gguf.Q5_0].row(n, w, xq)
			ks.types[gguf.Q5_0].rows(n, w, RowBytes(gguf.Q5_0, n), xq, y)
			ks.types[gguf.Q5_0].tokens(n, w, x5, len(xq), 5, y, 1)
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
