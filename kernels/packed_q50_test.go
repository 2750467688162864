package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// q50Layouts returns the pure-Go q5_0 layout and the layouts of the kernel
// sets this CPU runs, each with its set.
func q50Layouts(t testing.TB) (sets []*Set, layouts []*PackedLayout) {
	return packedLayoutsOf(t, gguf.Q5_0, &packedQ50Base)
}

// TestPackedQ50Bytes reads every scale, fifth bit and nibble back from the
// packed bytes by the layout documented in packed_q50.go and
// docs/FORMATS.md (written out here again) and compares them with the GGUF
// rows.
func TestPackedQ50Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 50))
		rb := RowBytes(gguf.Q5_0, cols)
		src := make([]byte, 16*rb)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		dst := make([]byte, packedQ50Base.GroupBytes(cols))
		for i := range dst {
			dst[i] = 0x5a // every byte must be written
		}
		packedQ50Base.Pack(dst, src, cols)
		for b := range nb {
			base := 352 * b
			for row := range 16 {
				blk := src[row*rb+22*b : row*rb+22*(b+1)]
				require.Equal(t, blk[0:2], dst[base+2*row:base+2*row+2], "nb %d block %d row %d d", nb, b, row)
				qh := binary.LittleEndian.Uint32(blk[2:])
				for v := range 32 {
					j := v % 16 // GGUF quant byte of value v
					h := v / 16
					c := j / 4
					got := dst[base+96+64*c+4*row+j%4]
					want := blk[6+j] & 0xf
					if h == 1 {
						got, want = got>>4, blk[6+j]>>4
					} else {
						got &= 0xf
					}
					require.Equal(t, want, got, "nb %d block %d row %d value %d nibble", nb, b, row, v)
					mask := binary.LittleEndian.Uint64(dst[base+32+8*(4*h+c):])
					require.Equal(t, qh>>v&1, uint32(mask>>(4*row+j%4)&1), "nb %d block %d row %d value %d fifth bit", nb, b, row, v)
				}
			}
		}
	}
}

// q50HandRows builds 16 q5_0 rows with block scale d and 5-bit quants from
// q (0..31; the value is q-16).
func q50HandRows(cols int, d uint16, q func(row, i int) uint8) []byte {
	rb := RowBytes(gguf.Q5_0, cols)
	src := make([]byte, 16*rb)
	for row := range 16 {
		for b := range cols / 32 {
			blk := src[row*rb+22*b:]
			binary.LittleEndian.PutUint16(blk, d)
			var qh uint32
			for j := range 32 {
				qh |= uint32(q(row, 32*b+j)>>4&1) << j
			}
			binary.LittleEndian.PutUint32(blk[2:], qh)
			for j := range 16 {
				blk[6+j] = q(row, 32*b+j)&0xf | q(row, 32*b+16+j)<<4
			}
		}
	}
	return src
}

// TestPackedQ50Exact checks the integer parts exactly: with d and d_a 1
// every partial sum is an integer below 2^24, so each dot is the exact
// integer computed here in int64. Cases cover the extreme quants (0, 15,
// 16 and 31: fifth bits all clear or all set, nibbles 0 and 15) against
// -128 and +127 activations (the quantizer never emits -128; the kernel
// must still take it), random quants and bytes, alternating patterns; for
// one block, odd and even block counts, every token count, and a stride
// that misaligns the activations.
func TestPackedQ50Exact(t *testing.T) {
	_, layouts := q50Layouts(t)
	one := F32ToF16(1)
	type qcase struct {
		name string
		w    func(row, i int) uint8
		x    func(tok, i int) int8
	}
	r := rand.New(rand.NewPCG(5, 1))
	const maxCols = 32 * 35 // the most columns below
	rnd := make([]byte, (16+8)*maxCols)
	for i := range rnd {
		rnd[i] = byte(r.Uint32())
	}
	konst := func(q uint8) func(int, int) uint8 { return func(int, int) uint8 { return q } }
	act := func(a int8) func(int, int) int8 { return func(int, int) int8 { return a } }
	cases := []qcase{
		{"0x-128", konst(0), act(-128)},
		{"0x127", konst(0), act(127)},
		{"31x-128", konst(31), act(-128)},
		{"31x127", konst(31), act(127)},
		{"15x-128", konst(15), act(-128)},
		{"16x127", konst(16), act(127)},
		{"random", func(row, i int) uint8 { return rnd[row*maxCols+i] & 0x1f }, func(tok, i int) int8 { return int8(rnd[(16+tok)*maxCols+i]) }},
		{"alternating", func(row, i int) uint8 { return uint8((row + i) % 2 * 31) }, func(tok, i int) int8 { return int8(127 - (i+tok)%3*127) }},
		{"by position", func(row, i int) uint8 { return uint8(i+row) % 32 }, func(tok, i int) int8 { return int8(i%32 - 16 + tok) }},
	}
	for _, l := range layouts {
		for _, nb := range []int{1, 2, 3, 16, 17, 35} {
			cols := 32 * nb
			ab := ActivationBytes(gguf.Q5_0, cols)
			for _, c := range cases {
				g := make([]byte, l.GroupBytes(cols))
				l.Pack(g, q50HandRows(cols, one, c.w), cols)
				for nTok := 1; nTok <= l.MaxTok; nTok++ {
					xStride := ab + 3 // misaligned tokens
					x := make([]byte, nTok*xStride)
					for tok := range nTok {
						for b := range nb {
							blk := x[tok*xStride+34*b:]
							binary.LittleEndian.PutUint16(blk, one)
							for j := range 32 {
								blk[2+j] = byte(c.x(tok, 32*b+j))
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
								var want int64
								for i := range cols {
									want += (int64(c.w(row, i)) - 16) * int64(c.x(tok, i))
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

// q50BenchMatrix returns a random rows x cols q5_0 matrix (quantized from
// normal values), unpacked and packed with the detected set's layout
// (nil when it has none).
func q50BenchMatrix(rows, cols int) (m, p *Matrix) {
	return packedBenchMatrix(gguf.Q5_0, rows, cols)
}

func q50BenchTokens(cols, nTok int) []byte {
	return packedBenchTokens(gguf.Q5_0, cols, nTok, 6)
}

// BenchmarkPackedQ50 compares MatMul (64 and 512 tokens) and MatVec on a
// matrix larger than L2 and on Gemma 3 270M's q5_0 shapes (rows x cols),
// packed against the unpacked kernels, and measures Pack.
func BenchmarkPackedQ50(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q5_0) == nil {
		b.Skipf("kernel set %s has no packed q5_0 layout", ks.Name())
	}
	for _, shape := range [][2]int{{2048, 8192}, {1024, 640}, {2048, 640}} {
		rows, cols := shape[0], shape[1]
		m, p := q50BenchMatrix(rows, cols)
		mats := []struct {
			name string
			m    *Matrix
		}{{"unpacked", m}, {"packed", p}}
		for _, nTok := range []int{64, 512} {
			if rows*cols > 8<<20 && nTok > 64 {
				continue // keep the big shapes short
			}
			xq := q50BenchTokens(cols, nTok)
			y := make([]float32, nTok*rows)
			for _, mm := range mats {
				b.Run(fmt.Sprintf("MatMul/%dx%d/tok%d/%s", rows, cols, nTok, mm.name), func(b *testing.B) {
					for b.Loop() {
						ks.MatMul(mm.m, xq, nTok, y, 0, rows)
					}
					b.ReportMetric(2*float64(rows*cols*nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
		xq := q50BenchTokens(cols, 1)
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
	}
}
