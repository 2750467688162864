package kernels

// TileFunc computes the whole register tiles of rows [r0, r1) and tokens
// [0, nTok) of an unpacked matrix (as MatMul would, into the same y) and
// reports how many rows from r0 and tokens from 0 it covered; 0 rows when
// the kernel does not apply to the shape.
type TileFunc func(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rows, toks int)

// MatMulTiled is MatMul with the set's register-tiled kernel for m's type
// where it has one (the avx512 set for Q4_1: 4 rows x 4 tokens per call, so
// each unpacked weight block meets four tokens and each loaded token four
// rows); elsewhere, and for the rows and tokens left over from whole tiles,
// it is MatMul. Results match MatMul up to float summation order.
func (s *Set) MatMulTiled(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	var tile TileFunc
	if m.Type < numTypes {
		tile = s.types[m.Type].tile
	}
	if tile == nil || r0 >= r1 || nTok < 4 || m.Packed != nil {
		s.MatMul(m, xq, nTok, y, r0, r1)
		return
	}
	rows, toks := tile(m, xq, nTok, y, r0, r1)
	if rows == 0 {
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
