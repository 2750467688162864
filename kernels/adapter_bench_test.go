package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
)

// BenchmarkCallOverhead times the row, four-row and four-token kernels of
// the SIMD sets on one-block rows, where the cost of the Go side (bounds
// checks, the adapter's dispatch) shows next to the arithmetic.
func BenchmarkCallOverhead(b *testing.B) {
	for _, v := range simdSetNames() {
		ks := mustSet(b, v)
		for _, t := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.Q4_K, gguf.F32} {
			n := t.BlockSize()
			if n == 1 {
				n = 32
			}
			r := rand.New(rand.NewPCG(1, 2))
			w := make([]byte, 4*RowBytes(t, n))
			for i := 0; i < 4; i++ {
				simdRandomRow(r, t, w[i*RowBytes(t, n):(i+1)*RowBytes(t, n)])
			}
			x := benchActivations(t, n, 4)
			y := make([]float32, 4)
			one, many, tok := ks.types[t].row, ks.types[t].rows, ks.types[t].tokens
			b.Run(fmt.Sprintf("%s/%v/row", v, t), func(b *testing.B) {
				for b.Loop() {
					y[0] = one(n, w, x)
				}
			})
			b.Run(fmt.Sprintf("%s/%v/rows4", v, t), func(b *testing.B) {
				for b.Loop() {
					many(n, w, RowBytes(t, n), x, y)
				}
			})
			if tok != nil {
				b.Run(fmt.Sprintf("%s/%v/tok4", v, t), func(b *testing.B) {
					for b.Loop() {
						tok(n, w, x, ActivationBytes(t, n), 4, y, 1)
					}
				})
			}
		}
	}
}

// simdSetNames lists the SIMD kernel sets this CPU runs.
func simdSetNames() []string {
	var out []string
	for _, v := range Available() {
		if v != "generic" {
			out = append(out, v)
		}
	}
	return out
}
