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

// q41Layouts returns the pure-Go q4_1 layout and the layouts of the kernel
// sets this CPU runs (the GFNI and plain forms of the avx512 kernels where
// the CPU has GFNI), each with its set.
func q41Layouts(t testing.TB) (sets []*Set, layouts []*PackedLayout) {
	return packedLayoutsOf(t, gguf.Q4_1, &packedQ41Base)
}

// TestPackedQ41Bytes reads every scale, offset and nibble back from the
// packed bytes by the layout documented in packed_q41.go and
// docs/FORMATS.md (written out here again) and compares them with the GGUF
// rows.
func TestPackedQ41Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 41))
		rb := RowBytes(gguf.Q4_1, cols)
		src := make([]byte, 16*rb)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		dst := make([]byte, packedQ41Base.GroupBytes(cols))
		for i := range dst {
			dst[i] = 0x5a // every byte must be written
		}
		packedQ41Base.Pack(dst, src, cols)
		for b := range nb {
			base := 320 * b
			for row := range 16 {
				blk := src[row*rb+20*b : row*rb+20*(b+1)]
				require.Equal(t, blk[0:2], dst[base+2*row:base+2*row+2], "nb %d block %d row %d d", nb, b, row)
				require.Equal(t, blk[2:4], dst[base+32+2*row:base+32+2*row+2], "nb %d block %d row %d m", nb, b, row)
				for v := range 32 {
					j := v % 16 // GGUF quant byte of value v
					got := dst[base+64+64*(j/4)+4*row+j%4]
					want := blk[4+j] & 0xf
					if v >= 16 {
						got, want = got>>4, blk[4+j]>>4
					} else {
						got &= 0xf
					}
					require.Equal(t, want, got, "nb %d block %d row %d value %d", nb, b, row, v)
				}
			}
		}
	}
}

// q41HandRows builds 16 q4_1 rows with block scale d, offset m and nibbles
// from q.
func q41HandRows(cols int, d, m uint16, q func(row, i int) uint8) []byte {
	rb := RowBytes(gguf.Q4_1, cols)
	src := make([]byte, 16*rb)
	for row := range 16 {
		for b := range cols / 32 {
			blk := src[row*rb+20*b:]
			binary.LittleEndian.PutUint16(blk, d)
			binary.LittleEndian.PutUint16(blk[2:], m)
			for j := range 16 {
				blk[4+j] = q(row, 32*b+j)&0xf | q(row, 32*b+16+j)<<4
			}
		}
	}
	return src
}

// TestPackedQ41Exact checks the integer parts exactly: with d and d_a 1 and
// integer m and s_a, every partial sum is an integer below 2^24, so each dot
// is the exact integer computed here in int64. Cases cover the extreme
// nibbles (0 and 15) against -128 and +127 activations (the quantizer never
// emits -128; the kernel must still take it), random nibbles and bytes,
// alternating patterns, and offsets m of +1, -2 and 0 against block sums
// s_a of 3, -5 and 0; for one block, odd and even block counts, every token
// count, and a stride that misaligns the activations.
func TestPackedQ41Exact(t *testing.T) {
	{
		_, layouts := q41Layouts(t)
		one := F32ToF16(1)
		type qcase struct {
			name string
			m    float32 // weight offset m of every block
			s    float32 // activation s_a of every block
			w    func(row, i int) uint8
			x    func(tok, i int) int8
		}
		r := rand.New(rand.NewPCG(4, 1))
		const maxCols = 32 * 35 // the most columns below
		rnd := make([]byte, (16+8)*maxCols)
		for i := range rnd {
			rnd[i] = byte(r.Uint32())
		}
		cases := []qcase{
			{"15x-128", 0, 0, func(int, int) uint8 { return 15 }, func(int, int) int8 { return -128 }},
			{"15x127", 0, 0, func(int, int) uint8 { return 15 }, func(int, int) int8 { return 127 }},
			{"0x-128", 1, 3, func(int, int) uint8 { return 0 }, func(int, int) int8 { return -128 }},
			{"15x-128 m-2", -2, -5, func(int, int) uint8 { return 15 }, func(int, int) int8 { return -128 }},
			{"random", -2, 3, func(row, i int) uint8 { return rnd[row*maxCols+i] & 0xf }, func(tok, i int) int8 { return int8(rnd[(16+tok)*maxCols+i]) }},
			{"alternating", 1, -5, func(row, i int) uint8 { return uint8((row + i) % 2 * 15) }, func(tok, i int) int8 { return int8(127 - (i+tok)%3*127) }},
			{"by position", 0, 0, func(row, i int) uint8 { return uint8(i+row) % 16 }, func(tok, i int) int8 { return int8(i%32 - 16 + tok) }},
		}
		for _, l := range layouts {
			for _, nb := range []int{1, 2, 3, 16, 17, 35} {
				cols := 32 * nb
				ab := ActivationBytes(gguf.Q4_1, cols)
				for _, c := range cases {
					g := make([]byte, l.GroupBytes(cols))
					l.Pack(g, q41HandRows(cols, one, F32ToF16(c.m), c.w), cols)
					for nTok := 1; nTok <= l.MaxTok; nTok++ {
						xStride := ab + 3 // misaligned tokens
						x := make([]byte, nTok*xStride)
						for tok := range nTok {
							for b := range nb {
								blk := x[tok*xStride+36*b:]
								binary.LittleEndian.PutUint16(blk, one)
								binary.LittleEndian.PutUint16(blk[2:], F32ToF16(c.s))
								for j := range 32 {
									blk[4+j] = byte(c.x(tok, 32*b+j))
								}
							}
						}
						const yStride = 21
						for _, dot := range []func(int, []byte, []byte, int, int, []float32, int){l.Dot, l.DotGeneric} {
							y := make([]float32, nTok*yStride)
							for i := range y {
								y[i] = float32(math.NaN())
							}
							dot(cols, g, x, xStride, nTok, y, yStride)
							for tok := range nTok {
								for row := range 16 {
									want := int64(nb) * int64(c.m) * int64(c.s)
									for i := range cols {
										want += int64(c.w(row, i)) * int64(c.x(tok, i))
									}
									require.Equal(t, float32(want), y[tok*yStride+row], "%s %s: %d blocks, %d tokens: token %d row %d", l.Name, c.name, nb, nTok, tok, row)
								}
								for i := tok*yStride + 16; i < (tok+1)*yStride && i < len(y); i++ {
									require.True(t, math.IsNaN(float64(y[i])), "%s: y[%d] past the group's rows written", l.Name, i)
								}
							}
						}
					}
				}
			}
		}
	}
}

// q41BenchMatrix returns a random rows x cols q4_1 matrix (quantized from
// normal values, so scales and offsets are realistic), unpacked and packed
// with the detected set's layout (nil when it has none).
func q41BenchMatrix(rows, cols int) (m, p *Matrix) {
	return packedBenchMatrix(gguf.Q4_1, rows, cols)
}

func q41BenchTokens(cols, nTok int) []byte {
	return packedBenchTokens(gguf.Q4_1, cols, nTok, 5)
}

// BenchmarkPackedQ41 compares MatMul (64 and 512 tokens) and MatVec on a
// matrix larger than L2 and on SmolLM2-135M's shapes (rows x cols), packed
// against the unpacked kernels (MatMulTiled's 4x4 tile kernel for
// prefill, the row kernel for MatVec), MatVec also from memory (copies
// rotated past the last-level cache), and measures Pack. Run with
// -benchtime 20x.
func BenchmarkPackedQ41(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q4_1) == nil {
		b.Skipf("kernel set %s has no packed q4_1 layout", ks.Name())
	}
	for _, shape := range [][2]int{{2048, 8192}, {1536, 576}, {576, 1536}, {576, 576}, {192, 576}, {49152, 576}} {
		rows, cols := shape[0], shape[1]
		m, p := q41BenchMatrix(rows, cols)
		mats := []struct {
			name string
			m    *Matrix
		}{{"unpacked", m}, {"packed", p}}
		for _, nTok := range []int{64, 512} {
			if rows*cols > 8<<20 && nTok > 64 {
				continue // keep the big shapes short
			}
			xq := q41BenchTokens(cols, nTok)
			y := make([]float32, nTok*rows)
			for _, mm := range mats {
				b.Run(fmt.Sprintf("MatMul/%dx%d/tok%d/%s", rows, cols, nTok, mm.name), func(b *testing.B) {
					b.SetBytes(int64(nTok) * int64(rows) * int64(cols)) // multiply-adds
					for b.Loop() {
						ks.MatMulTiled(mm.m, xq, nTok, y, 0, rows)
					}
					b.ReportMetric(2*float64(rows*cols*nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
		xq := q41BenchTokens(cols, 1)
		y := make([]float32, rows)
		for _, mm := range mats {
			b.Run(fmt.Sprintf("MatVec/%dx%d/%s", rows, cols, mm.name), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data))) // weight bytes streamed
				for b.Loop() {
					ks.MatVec(mm.m, xq, y, 0, rows)
				}
			})
		}
		b.Run(fmt.Sprintf("Pack/%dx%d", rows, cols), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				p.Layout.PackRows(m, p.Packed, 0, rows/16)
			}
		})
		if rows*cols < 8<<20 {
			continue
		}
		// Decode of a large matrix streams the weights from memory: rotate
		// over copies that together exceed the last-level cache.
		copies := max(2, (320<<20)/len(m.Data))
		ms, ps := make([]*Matrix, copies), make([]*Matrix, copies)
		for i := range copies {
			mc := *m
			mc.Data = slices.Clone(m.Data)
			pc := *p
			pc.Packed = slices.Clone(p.Packed)
			ms[i], ps[i] = &mc, &pc
		}
		for _, threads := range []int{1, 2} {
			for _, set := range []struct {
				name string
				ms   []*Matrix
			}{{"unpacked", ms}, {"packed", ps}} {
				b.Run(fmt.Sprintf("MatVecDRAM/%dx%d/thr%d/%s", rows, cols, threads, set.name), func(b *testing.B) {
					b.SetBytes(int64(len(m.Data)))
					var wg sync.WaitGroup
					i := 0
					for b.Loop() {
						mm := set.ms[i%copies]
						i++
						for th := range threads {
							r0 := rows * th / threads / 16 * 16
							r1 := rows * (th + 1) / threads / 16 * 16
							wg.Go(func() { ks.MatVec(mm, xq, y, r0, r1) })
						}
						wg.Wait()
					}
				})
			}
		}
	}
}

// BenchmarkPackedQ41Dot runs Dot alone on a few groups that stay in L1/L2
// (576 and 2048 columns), per token count: the kernel's compute rate.
func BenchmarkPackedQ41Dot(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q4_1) == nil {
		b.Skipf("kernel set %s has no packed q4_1 layout", ks.Name())
	}
	l := ks.Packed(gguf.Q4_1)
	for _, cols := range []int{576, 2048} {
		const groups = 4
		_, p := q41BenchMatrix(16*groups, cols)
		ab := ActivationBytes(gguf.Q4_1, cols)
		xq := q41BenchTokens(cols, l.MaxTok)
		y := make([]float32, l.MaxTok*16*groups)
		gb := l.GroupBytes(cols)
		for _, k := range []int{1, 2, 4, 8} {
			for _, gf := range []bool{false, true} {
				if gf && !hasGFNI() {
					continue
				}
				gs, err := newSet(ks.Name(), gf)
				require.NoError(b, err)
				l := gs.Packed(gguf.Q4_1)
				b.Run(fmt.Sprintf("%d/tok%d/gfni=%v", cols, k, gf), func(b *testing.B) {
					for b.Loop() {
						for g := range groups {
							l.Dot(cols, p.Packed[g*gb:(g+1)*gb], xq, ab, k, y[16*g:], 16*groups)
						}
					}
					b.ReportMetric(2*float64(k*16*groups*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestPackedQ41GenericBits checks that the generic set's q4_1 layout, whose
// Dot is the pure-Go twin, gives bit for bit what the generic row dot gives
// on the unpacked rows, so that packing never changes the generic set's
// results.
func TestPackedQ41GenericBits(t *testing.T) {
	l := &packedQ41Base
	ks, err := genericSet.WithPacked(gguf.Q4_1, l)
	require.NoError(t, err)
	for _, cols := range []int{32, 576, 1536} {
		const rows, nTok = 35, 11
		m, _ := q41BenchMatrix(rows, cols)
		p := *m
		p.Layout = l
		p.Packed = make([]byte, l.PackedSize(rows, cols))
		l.PackRows(m, p.Packed, 0, rows/16)
		xq := q41BenchTokens(cols, nTok)
		ab := ActivationBytes(gguf.Q4_1, cols)
		packed := rows / 16 * 16
		for _, nt := range []int{1, 4, nTok} {
			got := make([]float32, nt*rows)
			ks.MatMulTiled(&p, xq, nt, got, 0, rows)
			for k := range nt {
				for r := range packed {
					want := dotQ4_1Generic(cols, m.Row(r), xq[k*ab:(k+1)*ab])
					require.Equal(t, math.Float32bits(want), math.Float32bits(got[k*rows+r]), "%d cols, %d tokens: token %d row %d: got %g want %g", cols, nt, k, r, got[k*rows+r], want)
				}
			}
		}
	}
}
