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
