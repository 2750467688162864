//go:build !amd64

package kernels

// amxCPU and amxReady are false without amd64's AMX kernels.
func amxCPU() bool   { return false }
func amxReady() bool { return false }

// dotAMXF16 is the AMX f16 layout's Dot: its twin without the AMX kernel.
func dotAMXF16(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	dotAMXF16Generic(cols, g, x, xStride, nTok, y, yStride)
}

// quantizeBF16x2Vec has no vector kernel here.
func (s *Set) quantizeBF16x2Vec(src []float32, dst []byte) bool { return false }
