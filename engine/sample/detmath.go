package sample

import "math"

// logDet is ln x computed with plain float64 operations in a fixed order,
// like expDet: math.Log is assembly on some platforms and may round
// differently in the last bit, which could flip a sampler's cut-off and so
// change the drawn tokens between platforms. Relative error is below 1e-15
// for normal x.
func logDet(x float64) float64 {
	switch {
	case x != x || x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	case math.IsInf(x, 1):
		return x
	}
	// x = m * 2^e with m in [sqrt(1/2), sqrt(2)).
	m, e := math.Frexp(x) // m in [0.5, 1): exact bit manipulation
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	// ln m = 2 atanh(f), f = (m-1)/(m+1), |f| < 0.1716: the odd series
	// 2(f + f^3/3 + f^5/5 + ...) reaches double precision in 12 terms.
	f := float64(m-1) / float64(m+1)
	f2 := float64(f * f)
	s := 1.0 / 23
	for _, c := range [...]float64{1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3, 1} {
		s = float64(s*f2) + c
	}
	lnm := float64(2 * f * s)
	k := float64(e)
	return float64(float64(k*ln2Hi)+lnm) + float64(k*ln2Lo)
}

// powDet is x^y for x > 0 from expDet and logDet.
func powDet(x, y float64) float64 { return expDet(float64(y * logDet(x))) }
