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

// q80Layouts returns the pure-Go q8_0 layout and the layouts of the kernel
// sets this CPU runs, each with its set.
func q80Layouts(t testing.TB) (sets []*Set, layouts []*PackedLayout) {
	return packedLayoutsOf(t, gguf.Q8_0, &packedQ80Base)
}

// TestPackedQ80Bytes reads every scale and quant back from the packed bytes
// by the layout documented in packed_q80.go and docs/FORMATS.md (written
// out here again, not through the package's offset helper) and compares
// them with the GGUF rows; odd and even block counts.
func TestPackedQ80Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 1))
		rb := RowBytes(gguf.Q8_0, cols)
		src := make([]byte, 16*rb)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		dst := make([]byte, packedQ80Base.GroupBytes(cols))
		for i := range dst {
			dst[i] = 0x5a // every byte must be written
		}
		packedQ80Base.Pack(dst, src, cols)
		for b := range nb {
			var d, q int
			switch {
			case nb%2 == 1 && b == nb-1:
				d, q = 1088*(b/2), 1088*(b/2)+32
			case b%2 == 0:
				d, q = 1088*(b/2), 1088*(b/2)+64
			default:
				d, q = 1088*(b/2)+32, 1088*(b/2)+576
			}
			for row := range 16 {
				blk := src[row*rb+34*b : row*rb+34*(b+1)]
				require.Equal(t, blk[0:2], dst[d+2*row:d+2*row+2], "nb %d block %d row %d scale", nb, b, row)
				for v := range 32 {
					got := dst[q+64*(v/4)+4*row+v%4]
					require.Equal(t, blk[2+v]^0x80, got, "nb %d block %d row %d value %d", nb, b, row, v)
				}
			}
		}
	}
}

// q80HandRows builds 16 q8_0 rows with block scale d and quants from q.
func q80HandRows(cols int, d uint16, q func(row, i int) int8) []byte {
	rb := RowBytes(gguf.Q8_0, cols)
	src := make([]byte, 16*rb)
	for row := range 16 {
		for b := range cols / 32 {
			blk := src[row*rb+34*b:]
			binary.LittleEndian.PutUint16(blk, d)
			for j := range 32 {
				blk[2+j] = byte(q(row, 32*b+j))
			}
		}
	}
	return src
}

// TestPackedQ80Exact checks the integer parts exactly: with every scale 1
// and sums below 2^24 each dot is an integer the float sums represent
// exactly, computed here in int64 from the quants. Cases cover the largest
// positive and negative sums (-128 weights against -128 and +127
// activations; the quantizer never emits -128, the kernel must still take
// it), random bytes and alternating signs, for one block, an odd count and
// an even count of blocks, every token count, and strides that misalign
// the activations.
func TestPackedQ80Exact(t *testing.T) {
	_, layouts := q80Layouts(t)
	one := F32ToF16(1)
	type qcase struct {
		name string
		w, x func(row, i int) int8
	}
	r := rand.New(rand.NewPCG(9, 9))
	const maxCols = 32 * 34 // the most columns below
	rnd := make([]int8, (16+8)*maxCols)
	for i := range rnd {
		rnd[i] = int8(r.Uint32())
	}
	cases := []qcase{
		{"-128x-128", func(int, int) int8 { return -128 }, func(int, int) int8 { return -128 }},
		{"-128x127", func(int, int) int8 { return -128 }, func(int, int) int8 { return 127 }},
		{"127x-128", func(int, int) int8 { return 127 }, func(int, int) int8 { return -128 }},
		{"127x127", func(int, int) int8 { return 127 }, func(int, int) int8 { return 127 }},
		{"zero", func(int, int) int8 { return 0 }, func(int, int) int8 { return -128 }},
		{"random", func(row, i int) int8 { return rnd[row*maxCols+i] }, func(tok, i int) int8 { return rnd[(16+tok)*maxCols+i] }},
		{"alternating", func(row, i int) int8 { return int8((row+i)%2*255 - 128) }, func(tok, i int) int8 { return int8(127 - (i+tok)%3*127) }},
	}
	for _, l := range layouts {
		for _, nb := range []int{1, 2, 3, 16, 17, 31, 34} {
			cols := 32 * nb
			ab := ActivationBytes(gguf.Q8_0, cols)
			for _, c := range cases {
				g := make([]byte, l.GroupBytes(cols))
				l.Pack(g, q80HandRows(cols, one, c.w), cols)
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

// q80BenchMatrix returns a random rows x cols q8_0 matrix, unpacked and
// packed with the detected set's layout (nil when it has none).
func q80BenchMatrix(b *testing.B, rows, cols int) (m, p *Matrix) {
	ks := Detect()
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	rb := RowBytes(gguf.Q8_0, cols)
	m = &Matrix{Type: gguf.Q8_0, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	simdRandomRow(r, gguf.Q8_0, m.Data)
	return m, packedCopy(ks, m)
}

func q80BenchTokens(cols, nTok int) []byte {
	return packedBenchTokens(gguf.Q8_0, cols, nTok, 5)
}

// BenchmarkPackedQ80 compares MatMul (64 and 512 tokens) and MatVec (one
// and two goroutines) on 1B-shaped q8_0 matrices, packed against the
// current unpacked kernels, and measures Pack. Run with -benchtime 20x.
func BenchmarkPackedQ80(b *testing.B) {
	ks := Detect()
	if ks.Packed(gguf.Q8_0) == nil {
		b.Skipf("kernel set %s has no packed q8_0 layout", ks.Name())
	}
	for _, shape := range [][2]int{{8192, 2048}, {2048, 8192}} {
		rows, cols := shape[0], shape[1]
		m, p := q80BenchMatrix(b, rows, cols)
		mats := []struct {
			name string
			m    *Matrix
		}{{"unpacked", m}, {"packed", p}}
		for _, nTok := range []int{64, 512} {
			xq := q80BenchTokens(cols, nTok)
			y := make([]float32, nTok*rows)
			for _, mm := range mats {
				b.Run(fmt.Sprintf("MatMul/%dx%d/tok%d/%s", rows, cols, nTok, mm.name), func(b *testing.B) {
					b.SetBytes(int64(nTok) * int64(rows) * int64(cols)) // multiply-adds
					for b.Loop() {
						ks.MatMul(mm.m, xq, nTok, y, 0, rows)
					}
				})
			}
		}
		xq := q80BenchTokens(cols, 1)
		y := make([]float32, rows)
		for _, threads := range []int{1, 2} {
			for _, mm := range mats {
				b.Run(fmt.Sprintf("MatVec/%dx%d/thr%d/%s", rows, cols, threads, mm.name), func(b *testing.B) {
					b.SetBytes(int64(len(m.Data))) // weight bytes streamed
					var wg sync.WaitGroup
					for b.Loop() {
						for th := range threads {
							r0 := rows * th / threads / 16 * 16
							r1 := rows * (th + 1) / threads / 16 * 16
							wg.Go(func() { ks.MatVec(mm.m, xq, y, r0, r1) })
						}
						wg.Wait()
					}
				})
			}
		}
		// Decode streams the weights from memory: rotate over copies that
		// together exceed the last-level cache.
		copies := max(1, (512<<20)/len(m.Data))
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
		ms, ps = nil, nil
		b.Run(fmt.Sprintf("Pack/%dx%d", rows, cols), func(b *testing.B) {
			b.SetBytes(int64(len(m.Data)))
			for b.Loop() {
				p.Layout.PackRows(m, p.Packed, 0, rows/16)
			}
		})
	}
}

// BenchmarkPackedQ80Dot runs Dot alone on a few groups that stay in L2
// (2048 columns), per token count: the kernel's compute rate.
func BenchmarkPackedQ80Dot(b *testing.B) {
	ks := Detect()
	l := ks.Packed(gguf.Q8_0)
	if l == nil {
		b.Skipf("kernel set %s has no packed q8_0 layout", ks.Name())
	}
	const cols, groups = 2048, 4
	_, p := q80BenchMatrix(b, 16*groups, cols)
	ab := ActivationBytes(gguf.Q8_0, cols)
	xq := q80BenchTokens(cols, l.MaxTok)
	y := make([]float32, l.MaxTok*16*groups)
	gb := l.GroupBytes(cols)
	for _, k := range []int{1, 2, 4, 8} {
		if k > l.MaxTok {
			continue
		}
		b.Run(fmt.Sprintf("tok%d", k), func(b *testing.B) {
			b.SetBytes(int64(k * 16 * groups * cols)) // multiply-adds
			for b.Loop() {
				for g := range groups {
					l.Dot(cols, p.Packed[g*gb:(g+1)*gb], xq, ab, k, y[16*g:], 16*groups)
				}
			}
		})
	}
}
