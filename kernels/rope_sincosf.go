package kernels

import "math"

// RoPE angles go through C's sinf and cosf in ggml, so on glibc (2.28 and
// later, which uses Arm's optimized-routines algorithm) the rotations use
// values that differ from correctly rounded ones in about 1% of angles by an
// ulp. SinCosF32 reproduces that algorithm so our rotations are the same:
//   - |x| < 2^-12: sin x = x, cos x = 1;
//   - |x| < pi/4 (compared on the top 12 bits): the polynomials directly;
//   - |x| < 120: x - n*pi/2 in float64, n from x*2/pi (scaled by 2^24 and
//     rounded with an integer add and shift, as the non-FMA-rounding build);
//   - larger: an exact fixed-point reduction with 4/pi to 192 bits;
// then a degree-6 even polynomial for cos and a degree-7 odd one for sin,
// in float64, with the quadrant swapping and negating them.

// sincosPoly holds the polynomial set for one pair of quadrants: the second
// set negates the cosine polynomial so quadrants 2 and 3 need no extra sign.
type sincosPoly struct {
	c0, c1, c2, c3, c4 float64
	s1, s2, s3         float64
}

var sincosPolys = [2]sincosPoly{
	{0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// sincosSign is the sign of the reduced argument per quadrant.
var sincosSign = [4]float64{1, -1, -1, 1}

const (
	sincosHalfPiInv = 0x1.45F306DC9C883p+23 // 2/pi * 2^24
	sincosHalfPi    = 0x1.921FB54442D18p0   // pi/2
	sincosPi63      = 0x1.921FB54442D18p-62 // 2pi * 2^-64
)

// invPio4 is 4/pi in fixed point, entry i being the 32 bits that end 8*i
// bits after the binary point (the first three are shorter), so a window
// of 96 bits starts at any byte.
var invPio4 = func() [24]uint32 {
	// 4/pi = 1.27323954... : its first 192 fraction-and-integer bits.
	const hex = "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041"
	var bytes [24]uint32
	for i := range bytes {
		var v uint32
		for _, c := range hex[2*i : 2*i+2] {
			v <<= 4
			if c >= 'a' {
				v |= uint32(c-'a') + 10
			} else {
				v |= uint32(c - '0')
			}
		}
		bytes[i] = v
	}
	var t [24]uint32
	for i := range t {
		for k := max(0, i-3); k <= i; k++ {
			t[i] = t[i]<<8 | bytes[k]
		}
	}
	return t
}()

// abstop12 is the float's exponent and top three mantissa bits, unsigned.
func abstop12(x float32) uint32 { return (math.Float32bits(x) >> 20) & 0x7ff }

var (
	top12Pio4  = abstop12(float32(0x1.921FB54442D18p-1))
	top12Tiny  = abstop12(0x1p-12)
	top12Large = abstop12(120)
	top12Inf   = abstop12(float32(math.Inf(1)))
)

// sincosReduceLarge reduces |x| >= 120 (xi its bits, sign ignored) to
// [-pi/4, pi/4] and a quadrant, multiplying the mantissa by 96 bits of 4/pi
// picked by the exponent, in 64-bit integers.
func sincosReduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi & 0xffffff) | 0x800000
	xi <<= shift
	res0 := uint64(xi * arr[0]) // only the low 32 bits matter
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = (res2 >> 32) | (res0 << 32)
	res0 += res1
	n := (res0 + (1 << 61)) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * sincosPi63, int(n)
}

// sincosEval evaluates the sine (cos false) or cosine polynomial of the
// reduced x (x2 = x*x) for quadrant parity n&1, which swaps them.
func sincosEval(x, x2 float64, p *sincosPoly, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := p.s2 + x2*p.s3
		x7 := x3 * x2
		s := x + x3*p.s1
		return float32(s + x7*s1)
	}
	x4 := x2 * x2
	c2 := p.c3 + x2*p.c4
	c1 := p.c0 + x2*p.c1
	x6 := x4 * x2
	c := c1 + x4*p.c2
	return float32(c + x6*c2)
}

// SinCosF32 returns sinf(y) and cosf(y) as glibc computes them (see above),
// for finite y; NaN and infinities give NaN.
func SinCosF32(y float32) (sin, cos float32) {
	x := float64(y)
	top := abstop12(y)
	p := &sincosPolys[0]
	switch {
	case top < top12Pio4:
		if top < top12Tiny {
			return y, 1
		}
		x2 := x * x
		return sincosEval(x, x2, p, 0), sincosEval(x, x2, p, 1)
	case top < top12Large:
		r := x * sincosHalfPiInv
		n := int((int32(r) + 0x800000) >> 24)
		x = x - float64(n)*sincosHalfPi
		s := sincosSign[n&3]
		if n&2 != 0 {
			p = &sincosPolys[1]
		}
		xs, x2 := x*s, x*x
		return sincosEval(xs, x2, p, n), sincosEval(xs, x2, p, n^1)
	case top < top12Inf:
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := sincosReduceLarge(xi)
		s := sincosSign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosPolys[1]
		}
		xs, x2 := x*s, x*x
		return sincosEval(xs, x2, p, n), sincosEval(xs, x2, p, n^1)
	}
	nan := float32(math.NaN())
	return nan, nan
}
