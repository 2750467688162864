//go:build amd64

package kernels

// The four-token f16 kernels (f16tok_amd64.s): one row of nb halves
// against four tokens of halves xstride bytes apart, each token's dot into
// y[t] computed exactly as dotF16RowsAVX2 computes it. The AVX-512 one
// widens the row's halves once for the four tokens, the AVX2 one (16
// registers) once for each pair of tokens.

//go:noescape
func dotF16Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32)

//go:noescape
func dotF16Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)

// The f16 tile kernels (f16tok_amd64.s): three rows of nb halves (nb a
// multiple of 8), wstride bytes apart, against 4*ntok4 tokens xstride bytes
// apart; y[t*ystride+4*r] (bytes) the dot of row r and token t, computed
// exactly as dotF16RowsAVX2 computes it. The AVX-512 one widens each
// step's halves once per row and once per token for the 3x4 tile, the
// AVX2 one once per row and token and once per token for the three rows.

//go:noescape
func dotF16Tile3x4AVX512(w *byte, wstride int, x *byte, xstride int, ntok4 int, nb int, y *float32, ystride int)

//go:noescape
func dotF16Tile3x4AVX2(w *byte, wstride int, x *byte, xstride int, ntok4 int, nb int, y *float32, ystride int)
