package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// The format-specific tests of the packed layouts of the 32-value-block
// formats (q4_1, q5_0, q8_0): their bytes as docs/FORMATS.md documents
// them, and their dots exact on integer inputs (checkPacked32Exact). The
// tests every layout shares are in packed_test.go.

// TestPackedQ41Bytes reads every scale, offset and nibble back from the
// packed bytes by the layout documented in packed_q41.go and
// docs/FORMATS.md (written out here again) and compares them with the GGUF
// rows.
func TestPackedQ41Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 41))
		src, dst, rb := packRandomGroup(r, &packedQ41Base, gguf.Q4_1, cols)
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
		_, layouts := packedLayoutsOf(t, gguf.Q4_1, &packedQ41Base)
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
		var ec []exact32Case
		for _, c := range cases {
			ec = append(ec, exact32Case{
				name: c.name, x: c.x, s: c.s,
				rows: func(cols int) []byte { return q41HandRows(cols, one, F32ToF16(c.m), c.w) },
				want: func(row, tok, cols int) int64 {
					want := int64(cols/32) * int64(c.m) * int64(c.s)
					for i := range cols {
						want += int64(c.w(row, i)) * int64(c.x(tok, i))
					}
					return want
				},
			})
		}
		checkPacked32Exact(t, layouts, gguf.Q4_1, []int{1, 2, 3, 16, 17, 35}, ec)
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
		m, _ := packedBenchMatrix(gguf.Q4_1, rows, cols)
		p := *m
		p.Layout = l
		p.Packed = make([]byte, l.PackedSize(rows, cols))
		l.PackRows(m, p.Packed, 0, rows/16)
		xq := packedBenchTokens(gguf.Q4_1, cols, nTok, 5)
		ab := ActivationBytes(gguf.Q4_1, cols)
		packed := rows / 16 * 16
		for _, nt := range []int{1, 4, nTok} {
			got := make([]float32, nt*rows)
			ks.MatMul(&p, xq, nt, got, 0, rows)
			for k := range nt {
				for r := range packed {
					want := dotQ4_1Generic(cols, m.Row(r), xq[k*ab:(k+1)*ab])
					require.Equal(t, math.Float32bits(want), math.Float32bits(got[k*rows+r]), "%d cols, %d tokens: token %d row %d: got %g want %g", cols, nt, k, r, got[k*rows+r], want)
				}
			}
		}
	}
}

// TestPackedQ50Bytes reads every scale, fifth bit and nibble back from the
// packed bytes by the layout documented in packed_q50.go and
// docs/FORMATS.md (written out here again) and compares them with the GGUF
// rows.
func TestPackedQ50Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 50))
		src, dst, rb := packRandomGroup(r, &packedQ50Base, gguf.Q5_0, cols)
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
	_, layouts := packedLayoutsOf(t, gguf.Q5_0, &packedQ50Base)
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
	var ec []exact32Case
	for _, c := range cases {
		ec = append(ec, exact32Case{
			name: c.name, x: c.x,
			rows: func(cols int) []byte { return q50HandRows(cols, one, c.w) },
			want: func(row, tok, cols int) int64 {
				var want int64
				for i := range cols {
					want += (int64(c.w(row, i)) - 16) * int64(c.x(tok, i))
				}
				return want
			},
		})
	}
	checkPacked32Exact(t, layouts, gguf.Q5_0, []int{1, 2, 3, 16, 17, 35}, ec)
}

// TestPackedQ80Bytes reads every scale and quant back from the packed bytes
// by the layout documented in packed_q80.go and docs/FORMATS.md (written
// out here again, not through the package's offset helper) and compares
// them with the GGUF rows; odd and even block counts.
func TestPackedQ80Bytes(t *testing.T) {
	for _, nb := range []int{1, 2, 3, 8} {
		cols := 32 * nb
		r := rand.New(rand.NewPCG(uint64(nb), 1))
		src, dst, rb := packRandomGroup(r, &packedQ80Base, gguf.Q8_0, cols)
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
	_, layouts := packedLayoutsOf(t, gguf.Q8_0, &packedQ80Base)
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
	var ec []exact32Case
	for _, c := range cases {
		ec = append(ec, exact32Case{
			name: c.name, x: func(tok, i int) int8 { return c.x(tok, i) },
			rows: func(cols int) []byte { return q80HandRows(cols, one, c.w) },
			want: func(row, tok, cols int) int64 {
				var want int64
				for i := range cols {
					want += int64(c.w(row, i)) * int64(c.x(tok, i))
				}
				return want
			},
		})
	}
	checkPacked32Exact(t, layouts, gguf.Q8_0, []int{1, 2, 3, 16, 17, 31, 34}, ec)
}
