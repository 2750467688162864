package kernels

import (
	"encoding/binary"
	"math"
)

// F16ToF32 widens an IEEE half (binary16) to float32; exact for every input.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN: keep the payload, as F16C does
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal half: value = mant * 2^-24, exact in float32.
	return math.Float32frombits(sign | math.Float32bits(float32(mant)*(1.0/(1<<24))))
}

// f16Table maps every half to its float32 value (256 KiB): bulk
// conversions and the f16 dot products look values up instead of decoding.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return &t
}()

// F32ToF16 narrows to IEEE half with round-to-nearest-even, overflow to
// infinity and quiet NaNs, bit for bit what x86 F16C (vcvtps2ph imm 0)
// produces, which is what ggml's CPU backend uses.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN: keep the top payload bits, force quiet
		return sign | 0x7e00 | uint16(a>>13)&0x3ff
	case a >= 0x47800000: // 2^16 and above, and infinity
		return sign | 0x7c00
	case a < 0x38800000:
		// Below 2^-14 the half is subnormal, in units of 2^-24: adding 0.5
		// (whose ulp is 2^-24) rounds to that unit, ties to even, and leaves
		// the count in the low bits.
		v := math.Float32frombits(a) + 0.5
		return sign | uint16(math.Float32bits(v)-0x3f000000)
	}
	// Normal: round the 13 dropped bits to nearest even (a carry correctly
	// bumps the exponent, up to infinity), then rebias 127 -> 15.
	r := a + 0xfff + (a>>13)&1
	return sign | uint16((r-0x38000000)>>13)
}

// BF16ToF32 widens a bfloat16; exact.
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16 narrows to bfloat16 as ggml_compute_fp32_to_bf16 does: round to
// nearest even, NaNs truncated and forced quiet, subnormals kept.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// f16At reads the little-endian half at b[0:2] as float32.
func f16At(b []byte) float32 {
	return F16ToF32(binary.LittleEndian.Uint16(b))
}

// F16RowToF32 converts len(dst) little-endian halves from src.
func F16RowToF32(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	tab := f16Table
	for i := range dst {
		dst[i] = tab[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

// F32RowToF16 converts src to little-endian halves in dst (2 bytes each).
func F32RowToF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

// BF16RowToF32 converts len(dst) little-endian bfloat16 values from src.
func BF16RowToF32(src []byte, dst []float32) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// F32RowToBF16 converts src to little-endian bfloat16 in dst.
func F32RowToBF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}
