package kernels

import (
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// MXFP4 (the OCP microscaling format, ggml type 39, gpt-oss's expert
// weights): blocks of 32 values, one E8M0 scale byte (a power of two,
// 2^(e-127)) and 16 bytes of 4-bit E2M1 codes, the low nibbles the
// block's first 16 values and the high nibbles its last 16. As ggml, the
// code table holds the E2M1 values doubled (integers) and the scale is
// halved to match, so a weight is kvaluesMXFP4[code] * e8m0Half(e).

const bytesMXFP4 = gguf.BytesMXFP4

// kvaluesMXFP4 are the E2M1 values times two: 0, 0.5, 1, 1.5, 2, 3, 4, 6
// and their negatives.
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// e8m0Half is half the E8M0 scale e, 2^(e-128), built from its bits:
// subnormal for e < 2 (2^-128 and 2^-127), else exponent field e-1. The
// all-ones NaN code 255 is read as 2^127, as ggml does.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

func dequantMXFP4(src []byte, dst []float32) {
	for i := 0; i < len(dst)/qk32; i++ {
		b := src[i*bytesMXFP4 : (i+1)*bytesMXFP4]
		d := e8m0Half(b[0])
		qs := b[1:bytesMXFP4]
		y := dst[i*qk32 : (i+1)*qk32]
		for j := range 16 {
			y[j] = float32(kvaluesMXFP4[qs[j]&0xf]) * d
			y[j+16] = float32(kvaluesMXFP4[qs[j]>>4]) * d
		}
	}
}

// quantizeMXFP4 is ggml's reference quantizer: the scale from the block's
// largest magnitude (2^(floor(log2 amax) - 2), so that amax falls within
// the largest codes), each value the nearest code (the first of equally
// near ones).
func quantizeMXFP4(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*bytesMXFP4 : (i+1)*bytesMXFP4]
		amax := absMax32(x)
		var e uint8
		if amax > 0 {
			// log2 rounded to float32 (log2f), then floored; the byte wraps
			// as C's conversion does on the usual targets.
			l := float32(math.Log2(float64(amax)))
			e = uint8(int32(math.Floor(float64(l))) - 2 + 127)
		}
		d := e8m0Half(e)
		b[0] = e
		for j := range 16 {
			b[1+j] = mxfp4Nearest(x[j], d) | mxfp4Nearest(x[j+16], d)<<4
		}
	}
}

// mxfp4Nearest is the code whose value times d is nearest x (the product
// rounded before the difference: no fused multiply-add).
func mxfp4Nearest(x, d float32) uint8 {
	best := 0
	var bestErr float32
	for i := range 16 {
		v := float32(float32(kvaluesMXFP4[i]) * d)
		err := float32(math.Abs(float64(v - x)))
		if i == 0 || err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// dotMXFP4Generic is ggml's generic MXFP4 x Q8_0 dot: per block the
// integer sums of the two halves, times the Q8_0 scale times the halved
// E8M0 scale, accumulated in float32.
func dotMXFP4Generic(n int, w, x []byte) float32 {
	var sum float32
	for i := 0; i < n/qk32; i++ {
		b := w[i*bytesMXFP4 : (i+1)*bytesMXFP4]
		y := x[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		qs, q8 := b[1:bytesMXFP4], y[2:34]
		var s1, s2 int32
		for j := range 16 {
			s1 += int32(int8(q8[j])) * int32(kvaluesMXFP4[qs[j]&0xf])
			s2 += int32(int8(q8[j+16])) * int32(kvaluesMXFP4[qs[j]>>4])
		}
		d := f16At(y) * e8m0Half(b[0])
		sum += d * float32(s1+s2)
	}
	return sum
}
