//go:build amd64

package kernels

// dotMXFP4Tok4AVX2 and dotMXFP4Tok4AVX512 (mxfp4_tokens_amd64.s) are the
// four-token twins of dotMXFP4RowsAVX2 and dotMXFP4RowsAVX512: y[k] =
// dot(w, token k) for four tokens xstride bytes apart, nb blocks each.
// The format table names them (asmMXFP4Tok4AVX2, asmMXFP4Tok4AVX512) and
// runTok4 calls them behind the adapters' bounds checks.

//go:noescape
func dotMXFP4Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

//go:noescape
func dotMXFP4Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
