//go:build !amd64

package kernels

func attnDotF16Vec(x, rows []uint16, stride int, y []float32, mode int) int { return 0 }

func attnDotF32Vec(x, rows []float32, stride int, y []float32, mode int) int { return 0 }
