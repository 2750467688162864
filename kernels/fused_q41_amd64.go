//go:build amd64

package kernels

import "unsafe"

// fusedQ41Tile4x4 sets y[t*ystride+r] = dot(row r, token t) for 4 Q4_1
// rows wstride bytes apart and 4 q8_1 tokens xstride bytes apart; nb (blocks
// per row) must be positive.
//
//go:noescape
func fusedQ41Tile4x4(w *byte, wstride int, x *byte, xstride int, nb int, y *float32, ystride int, f16 *float32)

// tileQ41AVX512 computes the whole 4x4 tiles of rows [r0, r1) and tokens
// [0, nTok) of a Q4_1 matrix with the AVX-512 tile kernel (a TileFunc).
func tileQ41AVX512(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rowsDone, toksDone int) {
	nb := m.Cols / 32
	if nb == 0 || nTok < 4 || r1-r0 < 4 {
		return 0, 0
	}
	rb := m.RowBytes()
	ab := ActivationBytes(m.Type, m.Cols)
	rows4 := (r1 - r0) / 4 * 4
	toks4 := nTok / 4 * 4
	// The kernel reads rows r0..r0+rows4 and tokens 0..toks4 and writes
	// y up to the last tile's last element: check once, not per tile.
	_ = m.Data[(r0+rows4)*rb-1]
	_ = xq[toks4*ab-1]
	_ = y[(toks4-1)*m.Rows+r0+rows4-1]
	wp := unsafe.Pointer(unsafe.SliceData(m.Data))
	xp := unsafe.Pointer(unsafe.SliceData(xq))
	for r := r0; r < r0+rows4; r += 4 {
		w := (*byte)(unsafe.Add(wp, r*rb))
		for t := 0; t < toks4; t += 4 {
			fusedQ41Tile4x4(w, rb, (*byte)(unsafe.Add(xp, t*ab)), ab, nb, &y[t*m.Rows+r], m.Rows, &f16Table[0])
		}
	}
	return rows4, toks4
}
