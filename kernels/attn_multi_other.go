//go:build !amd64

package kernels

func (s *Set) attnMultiVec(x []float32, nx, xStride, n int, rows []uint16, stride, m int, y []float32, yStride int) int {
	return 0
}

func (s *Set) roundF16Vec(dst, src []float32) int { return 0 }

func (s *Set) attnHeadsVec(q []float32, kvHeads, G, hd int, keys []uint16, stride, m int, y []float32, yStride int) int {
	return 0
}
