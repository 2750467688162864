package kernels

import (
	"encoding/binary"

	"github.com/moonlm/moonlm/gguf"
)

// Packed q4_1 ("q4_1.r16.v1"): 16 rows interleaved so that a 512-bit
// register holds one row per 32-bit lane. A group of 16 rows of cols values
// (nb = cols/32 blocks) stores block b of all 16 rows together in 320 bytes
// at 320b (a multiple of 64, so every 64-byte run stays aligned):
//
//	off   0: d[16]  f16 scales, row r at 2r
//	off  32: m[16]  f16 offsets, row r at 32+2r
//	off  64: qs[4][16][4]: the 64 bytes at 64+64c hold GGUF quant bytes
//	         4c..4c+3 of row r at +4r (low nibbles: values 4c..4c+3, high
//	         nibbles: values 16+4c..16+4c+3)
//
// The nibbles are unsigned already, so VPDPBUSD takes them as they are
// (after a mask, or a shift and a mask) against 4 signed q8_1 activation
// bytes of one token broadcast to every lane. The group is exactly as big as
// the GGUF rows it replaces (16*20 bytes per block), so decode streams the
// same bytes.
const (
	q41PackedRows  = 16
	q41PackedBlock = q41PackedRows * gguf.BytesQ4_1 // 320
	// q41PackedMaxTok is the most tokens one Dot call takes (16 rows x 8
	// tokens fills the 128-value tile).
	q41PackedMaxTok = 8
)

// packedQ41Base is the q4_1 layout with the pure-Go kernel as its Dot; the
// SIMD sets copy it and set their own Dot.
var packedQ41Base = q41Group.layout("q4_1.r16.v1", gguf.Q4_1, packQ41, dotPackedQ41Generic)

// packQ41 interleaves 16 q4_1 rows (src, RowBytes(Q4_1, cols) bytes each)
// into dst (GroupBytes(cols) bytes), moving 16- and 32-bit words,
// so it runs near memory speed and allocates nothing.
func packQ41(dst, src []byte, cols int) {
	nb, rb := q41Group.checkPack(dst, src, cols)
	le := binary.LittleEndian
	for b := range nb {
		o := (*[q41PackedBlock]byte)(dst[b*q41PackedBlock:])
		for r := range q41PackedRows {
			s := (*[gguf.BytesQ4_1]byte)(src[r*rb+b*gguf.BytesQ4_1:])
			le.PutUint16(o[2*r:], le.Uint16(s[0:]))
			le.PutUint16(o[32+2*r:], le.Uint16(s[2:]))
			le.PutUint32(o[64+4*r:], le.Uint32(s[4:]))
			le.PutUint32(o[128+4*r:], le.Uint32(s[8:]))
			le.PutUint32(o[192+4*r:], le.Uint32(s[12:]))
			le.PutUint32(o[256+4*r:], le.Uint32(s[16:]))
		}
	}
}

// q41Group is the packed q4_1 group's geometry (packedGroup.check).
var q41Group = packedGroup{name: "q4_1", rows: q41PackedRows, shift: blockShift(qk32), blockBytes: q41PackedBlock, actBytes: gguf.BytesQ8_1, maxTok: q41PackedMaxTok, srcBytes: gguf.BytesQ4_1}

// dotPackedQ41Generic is the pure-Go twin of the SIMD packed kernel: the
// same integer sums per block, read from the packed bytes, and the same
// two float terms per block, float(isum)*d*d_a and m*s_a. It adds them as
// the generic q4_1 row dot does (dotQ4_1Generic), so the generic kernel set
// gives the same bits on packed and unpacked rows.
func dotPackedQ41Generic(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q41Group.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	for t := range nTok {
		xt := x[t*xStride:]
		var acc [q41PackedRows]float32
		for b := range nb {
			blk := (*[q41PackedBlock]byte)(g[b*q41PackedBlock:])
			xb := (*[gguf.BytesQ8_1]byte)(xt[b*gguf.BytesQ8_1:])
			q8 := xb[4:]
			for r := range q41PackedRows {
				var s int32
				for c := range 4 {
					w := blk[64+64*c+4*r : 64+64*c+4*r+4]
					for i := range 4 {
						s += int32(w[i]&0xf) * int32(int8(q8[4*c+i]))
						s += int32(w[i]>>4) * int32(int8(q8[16+4*c+i]))
					}
				}
				acc[r] += float32(s)*(f16At(blk[2*r:])*f16At(xb[0:])) + f16At(blk[32+2*r:])*f16At(xb[2:])
			}
		}
		copy(y[t*yStride:t*yStride+q41PackedRows], acc[:])
	}
}
