package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
)

// TestBatchInvariance checks that every product kernel computes a token's
// row the same whatever the batch: MatMul over nTok tokens gives, for
// each token, bit for bit what MatVec gives for that token alone, for every
// weight type, kernel set (and form of its packed kernels: packedSets),
// packed or GGUF layout, batch size and place in the batch. Batched decoding (several sequences in one step) and prefix
// reuse rely on it.
func TestBatchInvariance(t *testing.T) {
	const maxTok = 21
	for _, typ := range weightTypes {
		for _, cols := range []int{256, 512, 64, 160, 77} { // 77: f16/f32 row tails
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
			for _, ks := range packedSets(t) {
				mats := map[string]*Matrix{"gguf": m}
				if pm := packedCopy(ks, m); pm != nil {
					mats["packed"] = pm
				}
				for lname, mm := range mats {
					t.Run(fmt.Sprintf("%v/%d/%s/gfni=%v/%s", typ, cols, ks.Name(), ks.gfni, lname), func(t *testing.T) {
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
								ks.MatMul(mm, xq[off*ab:], n, y, 0, rows)
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

// TestTokensKernelsInvariant checks each multi-token kernel directly
// against its set's row kernel: for every token count 1..13 (groups of
// four and the last nTok%4 tokens), row lengths of odd and even block
// counts and a padded activation stride, every token's result is bit for
// bit the row kernel's for that token alone.
func TestTokensKernelsInvariant(t *testing.T) {
	for _, ks := range testSets(t) {
		if ks.Name() == "avx512" && ks.types[gguf.F16].tokens == nil {
			t.Errorf("the avx512 set has no multi-token f16 kernel")
		}
		if ks.Name() == "avx2" {
			// The formats whose four-token kernels the avx2 set must have.
			for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q4_K, gguf.Q6_K, gguf.F16} {
				if ks.types[typ].tokens == nil {
					t.Errorf("the avx2 set has no multi-token %v kernel", typ)
				}
			}
		}
		for _, typ := range weightTypes {
			multi := ks.types[typ].tokens
			if multi == nil {
				continue
			}
			one := ks.RowDot(typ)
			bs := typ.BlockSize()
			blocks := []int{1, 2, 3, 5, 8}
			if bs == 1 {
				// Values, not blocks (f16, f32): the 32- and 8-value
				// steps and the tails of the row kernels.
				blocks = []int{1, 7, 8, 9, 31, 32, 33, 40, 71, 100, 771}
			}
			for _, nb := range blocks {
				n := nb * bs
				for nTok := 1; nTok <= 13; nTok++ {
					rng := rand.New(rand.NewPCG(uint64(typ)<<8|uint64(nb), uint64(nTok)))
					w := randomRow(rng, typ, n)
					at := VecDotType(typ)
					ab := ActivationBytes(typ, n)
					xStride := ab + 7
					x := make([]byte, nTok*xStride)
					for k := range nTok {
						ks.QuantizeAct(at, randomFloats(rng, n, 1), x[k*xStride:k*xStride+ab])
					}
					const yStride = 2
					y := make([]float32, nTok*yStride)
					multi(n, w, x, xStride, nTok, y, yStride)
					for k := range nTok {
						want := one(n, w, x[k*xStride:k*xStride+ab])
						if math.Float32bits(y[k*yStride]) != math.Float32bits(want) {
							t.Errorf("%s %v, %d blocks, %d tokens: token %d = %v, alone %v", ks.Name(), typ, nb, nTok, k, y[k*yStride], want)
						}
					}
				}
			}
		}
	}
}

// TestTileKernelsInvariant checks each tile kernel (several rows against
// several tokens) directly against its set's row kernel: for every row
// count 1..8 and token count 1..13 (the whole tiles, the rows and tokens
// left over), row lengths through the 32- and 8-value steps and one the
// tile kernels leave to the four-token kernels (77), padded row,
// activation and result strides, every (row, token) result is bit for bit
// the row kernel's for that row and token alone, and nothing else in y is
// written.
func TestTileKernelsInvariant(t *testing.T) {
	for _, ks := range testSets(t) {
		if ks.types[gguf.F16].tile == nil {
			t.Errorf("the %s set has no f16 tile kernel", ks.Name())
		}
		for _, typ := range weightTypes {
			tile := ks.types[typ].tile
			if tile == nil {
				continue
			}
			one := ks.RowDot(typ)
			bs := typ.BlockSize()
			blocks := []int{1, 2, 3, 5, 8}
			if bs == 1 {
				blocks = []int{8, 16, 24, 32, 40, 56, 64, 77, 96, 264}
			}
			for _, nb := range blocks {
				n := nb * bs
				rng := rand.New(rand.NewPCG(uint64(typ)<<8|uint64(nb), 7))
				const maxRows, maxTok = 8, 13
				rowBytes := RowBytes(typ, n) + 6
				w := make([]byte, maxRows*rowBytes)
				for r := range maxRows {
					copy(w[r*rowBytes:], randomRow(rng, typ, n))
				}
				at := VecDotType(typ)
				ab := ActivationBytes(typ, n)
				xStride := ab + 7
				x := make([]byte, maxTok*xStride)
				for k := range maxTok {
					ks.QuantizeAct(at, randomFloats(rng, n, 1), x[k*xStride:k*xStride+ab])
				}
				want := make([]float32, maxTok*maxRows)
				for k := range maxTok {
					for r := range maxRows {
						want[k*maxRows+r] = one(n, w[r*rowBytes:r*rowBytes+RowBytes(typ, n)], x[k*xStride:k*xStride+ab])
					}
				}
				bad := 0
				for nRows := 1; nRows <= maxRows; nRows++ {
					for nTok := 1; nTok <= maxTok; nTok++ {
						yStride := nRows + 2
						y := make([]float32, nTok*yStride)
						sentinel := float32(math.Inf(-1))
						for i := range y {
							y[i] = sentinel
						}
						tile(n, w[:nRows*rowBytes], rowBytes, nRows, x[:nTok*xStride], xStride, nTok, y, yStride)
						for k := range nTok {
							for c := range yStride {
								g := y[k*yStride+c]
								if c >= nRows {
									if g != sentinel {
										t.Errorf("%s %v, %d values, %dx%d: wrote y[%d] past row %d of token %d", ks.Name(), typ, n, nRows, nTok, k*yStride+c, nRows, k)
									}
									continue
								}
								if wnt := want[k*maxRows+c]; math.Float32bits(g) != math.Float32bits(wnt) {
									if bad++; bad <= 10 {
										t.Errorf("%s %v, %d values, %d rows x %d tokens: row %d token %d = %v, alone %v", ks.Name(), typ, n, nRows, nTok, c, k, g, wnt)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}
