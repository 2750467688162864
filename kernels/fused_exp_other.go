//go:build !amd64

package kernels

func (s *Set) attnDotF16Vec(x, rows []uint16, stride int, y []float32, mode int) int { return 0 }

func (s *Set) attnDotF32Vec(x, rows []float32, stride int, y []float32, mode int) int { return 0 }
