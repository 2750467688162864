package kernels

import (
	"github.com/moonlm/moonlm/gguf"

	"encoding/binary"
	"math"
)

// nearestInt rounds to the nearest integer, ties to even, with ggml's
// float trick (valid for |v| < 2^22): adding 1.5*2^23 leaves the rounded
// integer in the low mantissa bits.
func nearestInt(v float32) int32 {
	f := float32(v) + 12582912 // the conversion keeps an inlined x*y from fusing with the add
	return int32(math.Float32bits(f)&0x007fffff) - 0x00400000
}

// q8Block quantizes 32 values to int8 with scale amax/127 as ggml's AVX2
// quantize_row_q8_0/q8_1 do, returning the scale and the sum of the quants.
func q8Block(x []float32, qs []byte) (d float32, sum int32) {
	x = x[:32]
	qs = qs[:32]
	var amax float32
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if a > amax {
			amax = a
		}
	}
	d = amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	for j, v := range x {
		q := nearestInt(v * id)
		sum += q
		qs[j] = byte(int8(q))
	}
	return d, sum
}

func quantizeQ8_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		b := dst[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		d, _ := q8Block(src[i*qk32:], b[2:])
		binary.LittleEndian.PutUint16(b, F32ToF16(d))
	}
}

func quantizeQ8_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		b := dst[i*gguf.BytesQ8_1 : (i+1)*gguf.BytesQ8_1]
		d, sum := q8Block(src[i*qk32:], b[4:])
		binary.LittleEndian.PutUint16(b, F32ToF16(d))
		binary.LittleEndian.PutUint16(b[2:], F32ToF16(d*float32(sum)))
	}
}

// quantizeQ8K follows ggml's quantize_row_q8_K_ref: the scale comes from the
// signed value of largest magnitude (first one on ties), d = 1/iscale is a
// float32, and bsums hold the sum of each 16 quants.
func quantizeQ8K(src []float32, dst []byte) {
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ8_K : (i+1)*gguf.BytesQ8_K]
		qs := b[4 : 4+qkK]
		var amax, max float32
		for _, v := range x {
			a := float32(math.Abs(float64(v)))
			if a > amax {
				amax, max = a, v
			}
		}
		if amax == 0 {
			clear(b)
			continue
		}
		iscale := -127 / max
		for j, v := range x {
			q := nearestInt(iscale * v)
			if q > 127 {
				q = 127
			}
			qs[j] = byte(int8(q))
		}
		for j := range 16 {
			var s int32
			for _, q := range qs[16*j : 16*j+16] {
				s += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(b[4+qkK+2*j:], uint16(int16(s)))
		}
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	}
}
