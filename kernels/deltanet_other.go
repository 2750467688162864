//go:build !amd64

package kernels

func (s *Set) deltaStepVec(state, k, q, v, out []float32, g, beta, kq float32) bool { return false }
