package kernels

// MatMulTiled is MatMul. It was the entry point of a register-tiled Q4_1
// product whose rounding depended on a token's place in the batch; products
// are now batch-invariant (see MatMul), and the name stays for callers.
func (s *Set) MatMulTiled(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	s.MatMul(m, xq, nTok, y, r0, r1)
}
