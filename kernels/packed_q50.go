package kernels

import (
	"encoding/binary"

	"github.com/moonlm/moonlm/gguf"
)

// Packed q5_0 ("q5_0.r16.v1"): 16 rows interleaved so that a 512-bit
// register holds one row per 32-bit lane, as the q4_1 layout. A group of 16
// rows of cols values (nb = cols/32 blocks) stores block b of all 16 rows
// together in 352 bytes at 352b:
//
//	off   0: d[16] f16 scales, row r at 2r
//	off  32: masks[8] u64: mask h*4+c (h 0 low, 1 high nibbles; c chunk
//	         0..3) at 32+8(h*4+c) has bit 4r+j = bit 16h+4c+j of row r's qh
//	         (the fifth bit of value 16h+4c+j)
//	off  96: qs[4][16][4]: the 64 bytes at 96+64c hold GGUF quant bytes
//	         4c..4c+3 of row r at +4r
//
// A kernel splits chunk c into low and high nibbles and adds 0x10 to the
// bytes whose mask bit is set (a KMOVQ of the mask and one merge-masked
// VPADDB), which gives the unsigned quants q in 0..31 that VPDPBUSD takes
// against signed q8_0 activation bytes; the weights' -16 becomes
// -16*sum(a) per block and token. The group is exactly as big as the GGUF
// rows it replaces (16*22 bytes per block).
const (
	q50PackedRows  = 16
	q50PackedBlock = q50PackedRows * gguf.BytesQ5_0 // 352
	// q50PackedMaxTok is the most tokens one Dot call takes (16 rows x 8
	// tokens fills the 128-value tile).
	q50PackedMaxTok = 8
)

// packedQ50Base is the q5_0 layout with the pure-Go kernel as its Dot; the
// SIMD sets copy it and set their own Dot.
var packedQ50Base = q50Group.layout("q5_0.r16.v1", gguf.Q5_0, packQ50, dotPackedQ50Generic)

// packQ50 interleaves 16 q5_0 rows (src, RowBytes(Q5_0, cols) bytes each)
// into dst (GroupBytes(cols) bytes); it allocates nothing.
func packQ50(dst, src []byte, cols int) {
	nb, rb := q50Group.checkPack(dst, src, cols)
	le := binary.LittleEndian
	for b := range nb {
		o := (*[q50PackedBlock]byte)(dst[b*q50PackedBlock:])
		var masks [8]uint64
		for r := range q50PackedRows {
			s := (*[gguf.BytesQ5_0]byte)(src[r*rb+b*gguf.BytesQ5_0:])
			le.PutUint16(o[2*r:], le.Uint16(s[0:]))
			qh := le.Uint32(s[2:])
			for m := range 8 {
				// Mask m = h*4+c takes qh bits 16h+4c .. 16h+4c+3 = 4m .. 4m+3.
				masks[m] |= uint64(qh>>(4*m)&0xf) << (4 * r)
			}
			for c := range 4 {
				le.PutUint32(o[96+64*c+4*r:], le.Uint32(s[6+4*c:]))
			}
		}
		for m := range 8 {
			le.PutUint64(o[32+8*m:], masks[m])
		}
	}
}

// q50Group is the packed q5_0 group's geometry (packedGroup.check).
var q50Group = packedGroup{name: "q5_0", rows: q50PackedRows, shift: blockShift(qk32), blockBytes: q50PackedBlock, actBytes: gguf.BytesQ8_0, maxTok: q50PackedMaxTok, srcBytes: gguf.BytesQ5_0}

// dotPackedQ50Generic is the pure-Go twin of the SIMD packed kernel: the
// same exact integer sum per block, read from the packed bytes, added as
// float(isum)*(d*d_a) in block order as the generic q5_0 row dot
// (dotQ5_0Generic) does, so the generic kernel set gives the same bits on
// packed and unpacked rows.
func dotPackedQ50Generic(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q50Group.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	le := binary.LittleEndian
	for t := range nTok {
		xt := x[t*xStride:]
		var acc [q50PackedRows]float32
		for b := range nb {
			blk := (*[q50PackedBlock]byte)(g[b*q50PackedBlock:])
			xb := (*[gguf.BytesQ8_0]byte)(xt[b*gguf.BytesQ8_0:])
			q8 := xb[2:]
			da := f16At(xb[0:])
			for r := range q50PackedRows {
				var s int32
				for c := range 4 {
					w := blk[96+64*c+4*r : 96+64*c+4*r+4]
					lo := le.Uint64(blk[32+8*c:]) >> (4 * r)
					hi := le.Uint64(blk[64+8*c:]) >> (4 * r)
					for i := range 4 {
						ql := int32(w[i]&0xf) | int32(lo>>i&1)<<4
						qh := int32(w[i]>>4) | int32(hi>>i&1)<<4
						s += (ql - 16) * int32(int8(q8[4*c+i]))
						s += (qh - 16) * int32(int8(q8[16+4*c+i]))
					}
				}
				acc[r] += float32(s) * (f16At(blk[2*r:]) * da)
			}
		}
		copy(y[t*yStride:t*yStride+q50PackedRows], acc[:])
	}
}
