//go:build !amd64

package kernels

func (s *Set) attnValuesQ8Vec(out []float32, v []byte, rowBytes int, w []float32) bool {
	return false
}

func (s *Set) attnValuesQ8HeadsVec(out []float32, hd, G int, v []byte, rowBytes int, w []float32, wStride, n int) int {
	return 0
}

func (s *Set) attnScoresQ8Vec(q []byte, G, hd int, keys []byte, rowBytes, m int, y []float32, yStride int) int {
	return -1
}
