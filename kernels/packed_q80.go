package kernels

import (
	"encoding/binary"

	"github.com/moonlm/moonlm/gguf"
)

// Packed q8_0 ("q8_0.r16.v1"): 16 rows interleaved so that a 512-bit
// register holds one row per 32-bit lane. A group of 16 rows of cols values
// (nb = cols/32 blocks) stores block b of all 16 rows together; blocks go
// in pairs so that every 64-byte run starts on a 64-byte boundary of the
// group (16*34 = 544 bytes per block is not a multiple of 64):
//
//	pair p (blocks 2p, 2p+1), 1088 bytes at 1088p:
//	off    0: d[16]  f16 scales of block 2p, row r at 2r
//	off   32: d[16]  f16 scales of block 2p+1
//	off   64: qs[8][16][4] quants of block 2p: the 64 bytes at 64+64c
//	          hold values 4c..4c+3 of row r at +4r
//	off  576: qs[8][16][4] quants of block 2p+1, likewise
//	a last lone block (nb odd), 544 bytes: d[16] at 0, qs at 32.
//
// Quants are stored biased to unsigned (q XOR 0x80 = q+128) because
// VPDPBUSD multiplies unsigned by signed bytes: the kernel broadcasts 4
// signed activation bytes to every lane straight from memory and takes
// sum((q+128)*x) - 128*sum(x). The group is exactly as big as the GGUF rows
// it replaces (16*34 bytes per block), so decode streams the same bytes.
const (
	q80PackedRows  = 16
	q80PackedBlock = q80PackedRows * gguf.BytesQ8_0 // 544
	q80PackedPair  = 2 * q80PackedBlock             // 1088
)

// packedQ80Base is the q8_0 layout with the pure-Go kernel as its Dot; the
// SIMD sets copy it and set their own Dot.
var packedQ80Base = q80Group.layout("q8_0.r16.v1", gguf.Q8_0, packQ80, dotPackedQ80Generic)

// q80PackedMaxTok is the most tokens one Dot call takes (16 rows x 8
// tokens fills the 128-value tile).
const q80PackedMaxTok = 8

// q80BlockOffsets returns where the scales and the quants of block b of a
// packed group of nb blocks start.
func q80BlockOffsets(b, nb int) (d, qs int) {
	base := b / 2 * q80PackedPair
	if b == nb-1 && nb%2 == 1 {
		return base, base + 32
	}
	return base + 32*(b%2), base + 64 + 512*(b%2)
}

// packQ80 interleaves 16 q8_0 rows (src, RowBytes(Q8_0, cols) bytes each)
// into dst (GroupBytes(cols) bytes), moving 32-bit words, so it
// runs near memory speed and allocates nothing.
func packQ80(dst, src []byte, cols int) {
	nb, rb := q80Group.checkPack(dst, src, cols)
	le := binary.LittleEndian
	for b := range nb {
		do, qo := q80BlockOffsets(b, nb)
		d := (*[32]byte)(dst[do : do+32])
		q := (*[512]byte)(dst[qo : qo+512])
		for r := range q80PackedRows {
			s := (*[gguf.BytesQ8_0]byte)(src[r*rb+b*gguf.BytesQ8_0:])
			d[2*r&31] = s[0]
			d[(2*r+1)&31] = s[1]
			for c := range 4 {
				v := le.Uint64(s[2+8*c:]) ^ 0x8080808080808080
				le.PutUint32(q[(128*c+4*r)&511:], uint32(v))
				le.PutUint32(q[(128*c+64+4*r)&511:], uint32(v>>32))
			}
		}
	}
}

// q80Group is the packed q8_0 group's geometry (packedGroup.check).
var q80Group = packedGroup{name: "q8_0", rows: q80PackedRows, shift: blockShift(qk32), blockBytes: q80PackedBlock, actBytes: gguf.BytesQ8_0, maxTok: q80PackedMaxTok, srcBytes: gguf.BytesQ8_0}

// dotPackedQ80Generic is the pure-Go twin of the SIMD packed kernel: the
// same biased integer sums and correction, read from the packed bytes.
func dotPackedQ80Generic(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q80Group.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	for t := range nTok {
		xt := x[t*xStride:]
		var acc [q80PackedRows]float32
		for b := range nb {
			do, qo := q80BlockOffsets(b, nb)
			xb := xt[b*gguf.BytesQ8_0 : (b+1)*gguf.BytesQ8_0]
			dx := f16At(xb)
			q8 := xb[2:34]
			var sx int32
			for _, v := range q8 {
				sx += int32(int8(v))
			}
			for r := range q80PackedRows {
				var s int32
				for c := range 8 {
					w := g[qo+64*c+4*r : qo+64*c+4*r+4]
					for i := range 4 {
						s += int32(w[i]) * int32(int8(q8[4*c+i]))
					}
				}
				s -= 128 * sx
				acc[r] += float32(s) * (f16At(g[do+2*r:]) * dx)
			}
		}
		copy(y[t*yStride:t*yStride+q80PackedRows], acc[:])
	}
}
