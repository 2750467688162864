//go:build amd64

package kernels

// dotF16Tok4AVX512 (f16tok_amd64.s) is the four-token f16 kernel: one row
// of nb halves against four tokens of halves xstride bytes apart, each
// token's dot into y[t] computed exactly as dotF16RowsAVX2 computes it;
// the row's halves are widened once for the four tokens.
//
//go:noescape
func dotF16Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32)
