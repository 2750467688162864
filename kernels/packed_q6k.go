package kernels

import (
	"encoding/binary"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// Packed q6_K ("q6_K.r16.v2"): 16 rows interleaved so that a 512-bit
// register holds one row per 32-bit lane. A group of 16 rows of cols values
// is cols/256 packed blocks of q6kPackedBlock bytes laid end to end; packed
// block b holds block b of each of the 16 rows as 16 sub-block records
// (sub-block s is values 16s..16s+15, the span of one Q6_K scale) and the
// row scales:
//
//	off 208s+  0: A[16][4] row r at +4r: byte i holds the 6-bit quant of
//	              value 16s+i in bits 0..5 and bits 0..1 of the quant of
//	              value 16s+12+i in bits 6..7
//	off 208s+ 64: B[16][4] the same for value 16s+4+i, with bits 2..3 of
//	              value 16s+12+i
//	off 208s+128: C[16][4] the same for value 16s+8+i, with bits 4..5 of
//	              value 16s+12+i
//	off 208s+192: sc[16] the int8 scale of sub-block s, row r at +r
//	off 3328:     d[16] f16, row r at 3328+2r
//
// So one sub-block record gives the four VPDPBUSD weight operands (16 rows x
// 4 consecutive values as bytes 0..63): three with one AND 0x3f each, the
// fourth from three shifts, two bit selects (VPTERNLOGD) and an AND; the
// scales widen with one VPMOVSXBD. Every value keeps its 6 bits: the packed
// block is exactly the 16*210 = 3360 bytes of the GGUF blocks it replaces,
// so decode, which streams the same bytes, reads no more than before.
const (
	q6kPackedRows  = 16
	q6kPackedSub   = 208  // bytes per sub-block record
	q6kPackedD     = 3328 // offset of the f16 row scales
	q6kPackedBlock = 3360
)

// packedQ6KBase is the q6_K layout with the pure-Go kernel as its Dot; the
// SIMD sets copy it and set their own Dot.
var packedQ6KBase = q6kGroup.layout("q6_K.r16.v2", gguf.Q6_K, packQ6K, dotPackedQ6KGeneric)

// packQ6K interleaves 16 q6_K rows (src, RowBytes(Q6_K, cols) bytes each)
// into dst (GroupBytes(cols) bytes). A GGUF block stores value
// 32k+j of each half (k < 4, j < 32) in nibble k/2 of ql[32(k%2)+j] and bits
// 2k..2k+1 of qh[j]; the loop rebuilds 64-bit words of eight 6-bit quants
// (values 4v+i, i < 4, for two v) and spreads them into the record's words,
// so it allocates nothing and touches each byte once.
func packQ6K(dst, src []byte, cols int) {
	nb, rb := q6kGroup.checkPack(dst, src, cols)
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		out := dst[b*q6kPackedBlock : (b+1)*q6kPackedBlock]
		for r := 0; r < q6kPackedRows; r++ {
			blk := (*[gguf.BytesQ6_K]byte)(src[r*rb+b*gguf.BytesQ6_K:])
			for s := 0; s < 16; s++ {
				// Values 16s..16s+15 lie in half h, quarter k, at j0..j0+15
				// of the quarter's 32 values; 8 bytes of ql or qh hold
				// values 4v+i for v < 2, i < 4, the next 8 those for v >= 2.
				h, k, j0 := s/8, s/2%4, 16*(s%2)
				lo := blk[64*h+32*(k%2)+j0:][:16]
				hi := blk[128+32*h+j0:][:16]
				ns := uint(4 * (k / 2)) // nibble of ql
				hs := uint(2 * k)       // bit pair of qh
				const m4, m2 = 0x0f0f0f0f0f0f0f0f, 0x0303030303030303
				q01 := le.Uint64(lo)>>ns&m4 | (le.Uint64(hi)>>hs&m2)<<4
				q23 := le.Uint64(lo[8:])>>ns&m4 | (le.Uint64(hi[8:])>>hs&m2)<<4
				q3 := uint32(q23 >> 32)
				rec := out[q6kPackedSub*s:][:q6kPackedSub]
				le.PutUint32(rec[4*r:], uint32(q01)|(q3&0x03030303)<<6)
				le.PutUint32(rec[64+4*r:], uint32(q01>>32)|(q3>>2&0x03030303)<<6)
				le.PutUint32(rec[128+4*r:], uint32(q23)|(q3>>4&0x03030303)<<6)
				rec[192+r] = blk[192+s]
			}
			out[q6kPackedD+2*r] = blk[208]
			out[q6kPackedD+2*r+1] = blk[209]
		}
	}
}

// q6kPackedQuant returns the 6-bit quant (0..63) of value 16s+j (j < 16) of
// row r in a packed block.
func q6kPackedQuant(blk []byte, r, s, j int) int32 {
	rec := blk[q6kPackedSub*s:]
	v, i := j/4, j%4
	if v < 3 {
		return int32(rec[64*v+4*r+i] & 0x3f)
	}
	a, b, c := rec[4*r+i], rec[64+4*r+i], rec[128+4*r+i]
	return int32(a>>6 | b>>6<<2 | c>>6<<4)
}

// q6kPackedMaxTok is the most tokens one Dot call takes: 8 tokens a call
// spread the record decode over more VPDPBUSD (175 ns per token and 2048
// values against 241 ns with 4, AVX-512, L2-hot).
const q6kPackedMaxTok = 8

// q6kGroup is the packed q6_K group's geometry (packedGroup.check).
var q6kGroup = packedGroup{name: "q6_K", rows: q6kPackedRows, shift: blockShift(qkK), blockBytes: q6kPackedBlock, actBytes: gguf.BytesQ8_K, maxTok: q6kPackedMaxTok, srcBytes: gguf.BytesQ6_K}

// dotPackedQ6KGeneric is the pure-Go packed q6_K kernel, computing as the
// SIMD kernel does: per sub-block the exact integer sum of (q-32)*x (the
// -32 applied through the q8_K sub-block sums), scaled in float by d*sc and
// summed per block, then scaled by the token's d.
func dotPackedQ6KGeneric(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q6kGroup.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qkK
	for t := 0; t < nTok; t++ {
		xt := x[t*xStride : t*xStride+nb*gguf.BytesQ8_K]
		for r := 0; r < q6kPackedRows; r++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk := g[b*q6kPackedBlock : (b+1)*q6kPackedBlock]
				xb := xt[b*gguf.BytesQ8_K : (b+1)*gguf.BytesQ8_K]
				xd := math.Float32frombits(binary.LittleEndian.Uint32(xb))
				d := f16At(blk[q6kPackedD+2*r:])
				var sum float32
				for s := 0; s < 16; s++ {
					bsum := int32(int16(binary.LittleEndian.Uint16(xb[4+qkK+2*s:])))
					si := -32 * bsum
					for j := 0; j < 16; j++ {
						si += q6kPackedQuant(blk, r, s, j) * int32(int8(xb[4+16*s+j]))
					}
					dsc := d * float32(int8(blk[q6kPackedSub*s+192+r]))
					sum += dsc * float32(si)
				}
				acc += xd * sum
			}
			y[t*yStride+r] = acc
		}
	}
}
