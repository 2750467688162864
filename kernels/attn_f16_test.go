package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDotF16Rows checks DotF16Rows against DotF16 row by row, exactly, on
// every variant, for strides wider than the row and row lengths around the
// SIMD widths.
func TestDotF16Rows(t *testing.T) {
	prev := Variant
	defer func() { _ = SetVariant(prev) }()
	r := rand.New(rand.NewPCG(7, 8))
	for _, v := range Variants() {
		require.NoError(t, SetVariant(v))
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
					DotF16Rows(x, rows, stride, y)
					for i := range y {
						require.Equal(t, DotF16(x, rows[i*stride:i*stride+n]), y[i], "row %d", i)
					}
				})
			}
		}
	}
	require.Panics(t, func() { DotF16Rows(make([]uint16, 4), make([]uint16, 7), 4, make([]float32, 2)) })
}
