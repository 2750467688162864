package kernels

import (
	"github.com/moonlm/moonlm/gguf"

	"encoding/binary"
	"math"
)

// Block sizes of the formats implemented here, as the kernels index their
// blocks: gguf's constants, which its type table is built from (block
// bytes likewise: gguf.BytesQ4_0 ...).
const (
	qk32 = gguf.QK32 // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL
	qkK  = gguf.QKK  // K-quants, IQ4_XS, Q8_K
)

// kvaluesIQ4NL is the non-linear 4-bit codebook shared by IQ4_NL and IQ4_XS.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func dequantQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ4_0 : (i+1)*gguf.BytesQ4_0]
		d := f16At(b)
		qs := b[2:18]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(qs[j]&0xf)-8) * d
			y[j+16] = float32(int32(qs[j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ4_1 : (i+1)*gguf.BytesQ4_1]
		d, m := f16At(b), f16At(b[2:])
		qs := b[4:20]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(qs[j]&0xf)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func dequantQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ5_0 : (i+1)*gguf.BytesQ5_0]
		d := f16At(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int32(qs[j]&0xf|h0)-16) * d
			y[j+16] = float32(int32(qs[j]>>4|h1)-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ5_1 : (i+1)*gguf.BytesQ5_1]
		d, m := f16At(b), f16At(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0xf|h0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

func dequantQ8_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		d := f16At(b)
		qs := b[2:34]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := range 32 {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

// dequantQ8_1 expands Q8_1 activations (d * q; the sum field is redundant).
func dequantQ8_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesQ8_1 : (i+1)*gguf.BytesQ8_1]
		d := f16At(b)
		qs := b[4:36]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := range 32 {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

func dequantQ2K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ2_K : (i+1)*gguf.BytesQ2_K]
		scales := b[0:16]
		d, dmin := f16At(b[80:]), f16At(b[82:])
		y := dst[i*qkK : (i+1)*qkK]
		is := 0
		for half := 0; half < 2; half++ {
			q := b[16+32*half : 16+32*half+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for k := 0; k < 2; k++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&0xf)
					ml := dmin * float32(sc>>4)
					out := y[half*128+j*32+k*16:][:16]
					qq := q[16*k : 16*k+16]
					for l := range 16 {
						out[l] = float32(dl*float32(qq[l]>>shift&3)) - ml
					}
				}
			}
		}
	}
}

// q3kScales unpacks Q3_K's twelve bytes of 6-bit scales into sixteen signed
// values (scale - 32).
func q3kScales(s []byte, out *[16]int8) {
	var aux [4]uint32
	aux[0] = binary.LittleEndian.Uint32(s[0:])
	aux[1] = binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	const k1, k2 = 0x03030303, 0x0f0f0f0f
	aux[2] = (aux[0]>>4)&k2 | ((tmp>>4)&k1)<<4
	aux[3] = (aux[1]>>4)&k2 | ((tmp>>6)&k1)<<4
	aux[0] = aux[0]&k2 | (tmp&k1)<<4
	aux[1] = aux[1]&k2 | ((tmp>>2)&k1)<<4
	for i := range 16 {
		out[i] = int8(byte(aux[i/4]>>(8*(i%4)))) - 32
	}
}

func dequantQ3K(src []byte, dst []float32) {
	var sc [16]int8
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ3_K : (i+1)*gguf.BytesQ3_K]
		hm := b[0:32]
		d := f16At(b[108:])
		q3kScales(b[96:108], &sc)
		y := dst[i*qkK : (i+1)*qkK]
		is := 0
		m := byte(1)
		for half := 0; half < 2; half++ {
			q := b[32+32*half : 32+32*half+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for k := 0; k < 2; k++ {
					dl := d * float32(sc[is])
					is++
					out := y[half*128+j*32+k*16:][:16]
					for l := range 16 {
						v := int32(q[16*k+l]>>shift&3) - 4
						if hm[16*k+l]&m != 0 {
							v += 4
						}
						out[l] = dl * float32(v)
					}
				}
				m <<= 1
			}
		}
	}
}

// scaleMinK4 extracts the j-th 6-bit scale and min of a Q4_K/Q5_K block.
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ4_K : (i+1)*gguf.BytesQ4_K]
		d, dmin := f16At(b), f16At(b[2:])
		scales := b[4:16]
		y := dst[i*qkK : (i+1)*qkK]
		for j := 0; j < 4; j++ {
			q := b[16+32*j : 16+32*j+32]
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*j : 64*j+32]
			hi := y[64*j+32 : 64*j+64]
			for l := range 32 {
				lo[l] = float32(d1*float32(q[l]&0xf)) - m1
				hi[l] = float32(d2*float32(q[l]>>4)) - m2
			}
		}
	}
}

func dequantQ5K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ5_K : (i+1)*gguf.BytesQ5_K]
		d, dmin := f16At(b), f16At(b[2:])
		scales := b[4:16]
		qh := b[16:48]
		y := dst[i*qkK : (i+1)*qkK]
		u1, u2 := byte(1), byte(2)
		for j := 0; j < 4; j++ {
			ql := b[48+32*j : 48+32*j+32]
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*j : 64*j+32]
			hi := y[64*j+32 : 64*j+64]
			for l := range 32 {
				v0, v1 := ql[l]&0xf, ql[l]>>4
				if qh[l]&u1 != 0 {
					v0 += 16
				}
				if qh[l]&u2 != 0 {
					v1 += 16
				}
				lo[l] = float32(d1*float32(v0)) - m1
				hi[l] = float32(d2*float32(v1)) - m2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func dequantQ6K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ6_K : (i+1)*gguf.BytesQ6_K]
		d := f16At(b[208:])
		y := dst[i*qkK : (i+1)*qkK]
		for half := 0; half < 2; half++ {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			sc := b[192+8*half : 192+8*half+8]
			out := y[128*half : 128*half+128]
			for l := range 32 {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				out[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				out[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				out[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}

func dequantQ8K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		y := dst[i*qkK : (i+1)*qkK]
		for j := range qkK {
			y[j] = d * float32(int8(b[4+j]))
		}
	}
}

func dequantIQ4NL(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*gguf.BytesIQ4_NL : (i+1)*gguf.BytesIQ4_NL]
		d := f16At(b)
		qs := b[2:18]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := range 16 {
			y[j] = d * float32(kvaluesIQ4NL[qs[j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[qs[j]>>4])
		}
	}
}

// iq4xsScale returns the signed 6-bit scale (ls - 32) of sub-block ib.
func iq4xsScale(b []byte, ib int) int32 {
	sh := binary.LittleEndian.Uint16(b[2:])
	ls := int32(b[4+ib/2]>>(4*(ib%2)))&0xf | int32(sh>>(2*ib)&3)<<4
	return ls - 32
}

func dequantIQ4XS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qkK; i++ {
		b := src[i*gguf.BytesIQ4_XS : (i+1)*gguf.BytesIQ4_XS]
		d := f16At(b)
		y := dst[i*qkK : (i+1)*qkK]
		for ib := range 8 {
			dl := d * float32(iq4xsScale(b, ib))
			qs := b[8+16*ib : 8+16*ib+16]
			out := y[32*ib : 32*ib+32]
			for j := range 16 {
				out[j] = dl * float32(kvaluesIQ4NL[qs[j]&0xf])
				out[j+16] = dl * float32(kvaluesIQ4NL[qs[j]>>4])
			}
		}
	}
}
