package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// VecDotType is the activation type ggml pairs with weight type t in a dot
// product: the activations are converted to it once per row of input.
func VecDotType(t gguf.Type) gguf.Type {
	switch t {
	case gguf.F16:
		return gguf.F16
	case gguf.BF16:
		return gguf.BF16
	case gguf.Q4_0, gguf.Q5_0, gguf.Q8_0, gguf.IQ4_NL:
		return gguf.Q8_0
	case gguf.Q4_1, gguf.Q5_1:
		return gguf.Q8_1
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.IQ4_XS:
		return gguf.Q8_K
	}
	return gguf.F32
}

// nearestInt rounds to the nearest integer, ties to even, with ggml's
// float trick (valid for |v| < 2^22): adding 1.5*2^23 leaves the rounded
// integer in the low mantissa bits.
func nearestInt(v float32) int32 {
	f := float32(v) + 12582912 // the conversion keeps an inlined x*y from fusing with the add
	return int32(math.Float32bits(f)&0x007fffff) - 0x00400000
}

// QuantizeRow converts one row of float32 values into type t (len(src)
// values; dst must hold their bytes). For the activation types it matches
// what ggml's x86 CPU backend stores byte for byte: F16 via F16C rounding,
// BF16 with ggml's rounding, Q8_0/Q8_1 as its AVX2 quantizers (scale
// 127/amax, round half to even, Q8_1 sum = d * sum of quants) and Q8_K as
// its reference quantizer. Weight types use ggml's reference quantizers.
func QuantizeRow(t gguf.Type, src []float32, dst []byte) {
	n := len(src)
	switch t {
	case gguf.F32:
		dst = dst[:4*n]
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case gguf.F16:
		F32RowToF16(src, dst)
	case gguf.BF16:
		F32RowToBF16(src, dst)
	case gguf.Q8_0:
		checkRow(t, n, qk32)
		quantizeQ8_0(src, dst)
	case gguf.Q8_1:
		checkRow(t, n, qk32)
		quantizeQ8_1(src, dst)
	case gguf.Q8_K:
		checkRow(t, n, qkK)
		quantizeQ8K(src, dst)
	default:
		if !quantizeWeightRow(t, src, dst) {
			panic(fmt.Sprintf("kernels: QuantizeRow: unsupported type %v", t))
		}
	}
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
		b := dst[i*bytesQ8_0 : (i+1)*bytesQ8_0]
		d, _ := q8Block(src[i*qk32:], b[2:])
		binary.LittleEndian.PutUint16(b, F32ToF16(d))
	}
}

func quantizeQ8_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		b := dst[i*bytesQ8_1 : (i+1)*bytesQ8_1]
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
		b := dst[i*bytesQ8K : (i+1)*bytesQ8K]
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
