package sample

import (
	"math"
	"math/bits"
)

// rng is xoshiro256** (Blackman and Vigna), seeded through splitmix64: fast,
// small, and defined by integer operations only, so it gives the same
// sequence on every platform.
type rng struct{ s [4]uint64 }

// splitmix64 advances *x and returns the next splitmix64 output.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) seed(seed uint64) {
	x := seed
	for i := range r.s {
		r.s[i] = splitmix64(&x)
	}
}

func (r *rng) next() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// float64 returns a uniform value in [0, 1) with 53 random bits.
func (r *rng) float64() float64 {
	return float64(r.next()>>11) * (1.0 / (1 << 53))
}

// Taylor coefficients 1/n! for expDet's polynomial.
const (
	c2  = 1.0 / 2
	c3  = 1.0 / 6
	c4  = 1.0 / 24
	c5  = 1.0 / 120
	c6  = 1.0 / 720
	c7  = 1.0 / 5040
	c8  = 1.0 / 40320
	c9  = 1.0 / 362880
	c10 = 1.0 / 3628800
	c11 = 1.0 / 39916800
	c12 = 1.0 / 479001600
)

const (
	ln2Hi = 6.93147180369123816490e-01 // high bits of ln 2: k*ln2Hi is exact
	ln2Lo = 1.90821492927058770002e-10
)

// expDet is e^x computed with plain float64 operations in a fixed order
// (explicit conversions forbid fused multiply-adds), so the sampler's
// probabilities, and hence its draws, are bit-identical on every platform.
// Relative error is below 1e-15 where the result is a normal number.
func expDet(x float64) float64 {
	switch {
	case x != x:
		return x
	case x < -745.2:
		return 0
	case x > 709.7:
		return math.Inf(1)
	}
	k := math.Floor(float64(x*math.Log2E) + 0.5)
	r := float64(x-float64(k*ln2Hi)) - float64(k*ln2Lo)
	p := float64(c12*r) + c11
	p = float64(p*r) + c10
	p = float64(p*r) + c9
	p = float64(p*r) + c8
	p = float64(p*r) + c7
	p = float64(p*r) + c6
	p = float64(p*r) + c5
	p = float64(p*r) + c4
	p = float64(p*r) + c3
	p = float64(p*r) + c2
	p = float64(p*r) + 1
	p = float64(p*r) + 1
	// Scale by 2^k with exact power-of-two multiplies (one rounding at
	// most, when the result is subnormal).
	ki := int(k)
	if ki > 1023 {
		p *= 2
		ki--
	}
	if ki < -1000 {
		p *= 0x1p-200
		ki += 200
	}
	return p * math.Float64frombits(uint64(ki+1023)<<52)
}
