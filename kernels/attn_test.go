package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDotF16Rows checks DotF16Rows against DotF16 row by row, exactly, on
// every kernel set, for strides wider than the row and row lengths around the
// SIMD widths.
func TestDotF16Rows(t *testing.T) {
	ks := Detect()
	r := rand.New(rand.NewPCG(7, 8))
	for _, ks := range testSets(t) {
		v := ks.Name()
		for _, n := range []int{1, 7, 16, 33, 64, 200} {
			for _, extra := range []int{0, 5, 64} {
				t.Run(fmt.Sprintf("%s/n=%d/stride=n+%d", v, n, extra), func(t *testing.T) {
					stride, nr := n+extra, 9
					rows := make([]uint16, (nr-1)*stride+n)
					for i := range rows {
						rows[i] = F32ToF16(float32(r.NormFloat64()))
					}
					x := make([]uint16, n)
					for i := range x {
						x[i] = F32ToF16(float32(r.NormFloat64()))
					}
					y := make([]float32, nr)
					ks.DotF16Rows(x, rows, stride, y)
					for i := range y {
						require.Equal(t, ks.DotF16(x, rows[i*stride:i*stride+n]), y[i], "row %d", i)
					}
				})
			}
		}
	}
	require.Panics(t, func() { ks.DotF16Rows(make([]uint16, 4), make([]uint16, 7), 4, make([]float32, 2)) })
}

// TestFastF16Encode compares FastF16Encode with F32ToF16 bit for bit on
// random values over the whole f16 range and beyond (subnormals, overflow to
// infinity, halfway cases) with every kernel set.
func TestFastF16Encode(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, 1<<16+3)
	for i := range src {
		switch i % 4 {
		case 0: // any finite float32 bit pattern in a wide exponent range
			src[i] = math.Float32frombits(r.Uint32()&0x807fffff | uint32(100+r.IntN(60))<<23)
		case 1: // halfway between two f16 values
			src[i] = F16ToF32(uint16(r.IntN(0x7c00))) * (1 + 0x1p-11)
		default:
			src[i] = float32(r.NormFloat64() * 1000)
		}
	}
	src[0], src[1], src[2] = float32(math.Inf(1)), float32(math.Inf(-1)), 0
	for _, ks := range testSets(t) {
		v := ks.Name()
		got := make([]uint16, len(src))
		ks.FastF16Encode(got, src)
		for i, x := range src {
			require.Equal(t, F32ToF16(x), got[i], "%s: %g (%#x)", v, x, math.Float32bits(x))
		}
	}
}

// TestAttnDotF16RowsMulti checks the multi-query product against
// AttnDotF16Rows query by query, bit for bit, over query counts around the
// kernels' 4, row counts around their groups of 4, lengths with and
// without a tail of under 16 values, and strides wider than the vectors.
func TestAttnDotF16RowsMulti(t *testing.T) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(23, 29))
	f16 := func(n int) []uint16 {
		v := make([]uint16, n)
		for i := range v {
			x := float32(rng.NormFloat64())
			if rng.IntN(10) == 0 {
				x = 0
			}
			v[i] = F32ToF16(x)
		}
		return v
	}
	for _, n := range []int{1, 15, 16, 17, 33, 64, 100, 512} {
		for _, nx := range []int{1, 2, 3, 4, 5, 8} {
			for _, m := range []int{1, 3, 4, 5, 8, 13} {
				xStride, stride, yStride := n+rng.IntN(3), n+rng.IntN(5), m+rng.IntN(3)
				x := f16((nx-1)*xStride + n)
				rows := f16((m-1)*stride + n)
				y := make([]float32, (nx-1)*yStride+m)
				xf := make([]float32, len(x))
				F16Decode(xf, x)
				ks.AttnDotF16RowsMulti(xf, nx, xStride, n, rows, stride, m, y, yStride)
				want := make([]float32, m)
				for g := 0; g < nx; g++ {
					ks.AttnDotF16Rows(x[g*xStride:g*xStride+n], rows, stride, want)
					for i := range want {
						require.Equal(t, math.Float32bits(want[i]), math.Float32bits(y[g*yStride+i]),
							"n %d nx %d m %d: query %d row %d: %v vs %v", n, nx, m, g, i, y[g*yStride+i], want[i])
					}
				}
			}
		}
	}
	require.Panics(t, func() {
		ks.AttnDotF16RowsMulti(make([]float32, 10), 2, 8, 8, make([]uint16, 8), 8, 1, make([]float32, 2), 1)
	})
	// RoundF16 against F32ToF16 and back, including values that round
	// to infinity, subnormals and ties.
	src := []float32{1, -1.0009765625, 65520, -65519, 1e-7, 3e-8, 0.1, 2049, 2051}
	for len(src) < 37 {
		src = append(src, float32(rng.NormFloat64()*1000))
	}
	got := make([]float32, len(src))
	ks.RoundF16(got, src)
	for i, v := range src {
		require.Equal(t, math.Float32bits(F16ToF32(F32ToF16(v))), math.Float32bits(got[i]), "%g", v)
	}
}

// BenchmarkAttnDotF16RowsMulti times the two shapes of SmolLM2's prefill
// attention at 512 positions: three heads' weights against the 64
// transposed value rows ("values"), and their queries against 512 keys
// 192 values apart ("scores").
func BenchmarkAttnDotF16RowsMulti(b *testing.B) {
	b.Run("values", func(b *testing.B) { benchAttnMulti(b, 512, 64, 3, 512) })
	b.Run("scores", func(b *testing.B) { benchAttnMulti(b, 64, 512, 3, 192) })
}

func benchAttnMulti(b *testing.B, n, m, nx, stride int) {
	ks := Detect()
	rng := rand.New(rand.NewPCG(1, 2))
	x, rows := make([]uint16, nx*n), make([]uint16, (m-1)*stride+n)
	for i := range x {
		x[i] = F32ToF16(float32(rng.NormFloat64()))
	}
	for i := range rows {
		rows[i] = F32ToF16(float32(rng.NormFloat64()))
	}
	y := make([]float32, nx*m)
	xf := make([]float32, len(x))
	F16Decode(xf, x)
	b.Run("multi", func(b *testing.B) {
		for b.Loop() {
			ks.AttnDotF16RowsMulti(xf, nx, n, n, rows, stride, m, y, m)
		}
	})
	b.Run("per-query", func(b *testing.B) {
		for b.Loop() {
			for g := 0; g < nx; g++ {
				ks.AttnDotF16Rows(x[g*n:(g+1)*n], rows, stride, y[g*m:(g+1)*m])
			}
		}
	})
}

// TestAttnScoresF16Heads checks AttnScoresF16Heads against
// AttnDotF16RowsMulti run KV head by KV head, bit for bit, on every kernel
// set, for group sizes around the kernel's 4 queries, head sizes around its
// 16 lanes and key counts around its 4 rows and tiles.
func TestAttnScoresF16Heads(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, ks := range testSets(t) {
		for _, shape := range [][3]int{{8, 4, 64}, {2, 1, 16}, {3, 5, 40}, {1, 8, 128}, {4, 3, 7}, {2, 4, 20}} {
			kvh, G, hd := shape[0], shape[1], shape[2]
			for _, m := range []int{1, 3, 4, 9, 33, 101} {
				stride := kvh*hd + 3
				keys := make([]uint16, (m-1)*stride+kvh*hd)
				for i := range keys {
					keys[i] = F32ToF16(float32(r.NormFloat64()))
				}
				q := make([]float32, kvh*G*hd)
				for i := range q {
					q[i] = F16ToF32(F32ToF16(float32(r.NormFloat64())))
				}
				yStride := m + 2
				got := make([]float32, kvh*G*yStride)
				want := make([]float32, len(got))
				ks.AttnScoresF16Heads(q, kvh, G, hd, keys, stride, m, got, yStride)
				for g := range kvh {
					ks.AttnDotF16RowsMulti(q[g*G*hd:], G, hd, hd, keys[g*hd:], stride, m, want[g*G*yStride:], yStride)
				}
				require.Equal(t, want, got, "%s kvh=%d G=%d hd=%d m=%d", ks.Name(), kvh, G, hd, m)
			}
		}
		require.Panics(t, func() {
			ks.AttnScoresF16Heads(make([]float32, 8), 2, 1, 4, make([]uint16, 7), 8, 1, make([]float32, 2), 1)
		})
	}
}
