//go:build !amd64

package kernels

func (s *Set) maxVec(x []float32) (float32, int)       { return 0, 0 }
func (s *Set) chunkSumsVec(x []float32) (float64, int) { return 0, 0 }
func (st *Set) scaleVec(x []float32, s float32) int    { return 0 }
