package kernels

import (
	"encoding/binary"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// ik_llama.cpp-order layouts: weight products as ik_llama.cpp's x86 CPU
// backend computes them with AVX-512 (its iqk matrix multiplications), so a
// model can reproduce that fork's logits (the engine's ik numerics mode).
// Like the ggml-order layouts these are pure Go, one row at a time, with the
// bytes kept in the GGUF layout; unlike them they read ik's own activation
// format, ActQ8_2, instead of ggml's q8_0/q8_K.

// ActQ8_2 is ik_llama.cpp's activation format for q8_0, q4_K and q6_K
// weights (its block_q8_2): blocks of 32 values, each a bf16 scale
// bf16(amax/127), the int16 sum of the quants, and 32 int8 quants rounded
// to nearest (ties to even) with the rounded scale. It is not a GGUF type:
// only layouts that name it in PackedLayout.Act read it.
const ActQ8_2 gguf.Type = 1 << 16

// bytesQ8_2 is one ActQ8_2 block: scale, sum, 32 quants.
const bytesQ8_2 = 36

// QuantizeQ8_2 converts src (a multiple of 32 values) into ActQ8_2 blocks
// as ik_llama.cpp's quantize_row_q8_2_x4 does (the x4 interleaving aside,
// which changes where bytes lie, not their values): the sum is taken over
// the rounded quants before they saturate to int8.
func QuantizeQ8_2(src []float32, dst []byte) {
	checkRow(gguf.Q8_0, len(src))
	for b := 0; b < len(src)/qk32; b++ {
		x := src[b*qk32 : (b+1)*qk32]
		y := dst[b*bytesQ8_2 : (b+1)*bytesQ8_2]
		amax := absMax32(x)
		h := F32ToBF16(amax / 127)
		d := BF16ToF32(h)
		var id float32
		if d > 0 {
			id = 1 / d
		}
		var sum int32
		for i, v := range x {
			q := int32(math.RoundToEven(float64(v * id)))
			sum += q
			y[4+i] = byte(int8(max(-128, min(127, q))))
		}
		binary.LittleEndian.PutUint16(y[0:], h)
		binary.LittleEndian.PutUint16(y[2:], uint16(int16(sum)))
	}
}

// q8_2Block returns block b of ActQ8_2 activations: scale, quant sum, quants.
func q8_2Block(a []byte, b int) (d float32, sum int16, qs []byte) {
	y := a[b*bytesQ8_2 : (b+1)*bytesQ8_2]
	return BF16ToF32(binary.LittleEndian.Uint16(y[0:])), int16(binary.LittleEndian.Uint16(y[2:])), y[4:]
}

// ikHsum8 is ik's hsum_float_8: the two 4-lane halves added, then lanes
// two apart, then the last pair.
func ikHsum8(a *[8]float32) float32 {
	x0, x1, x2, x3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (x0 + x2) + (x1 + x3)
}

// ikDotQ80 is one q8_0 row times ActQ8_2 activations as ik's
// mul_mat_qX_1_q8_2_T with its AVX-512 unpacker: the weights offset by 127
// to unsigned bytes (VPDPBUSD), each block's product split into two
// 16-value integer halves fused into lanes k and 4+k (k = block mod 4) with
// the scale product dw*da, the offset taken back per lane k as
// (-127*dw)*(da*sum), and the lanes reduced by hsum_float_4. Blocks past
// the last multiple of 4 take ik's one-block path.
func ikDotQ80(cols int, w, a []byte) float32 {
	nb := cols / qk32
	var acc [8]float32
	var accm [4]float32
	for b := 0; b < nb/4*4; b++ {
		k := b % 4
		wb := w[b*gguf.BytesQ8_0 : (b+1)*gguf.BytesQ8_0]
		dw := F16ToF32(binary.LittleEndian.Uint16(wb))
		da, sum, qs := q8_2Block(a, b)
		accm[k] += (dw * -127) * (da * float32(sum))
		dd := dw * da
		for h := 0; h < 2; h++ {
			var p int32
			for e := 16 * h; e < 16*h+16; e++ {
				p += int32(uint8(int8(wb[2+e])+127)) * int32(int8(qs[e]))
			}
			acc[4*h+k] = fma32(dd, float32(p), acc[4*h+k])
		}
	}
	for b := nb / 4 * 4; b < nb; b++ {
		wb := w[b*gguf.BytesQ8_0 : (b+1)*gguf.BytesQ8_0]
		dw := F16ToF32(binary.LittleEndian.Uint16(wb))
		da, sum, qs := q8_2Block(a, b)
		m := (-dw * 127) * (da * float32(sum)) * 0.25
		for k := range accm {
			accm[k] += m
		}
		dd := dw * da
		for l := 0; l < 8; l++ {
			var p int32
			for e := 4 * l; e < 4*l+4; e++ {
				p += int32(uint8(int8(wb[2+e])+127)) * int32(int8(qs[e]))
			}
			acc[l] = fma32(dd, float32(p), acc[l])
		}
	}
	var x [4]float32
	for k := range x {
		x[k] = (acc[k] + acc[4+k]) + accm[k]
	}
	return (x[0] + x[2]) + (x[1] + x[3])
}

// ikDotQ4K is one q4_K row times ActQ8_2 activations as ik's
// mul_mat_qX_K_q8_2_X4_T: per super-block, first the mins (lane l, block
// l: (da*sum) times -(dmin*m) fused), then each 32-value block's two
// 16-value integer halves fused into lanes k and 4+k with (d*sc)*da.
func ikDotQ4K(cols int, w, a []byte) float32 {
	var acc [8]float32
	for i := 0; i < cols/qkK; i++ {
		blk := w[i*gguf.BytesQ4_K : (i+1)*gguf.BytesQ4_K]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[0:]))
		dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
		sc, qs := blk[4:16], blk[16:]
		var scale [8]float32
		for l := 0; l < 8; l++ {
			s, m := q4KScaleMin(sc, l)
			scale[l] = d * float32(s)
			da, sum, _ := q8_2Block(a, 8*i+l)
			acc[l] = fma32(da*float32(sum), -(dmin * float32(m)), acc[l])
		}
		for b := 0; b < 8; b++ {
			da, _, aq := q8_2Block(a, 8*i+b)
			dd := scale[b] * da
			shift := 4 * uint(b%2)
			nib := qs[32*(b/2) : 32*(b/2)+32]
			for h := 0; h < 2; h++ {
				var p int32
				for e := 16 * h; e < 16*h+16; e++ {
					p += int32(nib[e]>>shift&0xf) * int32(int8(aq[e]))
				}
				acc[4*h+b%4] = fma32(dd, float32(p), acc[4*h+b%4])
			}
		}
	}
	return ikHsum8(&acc)
}

// ikDotQ6K is one q6_K row times ActQ8_2 activations as ik's
// mul_mat_qY_K_q8_2_X4_T: each 32-value block's two 16-value integer halves
// (quants minus 32), sub-blocks 2k and 2k+1 of their 128-value half, fused
// into lanes k and 4+k with (d*scale)*da.
func ikDotQ6K(cols int, w, a []byte) float32 {
	var acc [8]float32
	var q [128]int32
	for i := 0; i < cols/qkK; i++ {
		blk := w[i*gguf.BytesQ6_K : (i+1)*gguf.BytesQ6_K]
		d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
		for j := 0; j < 2; j++ {
			ql, qh := blk[64*j:64*j+64], blk[128+32*j:128+32*j+32]
			for l := 0; l < 32; l++ {
				q[l] = int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q[l+32] = int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q[l+64] = int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q[l+96] = int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
			for k := 0; k < 4; k++ {
				da, _, aq := q8_2Block(a, 8*i+4*j+k)
				for h := 0; h < 2; h++ {
					dd := (d * float32(int8(blk[192+8*j+2*k+h]))) * da
					var p int32
					for e := 16 * h; e < 16*h+16; e++ {
						p += q[32*k+e] * int32(int8(aq[e]))
					}
					acc[4*h+k] = fma32(dd, float32(p), acc[4*h+k])
				}
			}
		}
	}
	return ikHsum8(&acc)
}

// ikMaxTok bounds the tokens of one Dot call of the ik-order layouts (each
// token is independent in ik's kernels, so any tile works).
const ikMaxTok = 128

// ikLayout makes a one-row, copy-packed layout of type t reading ActQ8_2.
func ikLayout(name string, t gguf.Type, row func(cols int, w, a []byte) float32) PackedLayout {
	dot := func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
		for k := 0; k < nTok; k++ {
			y[k*yStride] = row(cols, g, x[k*xStride:])
		}
	}
	l := ggmlLayout(name, t, dot)
	l.MaxTok, l.Act = ikMaxTok, ActQ8_2
	return l
}

var (
	ikQ80 = ikLayout("q8_0.ik-q8_2.v1", gguf.Q8_0, ikDotQ80)
	ikQ4K = ikLayout("q4_K.ik-q8_2.v1", gguf.Q4_K, ikDotQ4K)
	ikQ6K = ikLayout("q6_K.ik-q8_2.v1", gguf.Q6_K, ikDotQ6K)
)

// RMSNormIk is RMSNorm with the weight applied as ik_llama.cpp's fused
// RMS norm does, dst[i] = (scale*w[i])*x[i], which rounds differently from
// ggml's (x[i]*scale)*w[i]; the sum of squares and the scale are the same.
func RMSNormIk(dst, x, w []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst, w = dst[:n], w[:n]
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(n))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	for i, v := range x {
		dst[i] = float32(scale*w[i]) * v
	}
}

// GELUIk is the tanh-approximation GELU as ik_llama.cpp's vector kernel
// computes it: x times the logistic of u = (1 + c1*x*x)*(c2*x) (c2 twice
// sqrt(2/pi), so that sigma(u) = (1+tanh(u/2))/2), e^u / (e^u + 1) with
// ggml's vector exp, and 1 where u exceeds 30.
func GELUIk(dst, x []float32) {
	const c1 = float32(0.044715)
	c2 := 2 * float32(0.79788456080286535587989211986876)
	dst = dst[:len(x)]
	for i, v := range x {
		u := fma32(v, c1*v, 1)
		u = u * (c2 * v)
		r := float32(1)
		if !(u > 30) {
			e := ExpGGML(u)
			r = e / (e + 1)
		}
		dst[i] = v * r
	}
}

// RoPEApplyIk is RoPEApply as ik_llama.cpp's x86 build rotates: the NeoX
// layout as ggml does (one product fused), the normal layout (pairs 2i,
// 2i+1) with both products rounded before the sum, as its vectorized loop
// computes them (its references are reproduced exactly only so).
func (s *Set) RoPEApplyIk(x []float32, headDim, nHeads int, cache []float32, neox bool) {
	if neox {
		s.RoPEApply(x, headDim, nHeads, cache, true)
		return
	}
	nDims := len(cache)
	if nDims > headDim {
		panic("kernels: RoPEApplyIk: more rotated dimensions than the head has")
	}
	_ = x[headDim*nHeads-1]
	for h := range nHeads {
		v := x[h*headDim : h*headDim+nDims]
		for i0 := 0; i0 < nDims; i0 += 2 {
			c, s := cache[i0], cache[i0+1]
			x0, x1 := v[i0], v[i0+1]
			v[i0] = float32(x0*c) - float32(x1*s)
			v[i0+1] = float32(x0*s) + float32(x1*c)
		}
	}
}
