package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestBatchInvariance checks that every product kernel computes a token's
// row the same whatever the batch: MatMulTiled over nTok tokens gives, for
// each token, bit for bit what MatVec gives for that token alone, for every
// weight type, kernel set, packed or GGUF layout, batch size and place in
// the batch. Batched decoding (several sequences in one step) and prefix
// reuse rely on it.
func TestBatchInvariance(t *testing.T) {
	const maxTok = 21
	for _, typ := range weightTypes {
		for _, cols := range []int{256, 512, 64, 160} {
			if cols%typ.BlockSize() != 0 {
				continue
			}
			rows := 16*2 + 5 // two packed groups and rows left in the GGUF layout
			rng := rand.New(rand.NewPCG(uint64(typ), 99))
			rb := RowBytes(typ, cols)
			m := &Matrix{Type: typ, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
			for r := range rows {
				copy(m.Data[r*rb:], randomRow(rng, typ, cols))
			}
			for _, ks := range testSets(t) {
				mats := map[string]*Matrix{"gguf": m}
				if pm := packedCopy(ks, m); pm != nil {
					mats["packed"] = pm
				}
				for lname, mm := range mats {
					t.Run(fmt.Sprintf("%v/%d/%s/%s", typ, cols, ks.Name(), lname), func(t *testing.T) {
						at := ActType(mm)
						ab := ActBytes(mm, cols)
						xq := make([]byte, maxTok*ab)
						for k := range maxTok {
							ks.QuantizeAct(at, randomFloats(rng, cols, 1), xq[k*ab:(k+1)*ab])
						}
						alone := make([]float32, maxTok*rows)
						for k := range maxTok {
							ks.MatVec(mm, xq[k*ab:(k+1)*ab], alone[k*rows:(k+1)*rows], 0, rows)
						}
						y := make([]float32, maxTok*rows)
						bad := map[string]int{}
						// A row's result does not depend on the row range either
						// (threads split matrices by rows).
						for _, cut := range []int{1, 5, 16, 17} {
							clear(y)
							ks.MatVec(mm, xq, y[:rows], 0, cut)
							ks.MatVec(mm, xq, y[:rows], cut, rows)
							ks.MatMul(mm, xq, 3, y, cut, rows)
							ks.MatMul(mm, xq, 3, y, 0, cut)
							for r := range rows {
								if math.Float32bits(y[r]) != math.Float32bits(alone[r]) {
									bad[fmt.Sprintf("MatVec split at %d", cut)]++
								}
								for k := range 3 {
									if math.Float32bits(y[k*rows+r]) != math.Float32bits(alone[k*rows+r]) {
										bad[fmt.Sprintf("MatMul split at %d", cut)]++
									}
								}
							}
						}
						for n := 2; n <= maxTok; n++ {
							for off := range []int{0, 1} {
								if off+n > maxTok {
									continue
								}
								clear(y)
								ks.MatMulTiled(mm, xq[off*ab:], n, y, 0, rows)
								for k := range n {
									for r := range rows {
										g, w := y[k*rows+r], alone[(off+k)*rows+r]
										if math.Float32bits(g) != math.Float32bits(w) {
											bad[fmt.Sprintf("n=%d tail=%v", n, r >= 32)]++
										}
									}
								}
							}
						}
						if len(bad) > 0 {
							t.Errorf("%v", bad)
						}
					})
				}
			}
		}
	}
}
