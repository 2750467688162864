package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// TestFastQuantizeRow compares FastQuantizeRow with QuantizeRow byte for
// byte for the Q8_0 and Q8_1 activation types with every kernel set: random
// rows at several scales, an all-zero block, and halfway cases (a block
// whose largest magnitude is 127 makes the scale 1, so k+0.5 values round
// to even).
func TestFastQuantizeRow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, ks := range testSets(t) {
		v := ks.Name()
		for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q8_1} {
			for _, n := range []int{32, 64, 576, 1536} {
				t.Run(fmt.Sprintf("%s/%v/n=%d", v, typ, n), func(t *testing.T) {
					for _, scale := range []float64{1e-3, 1, 50} {
						x := make([]float32, n)
						for i := range x {
							x[i] = float32(r.NormFloat64() * scale)
						}
						if n >= 64 {
							clear(x[32:64]) // an all-zero block
						}
						if n >= 96 {
							x[64] = 127
							for i := 65; i < 96; i++ {
								x[i] = float32(r.IntN(200)-100) + 0.5
							}
						}
						want := make([]byte, RowBytes(typ, n))
						got := make([]byte, len(want))
						QuantizeRow(typ, x, want)
						ks.FastQuantizeRow(typ, x, got)
						require.Equal(t, want, got)
					}
				})
			}
		}
	}
}
