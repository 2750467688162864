//go:build !amd64

package kernels

func (s *Set) expSubVec(x []float32, sub float32) int { return 0 }

func (s *Set) swigluVec(dst, g, u []float32) int { return 0 }

func (s *Set) f16EncodeVec(dst []uint16, src []float32) int { return 0 }

func (s *Set) quantizeQ8Vec(sum bool, src []float32, dst []byte) bool { return false }
