package kernels

// MatMulTiled is MatMul. It was the entry point of a register-tiled Q4_1
// product whose rounding depended on a token's place in the batch; products
// are now batch-invariant (see MatMul), and the name stays for callers.
func (s *Set) MatMulTiled(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	s.MatMul(m, xq, nTok, y, r0, r1)
}

// TileFunc computes the whole register tiles of rows [r0, r1) and tokens
// [0, nTok) of an unpacked matrix and reports how many rows from r0 and
// tokens from 0 it covered; 0 rows when the kernel does not apply to the
// shape. The avx512 set's Q4_1 tile kernel (4 rows x 4 tokens per call)
// is one; MatMul does not use it, as its rounding depends on a token's
// place in the tile.
type TileFunc func(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rows, toks int)
