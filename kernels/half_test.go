package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// refF32ToF16 is an independent float64 implementation of IEEE
// round-to-nearest-even narrowing, for checking F32ToF16.
func refF32ToF16(f float32) uint16 {
	v := float64(f)
	var sign uint16
	if math.Signbit(v) {
		sign = 0x8000
		v = -v
	}
	switch {
	case math.IsNaN(v):
		return sign | 0x7e00 | uint16(math.Float32bits(f)&0x7fffff>>13)
	case v >= 65520: // halfway between 65504 and 2^16 rounds up to inf
		return sign | 0x7c00
	case v < 0x1p-14: // subnormal range: units of 2^-24
		return sign | uint16(math.RoundToEven(v*0x1p24))
	}
	e := math.Floor(math.Log2(v))
	if math.Ldexp(1, int(e)) > v { // guard against Log2 rounding
		e--
	}
	m := math.RoundToEven(math.Ldexp(v, 10-int(e))) // in [1024, 2048]
	if m == 2048 {
		m = 1024
		e++
	}
	if e > 15 {
		return sign | 0x7c00
	}
	return sign | uint16(e+15)<<10 | uint16(m-1024)
}

func TestF16RoundTripAllHalves(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			require.True(t, math.IsNaN(float64(f)), "%04x", h)
			require.Equal(t, uint16(h)|0x200, F32ToF16(f), "NaN %04x comes back quiet", h)
			continue
		}
		require.Equal(t, uint16(h), F32ToF16(f), "%04x -> %v", h, f)
		require.Equal(t, refF32ToF16(f), uint16(h))
	}
}

func TestF32ToF16MatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(f float32) {
		require.Equal(t, refF32ToF16(f), F32ToF16(f), "%v (%08x)", f, math.Float32bits(f))
	}
	for range 200000 {
		check(math.Float32frombits(rng.Uint32()))
	}
	// Every tie and near-tie around a few halves, normal and subnormal.
	for _, h := range []uint16{0x0001, 0x0002, 0x03ff, 0x0400, 0x3c00, 0x3c01, 0x7bff, 0x8001, 0xfbff} {
		a, b := F16ToF32(h), F16ToF32(h+1)
		mid := (a + b) / 2 // exact in float32
		for _, d := range []int32{-2, -1, 0, 1, 2} {
			check(math.Float32frombits(uint32(int32(math.Float32bits(mid)) + d)))
		}
	}
	check(65519.99)
	check(65520)
	check(0x1p-25)
	check(0x1.000002p-25)
	check(float32(math.Inf(-1)))
}

func TestBF16(t *testing.T) {
	require.Equal(t, uint16(0x3f80), F32ToBF16(1))
	// Ties to even: 1 + 2^-8 is halfway between 1 and 1+2^-7.
	require.Equal(t, uint16(0x3f80), F32ToBF16(1+0x1p-8))
	require.Equal(t, uint16(0x3f82), F32ToBF16(1+3*0x1p-8))
	require.Equal(t, uint16(0x3f81), F32ToBF16(1+0x1p-8+0x1p-20))
	// NaNs are truncated and forced quiet, never rounded into infinity.
	require.Equal(t, uint16(0x7fc0), F32ToBF16(math.Float32frombits(0x7f800001)))
	require.Equal(t, uint16(0xffff), F32ToBF16(math.Float32frombits(0xffffffff)))
	require.Equal(t, uint16(0xffc1), F32ToBF16(math.Float32frombits(0xff810000)))
	require.True(t, math.IsNaN(float64(BF16ToF32(F32ToBF16(math.Float32frombits(0x7fffffff))))))
	// Subnormals are kept.
	require.Equal(t, uint16(0x0001), F32ToBF16(math.Float32frombits(0x00010000)))
	for h := 0; h < 1<<16; h++ {
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			continue
		}
		require.Equal(t, uint16(h), F32ToBF16(BF16ToF32(uint16(h))))
	}
}
