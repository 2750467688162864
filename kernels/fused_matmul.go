package kernels

import "github.com/moonlm/moonlm/gguf"

// MatMulTiled is MatMul with register-tiled kernels where this CPU and
// weight type have one (Q4_1 on AVX-512 VNNI: 4 rows x 4 tokens per call,
// so each unpacked weight block meets four tokens and each loaded token four
// rows); elsewhere, and for the rows and tokens left over from whole tiles,
// it is MatMul. Results match MatMul up to float summation order.
func (s *Set) MatMulTiled(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	if m.Type != gguf.Q4_1 || r0 >= r1 || nTok < 4 || m.Packed != nil {
		s.MatMul(m, xq, nTok, y, r0, r1)
		return
	}
	rows, toks, ok := s.fusedTilesQ41(m, xq, nTok, y, r0, r1)
	if !ok {
		s.MatMul(m, xq, nTok, y, r0, r1)
		return
	}
	if toks < nTok {
		ab := ActivationBytes(m.Type, m.Cols)
		s.MatMul(m, xq[toks*ab:], nTok-toks, y[toks*m.Rows:], r0, r0+rows)
	}
	if r0+rows < r1 {
		s.MatMul(m, xq, nTok, y, r0+rows, r1)
	}
}
