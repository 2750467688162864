//go:build !amd64

package kernels

func (s *Set) ropeVec(x []float32, headDim, nHeads int, cache []float32, neox bool) bool {
	return false
}
