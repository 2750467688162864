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
