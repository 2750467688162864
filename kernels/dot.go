package kernels

import (
	"encoding/binary"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// DotRow returns the dot product of one weight row w of type t (n values)
// with activations xq already converted by QuantizeRow(VecDotType(t), ...).
// It uses the set's (possibly SIMD) kernel.
func (s *Set) DotRow(t gguf.Type, w, xq []byte, n int) float32 {
	return s.dotFor(t, "DotRow")(n, w, xq)
}

// The generic kernels below sum integer products exactly within a block and
// accumulate blocks in float32, scaled by the product of the two block
// scales, as ggml's reference vec_dot kernels do.

func dotF32Row(n int, w, x []byte) float32 {
	w, x = w[:4*n], x[:4*n]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * math.Float32frombits(binary.LittleEndian.Uint32(x[4*i:])))
		s1 += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i+4:])) * math.Float32frombits(binary.LittleEndian.Uint32(x[4*i+4:])))
		s2 += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i+8:])) * math.Float32frombits(binary.LittleEndian.Uint32(x[4*i+8:])))
		s3 += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i+12:])) * math.Float32frombits(binary.LittleEndian.Uint32(x[4*i+12:])))
	}
	for ; i < n; i++ {
		s0 += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:])) * math.Float32frombits(binary.LittleEndian.Uint32(x[4*i:])))
	}
	return float32(s0 + s1 + s2 + s3)
}

// dotF16Row: products of two halves are exact in float32; ggml's scalar
// ggml_vec_dot_f16 sums them in double (here in four partial sums).
func dotF16Row(n int, w, x []byte) float32 {
	w, x = w[:2*n], x[:2*n]
	tab := f16Table
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += float64(tab[binary.LittleEndian.Uint16(w[2*i:])] * tab[binary.LittleEndian.Uint16(x[2*i:])])
		s1 += float64(tab[binary.LittleEndian.Uint16(w[2*i+2:])] * tab[binary.LittleEndian.Uint16(x[2*i+2:])])
		s2 += float64(tab[binary.LittleEndian.Uint16(w[2*i+4:])] * tab[binary.LittleEndian.Uint16(x[2*i+4:])])
		s3 += float64(tab[binary.LittleEndian.Uint16(w[2*i+6:])] * tab[binary.LittleEndian.Uint16(x[2*i+6:])])
	}
	for ; i < n; i++ {
		s0 += float64(tab[binary.LittleEndian.Uint16(w[2*i:])] * tab[binary.LittleEndian.Uint16(x[2*i:])])
	}
	return float32(s0 + s1 + s2 + s3)
}

// dotF16Tile is the generic set's tile kernel (TileDotFunc): dotF16Row
// for every row and token, the twin of the SIMD sets' register tiles.
func dotF16Tile(n int, w []byte, rowBytes, nRows int, x []byte, xStride, nTok int, y []float32, yStride int) {
	for r := range nRows {
		row := w[r*rowBytes : r*rowBytes+2*n]
		for k := range nTok {
			y[k*yStride+r] = dotF16Row(n, row, x[k*xStride:k*xStride+2*n])
		}
	}
}

// bf16At reads the little-endian bfloat16 at b[0:2].
func bf16At(b []byte) float32 {
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16)
}

func dotBF16Row(n int, w, x []byte) float32 {
	w, x = w[:2*n], x[:2*n]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += float64(bf16At(w[2*i:]) * bf16At(x[2*i:]))
		s1 += float64(bf16At(w[2*i+2:]) * bf16At(x[2*i+2:]))
		s2 += float64(bf16At(w[2*i+4:]) * bf16At(x[2*i+4:]))
		s3 += float64(bf16At(w[2*i+6:]) * bf16At(x[2*i+6:]))
	}
	for ; i < n; i++ {
		s0 += float64(bf16At(w[2*i:]) * bf16At(x[2*i:]))
	}
	return float32(s0 + s1 + s2 + s3)
}

func dotQ4_0Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesQ4_0 : (i+1)*gguf.BytesQ4_0]
		y := x[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		qs, q8 := b[2:18], y[2:34]
		var s int32
		for j := range 16 {
			s += (int32(qs[j]&0xf) - 8) * int32(int8(q8[j]))
			s += (int32(qs[j]>>4) - 8) * int32(int8(q8[j+16]))
		}
		sum += float32(s) * (f16At(b) * f16At(y))
	}
	return sum
}

func dotQ4_1Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesQ4_1 : (i+1)*gguf.BytesQ4_1]
		y := x[i*gguf.BytesQ8_1 : (i+1)*gguf.BytesQ8_1]
		qs, q8 := b[4:20], y[4:36]
		var s int32
		for j := range 16 {
			s += int32(qs[j]&0xf) * int32(int8(q8[j]))
			s += int32(qs[j]>>4) * int32(int8(q8[j+16]))
		}
		sum += float32(s)*(f16At(b)*f16At(y)) + f16At(b[2:])*f16At(y[2:])
	}
	return sum
}

func dotQ5_0Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesQ5_0 : (i+1)*gguf.BytesQ5_0]
		y := x[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		qh := binary.LittleEndian.Uint32(b[2:])
		qs, q8 := b[6:22], y[2:34]
		var s int32
		for j := range 16 {
			h0 := int32(qh>>j<<4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			s += (int32(qs[j]&0xf) | h0 - 16) * int32(int8(q8[j]))
			s += (int32(qs[j]>>4) | h1 - 16) * int32(int8(q8[j+16]))
		}
		sum += float32(s) * (f16At(b) * f16At(y))
	}
	return sum
}

func dotQ5_1Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesQ5_1 : (i+1)*gguf.BytesQ5_1]
		y := x[i*gguf.BytesQ8_1 : (i+1)*gguf.BytesQ8_1]
		qh := binary.LittleEndian.Uint32(b[4:])
		qs, q8 := b[8:24], y[4:36]
		var s int32
		for j := range 16 {
			h0 := int32(qh>>j<<4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			s += (int32(qs[j]&0xf) | h0) * int32(int8(q8[j]))
			s += (int32(qs[j]>>4) | h1) * int32(int8(q8[j+16]))
		}
		sum += float32(s)*(f16At(b)*f16At(y)) + f16At(b[2:])*f16At(y[2:])
	}
	return sum
}

func dotQ8_0Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		y := x[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		qs, q8 := b[2:34], y[2:34]
		var s int32
		for j := range 32 {
			s += int32(int8(qs[j])) * int32(int8(q8[j]))
		}
		sum += float32(s) * (f16At(b) * f16At(y))
	}
	return sum
}

func dotIQ4NLGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*gguf.BytesIQ4_NL : (i+1)*gguf.BytesIQ4_NL]
		y := x[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		qs, q8 := b[2:18], y[2:34]
		var s int32
		for j := range 16 {
			s += int32(kvaluesIQ4NL[qs[j]&0xf]) * int32(int8(q8[j]))
			s += int32(kvaluesIQ4NL[qs[j]>>4]) * int32(int8(q8[j+16]))
		}
		sum += float32(s) * (f16At(b) * f16At(y))
	}
	return sum
}

// q8K returns the float32 scale, quants and block sums of one Q8_K block.
func q8K(y []byte) (d float32, qs, bsums []byte) {
	return math.Float32frombits(binary.LittleEndian.Uint32(y)), y[4 : 4+qkK], y[4+qkK : gguf.BytesQ8_K]
}

func bsum(bsums []byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(bsums[2*j:])))
}

func dotQ2KGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesQ2_K : (i+1)*gguf.BytesQ2_K]
		dy, q8, bs := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		scales := b[0:16]
		var summ, sumi int32
		for j := range 16 {
			summ += bsum(bs, j) * int32(scales[j]>>4)
		}
		is := 0
		for half := range 2 {
			q := b[16+32*half : 16+32*half+32]
			for j := range 4 {
				shift := uint(2 * j)
				for k := range 2 {
					var s int32
					qq := q[16*k : 16*k+16]
					yy := q8[128*half+32*j+16*k:][:16]
					for l := range 16 {
						s += int32(qq[l]>>shift&3) * int32(int8(yy[l]))
					}
					sumi += s * int32(scales[is]&0xf)
					is++
				}
			}
		}
		sum += dy*f16At(b[80:])*float32(sumi) - dy*f16At(b[82:])*float32(summ)
	}
	return sum
}

func dotQ3KGeneric(n int, w, x []byte) float32 {
	var sc [16]int8
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesQ3_K : (i+1)*gguf.BytesQ3_K]
		dy, q8, _ := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		hm := b[0:32]
		q3kScales(b[96:108], &sc)
		var sumi int32
		is := 0
		m := byte(1)
		for half := range 2 {
			q := b[32+32*half : 32+32*half+32]
			for j := range 4 {
				shift := uint(2 * j)
				for k := range 2 {
					var s int32
					yy := q8[128*half+32*j+16*k:][:16]
					for l := range 16 {
						v := int32(q[16*k+l]>>shift&3) - 4
						if hm[16*k+l]&m != 0 {
							v += 4
						}
						s += v * int32(int8(yy[l]))
					}
					sumi += s * int32(sc[is])
					is++
				}
				m <<= 1
			}
		}
		sum += dy * f16At(b[108:]) * float32(sumi)
	}
	return sum
}

func dotQ4KGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesQ4_K : (i+1)*gguf.BytesQ4_K]
		dy, q8, bs := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		scales := b[4:16]
		var sumi, summ int32
		for j := range 4 {
			q := b[16+32*j : 16+32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			lo := q8[64*j : 64*j+32]
			hi := q8[64*j+32 : 64*j+64]
			var s1, s2 int32
			for l := range 32 {
				s1 += int32(q[l]&0xf) * int32(int8(lo[l]))
				s2 += int32(q[l]>>4) * int32(int8(hi[l]))
			}
			sumi += s1*int32(sc1) + s2*int32(sc2)
			summ += int32(m1)*(bsum(bs, 4*j)+bsum(bs, 4*j+1)) + int32(m2)*(bsum(bs, 4*j+2)+bsum(bs, 4*j+3))
		}
		sum += dy*f16At(b)*float32(sumi) - dy*f16At(b[2:])*float32(summ)
	}
	return sum
}

func dotQ5KGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesQ5_K : (i+1)*gguf.BytesQ5_K]
		dy, q8, bs := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		scales := b[4:16]
		qh := b[16:48]
		var sumi, summ int32
		u1, u2 := byte(1), byte(2)
		for j := range 4 {
			ql := b[48+32*j : 48+32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			lo := q8[64*j : 64*j+32]
			hi := q8[64*j+32 : 64*j+64]
			var s1, s2 int32
			for l := range 32 {
				v0, v1 := int32(ql[l]&0xf), int32(ql[l]>>4)
				if qh[l]&u1 != 0 {
					v0 += 16
				}
				if qh[l]&u2 != 0 {
					v1 += 16
				}
				s1 += v0 * int32(int8(lo[l]))
				s2 += v1 * int32(int8(hi[l]))
			}
			sumi += s1*int32(sc1) + s2*int32(sc2)
			summ += int32(m1)*(bsum(bs, 4*j)+bsum(bs, 4*j+1)) + int32(m2)*(bsum(bs, 4*j+2)+bsum(bs, 4*j+3))
			u1 <<= 2
			u2 <<= 2
		}
		sum += dy*f16At(b)*float32(sumi) - dy*f16At(b[2:])*float32(summ)
	}
	return sum
}

func dotQ6KGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesQ6_K : (i+1)*gguf.BytesQ6_K]
		dy, q8, _ := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		var sumi int32
		for half := range 2 {
			ql := b[64*half : 64*half+64]
			qh := b[128+32*half : 128+32*half+32]
			sc := b[192+8*half : 192+8*half+8]
			yy := q8[128*half : 128*half+128]
			// Sub-block of 16 values h (0, 1) in quarter k uses scale sc[h+2k].
			for h := range 2 {
				var s0, s1, s2, s3 int32
				for l := 16 * h; l < 16*h+16; l++ {
					s0 += (int32(ql[l]&0xf|(qh[l]&3)<<4) - 32) * int32(int8(yy[l]))
					s1 += (int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32) * int32(int8(yy[l+32]))
					s2 += (int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32) * int32(int8(yy[l+64]))
					s3 += (int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32) * int32(int8(yy[l+96]))
				}
				sumi += s0*int32(int8(sc[h])) + s1*int32(int8(sc[h+2])) + s2*int32(int8(sc[h+4])) + s3*int32(int8(sc[h+6]))
			}
		}
		sum += dy * f16At(b[208:]) * float32(sumi)
	}
	return sum
}

func dotIQ4XSGeneric(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qkK; i++ {
		b := w[i*gguf.BytesIQ4_XS : (i+1)*gguf.BytesIQ4_XS]
		dy, q8, _ := q8K(x[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K])
		var sumi int32
		for ib := range 8 {
			qs := b[8+16*ib : 8+16*ib+16]
			yy := q8[32*ib : 32*ib+32]
			var s int32
			for j := range 16 {
				s += int32(kvaluesIQ4NL[qs[j]&0xf]) * int32(int8(yy[j]))
				s += int32(kvaluesIQ4NL[qs[j]>>4]) * int32(int8(yy[j+16]))
			}
			sumi += s * iq4xsScale(b, ib)
		}
		sum += dy * f16At(b) * float32(sumi)
	}
	return sum
}
