package kernels

import (
	"encoding/binary"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// Packed q4_K ("q4_K.r16.v1"): 16 rows interleaved so that a 512-bit
// register holds one row per 32-bit lane. A group of 16 rows of cols values
// is cols/256 packed blocks of q4kPackedBlock bytes laid end to end; packed
// block b holds block b of each of the 16 rows:
//
//	off    0: d[16]    f16, row r at 2r
//	off   32: dmin[16] f16, row r at 32+2r
//	off   64: sc[8][16]  the 6-bit sub-block scales as bytes, sub-block s
//	          of row r at 64+16s+r (one VPMOVZXBD per sub-block)
//	off  192: m[4][16][2] the 6-bit mins as bytes, pairs of sub-blocks:
//	          min of sub-block s of row r at 192+32(s/2)+2r+s%2 (one
//	          VPMOVZXBW gives each lane the word pair of two sub-blocks)
//	off  320: qs[8][4][16][4] the quants: for sub-block s (values 32s..32s+31)
//	          and k < 4, the 64 bytes at 320+256s+64k hold 4 bytes per
//	          row r (at +4r); byte i has value 32s+8k+i in its low nibble
//	          and value 32s+8k+4+i in its high nibble.
//
// So a 64-byte load gives, after AND 0x0f and after shift+AND, the weight
// operands of two VPDPBUSD (16 rows x 4 values each) whose activation
// operands are 4 consecutive q8_K bytes broadcast to every lane. The packed
// block is 2368 bytes against 16*144 = 2304 for the GGUF rows (+2.8%),
// so decode, which streams the same bytes, stays at least as fast.
const (
	q4kPackedRows  = 16
	q4kPackedBlock = 2368
	q4kPackedSc    = 64
	q4kPackedMin   = 192
	q4kPackedQs    = 320
)

// packedQ4KBase is the q4_K layout with the pure-Go kernel as its Dot; the
// SIMD sets copy it and set their own Dot.
var packedQ4KBase = q4kGroup.layout("q4_K.r16.v1", gguf.Q4_K, packQ4K, dotPackedQ4KGeneric)

// packQ4K interleaves 16 q4_K rows (src, RowBytes(Q4_K, cols) bytes each)
// into dst (GroupBytes(cols) bytes). It runs at model open over
// every q4_K matrix, so it works on whole words (4 scales or mins, 8 bytes
// of nibbles at a time) and allocates nothing.
func packQ4K(dst, src []byte, cols int) {
	nb, rb := q4kGroup.checkPack(dst, src, cols)
	le := binary.LittleEndian
	for b := range nb {
		p := (*[q4kPackedBlock]byte)(dst[b*q4kPackedBlock:])
		// Rows in pairs: their quant words are adjacent in the packed
		// block, so each pair takes one 8-byte store per 4 values.
		for r := 0; r < q4kPackedRows; r += 2 {
			b0 := (*[gguf.BytesQ4_K]byte)(src[r*rb+b*gguf.BytesQ4_K:])
			b1 := (*[gguf.BytesQ4_K]byte)(src[(r+1)*rb+b*gguf.BytesQ4_K:])
			for i, blk := range [2]*[gguf.BytesQ4_K]byte{b0, b1} {
				ri := r + i
				p[2*ri], p[2*ri+1] = blk[0], blk[1]
				p[32+2*ri], p[32+2*ri+1] = blk[2], blk[3]
				// The 6-bit scales and mins, four at a time
				// (scaleMinK4 for words): sub-blocks 0-3 in the low 6
				// bits of bytes 0-3 (scales) and 4-7 (mins); 4-7 in
				// the nibbles of bytes 8-11 with their top 2 bits in
				// the top bits of 0-7.
				a, c, e := le.Uint32(blk[4:]), le.Uint32(blk[8:]), le.Uint32(blk[12:])
				sc := [2]uint32{a & 0x3f3f3f3f, e&0x0f0f0f0f | a>>2&0x30303030}
				mn := [2]uint32{c & 0x3f3f3f3f, e>>4&0x0f0f0f0f | c>>2&0x30303030}
				for s := range 8 {
					p[q4kPackedSc+16*s+ri] = byte(sc[s/4] >> (8 * (s % 4)))
					p[q4kPackedMin+32*(s/2)+2*ri+s%2] = byte(mn[s/4] >> (8 * (s % 4)))
				}
			}
			// GGUF quant bytes 8jk..8jk+7 (jk = 4j+k) hold values
			// 32j... of sub-block 2j in their low nibbles and of 2j+1
			// in their high ones: 4 packed bytes of each per row.
			for jk := range 16 {
				q0 := le.Uint64(b0[16+8*jk:])
				q1 := le.Uint64(b1[16+8*jk:])
				lo := q0&0x0f0f0f0f | q0>>28&0xf0f0f0f0 | (q1&0x0f0f0f0f|q1>>28&0xf0f0f0f0)<<32
				hi := q0>>4&0x0f0f0f0f | q0>>32&0xf0f0f0f0 | (q1>>4&0x0f0f0f0f|q1>>32&0xf0f0f0f0)<<32
				off := q4kPackedQs + 512*(jk/4) + 64*(jk%4) + 4*r
				le.PutUint64(p[off:], lo)
				le.PutUint64(p[off+256:], hi)
			}
		}
	}
}

// q4kGroup is the packed q4_K group's geometry (packedGroup.check).
var q4kGroup = packedGroup{name: "q4_K", rows: q4kPackedRows, shift: blockShift(qkK), blockBytes: q4kPackedBlock, actBytes: gguf.BytesQ8_K, maxTok: q4kTile / q4kPackedRows, srcBytes: gguf.BytesQ4_K}

// dotPackedQ4KGeneric is the pure-Go twin of the SIMD packed kernels: per
// row and token the same integer sums as dotQ4KGeneric, read from the
// packed bytes.
func dotPackedQ4KGeneric(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q4kGroup.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qkK
	le := binary.LittleEndian
	for t := range nTok {
		xt := x[t*xStride:]
		var acc [q4kPackedRows]float32
		for b := range nb {
			p := g[b*q4kPackedBlock : (b+1)*q4kPackedBlock]
			xb := xt[b*gguf.BytesQ8_K : (b+1)*gguf.BytesQ8_K]
			dy := math.Float32frombits(le.Uint32(xb))
			q8 := xb[4 : 4+qkK]
			for r := range q4kPackedRows {
				var sumi, summ int32
				for s := range 8 {
					var si int32
					for k := range 4 {
						w := p[q4kPackedQs+256*s+64*k+4*r : q4kPackedQs+256*s+64*k+4*r+4]
						a := q8[32*s+8*k : 32*s+8*k+8]
						for i := range 4 {
							si += int32(w[i]&0xf)*int32(int8(a[i])) + int32(w[i]>>4)*int32(int8(a[4+i]))
						}
					}
					sumi += si * int32(p[q4kPackedSc+16*s+r])
					summ += int32(p[q4kPackedMin+32*(s/2)+2*r+s%2]) * (bsum(xb[4+qkK:], 2*s) + bsum(xb[4+qkK:], 2*s+1))
				}
				d, dmin := f16At(p[2*r:]), f16At(p[32+2*r:])
				acc[r] += dy*d*float32(sumi) - dy*dmin*float32(summ)
			}
		}
		copy(y[t*yStride:t*yStride+q4kPackedRows], acc[:])
	}
}
