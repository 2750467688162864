//go:build amd64

package kernels

import "encoding/binary"

// f16Tile4x4AVX512 sets out[t*4+r] to the dot of F16 row r (of 4,
// wstride bytes apart) with F16 token t (of 4, xstride bytes apart) over
// the first 16*n16 columns; n16 must be positive.
//
//go:noescape
func f16Tile4x4AVX512(w *byte, wstride int, x *byte, xstride int, n16 int, out *float32)

// f16TileTokens bounds the activations one pass over the rows streams
// (tokens of 2·cols bytes), so they stay in L2 while each group of four
// weight rows, read once per pass, stays in L1.
const f16TileTokens = 256 << 10

// tileF16AVX512 computes the whole 4x4 tiles of rows [r0, r1) and tokens
// [0, nTok) of an F16 matrix with the AVX-512 tile kernel (a TileFunc):
// tokens in passes of about f16TileTokens bytes, each pass over every
// group of four rows.
func tileF16AVX512(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rowsDone, toksDone int) {
	n := m.Cols
	n16 := n / 16
	if n16 == 0 || nTok < 4 || r1-r0 < 4 {
		return 0, 0
	}
	rb := m.RowBytes()
	ab := 2 * n
	rows4 := (r1 - r0) / 4 * 4
	toks4 := nTok / 4 * 4
	_ = m.Data[(r0+rows4)*rb-1]
	_ = xq[toks4*ab-1]
	_ = y[(toks4-1)*m.Rows+r0+rows4-1]
	chunk := max(4, f16TileTokens/ab/4*4)
	var out [16]float32
	for t0 := 0; t0 < toks4; t0 += chunk {
		t1 := min(t0+chunk, toks4)
		for r := r0; r < r0+rows4; r += 4 {
			w := m.Data[r*rb:]
			for t := t0; t < t1; t += 4 {
				f16Tile4x4AVX512(&w[0], rb, &xq[t*ab], ab, n16, &out[0])
				for j := range 4 {
					x := xq[(t+j)*ab:]
					for i := range 4 {
						s := out[j*4+i]
						wi := w[i*rb:]
						for c := n16 * 16; c < n; c++ {
							s += f16Table[binary.LittleEndian.Uint16(wi[2*c:])] * f16Table[binary.LittleEndian.Uint16(x[2*c:])]
						}
						y[(t+j)*m.Rows+r+i] = s
					}
				}
			}
		}
	}
	return rows4, toks4
}
