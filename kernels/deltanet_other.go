//go:build !amd64

package kernels

func (s *Set) deltaStepVec(state, k, q, v, out []float32, g, beta, kq float32) bool { return false }

func (s *Set) dots4Vec(x []float32, xStride, n int, rows []float32, stride, m int, y []float32, yStride int) int {
	return 0
}
