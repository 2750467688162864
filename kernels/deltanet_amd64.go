//go:build amd64

package kernels

// deltaStepAVX512 is DeltaStep over rows rows of n values, n a multiple of
// 32; deltaStepAVX2 the same with n a multiple of 16.
//
//go:noescape
func deltaStepAVX512(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)

//go:noescape
func deltaStepAVX2(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)

// deltaStepVec runs DeltaStep on the widest kernel whose row multiple n
// is and says whether it did. The caller has checked the lengths.
func (s *Set) deltaStepVec(state, k, q, v, out []float32, g, beta, kq float32) bool {
	n, rows := len(k), len(v)
	switch {
	case s.wide() && n%32 == 0:
		deltaStepAVX512(&state[0], rows, n, &k[0], &q[0], &v[0], &out[0], g, beta, kq)
	case s.vec() && n%16 == 0:
		deltaStepAVX2(&state[0], rows, n, &k[0], &q[0], &v[0], &out[0], g, beta, kq)
	default:
		return false
	}
	return true
}

// dots4AVX512 is DotsF32 for 4 vectors against m rows (m even), n a
// multiple of 16; strides in elements.
//
//go:noescape
func dots4AVX512(x *float32, xstride, n int, rows *float32, stride, m int, y *float32, ystride int)

// dots4Vec runs the even head of the m rows of DotsF32 for 4 vectors on
// the AVX-512 kernel and returns how many rows it did (0 without AVX-512
// or when n is not a multiple of 16). The caller has checked the bounds.
func (s *Set) dots4Vec(x []float32, xStride, n int, rows []float32, stride, m int, y []float32, yStride int) int {
	m2 := m &^ 1
	if !s.wide() || n%16 != 0 || m2 == 0 {
		return 0
	}
	dots4AVX512(&x[0], xStride, n, &rows[0], stride, m2, &y[0], yStride)
	return m2
}
