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
