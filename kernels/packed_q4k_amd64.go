//go:build amd64

package kernels

import "unsafe"

// packedQ4KDot8AVX512 sets y[t*ystride+r] = dot(row r, token t) for the 16
// rows of packed q4_K group w and 8 q8_K tokens xstride bytes apart; nb > 0.
//
//go:noescape
func packedQ4KDot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

// packedQ4KDot4AVX512 is packedQ4KDot8AVX512 for 4 tokens.
//
//go:noescape
func packedQ4KDot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

// packedQ4KDot1AVX512 is packedQ4KDot8AVX512 for one token.
//
//go:noescape
func packedQ4KDot1AVX512(w *byte, nb int, x *byte, y *float32)

// The GFNI forms of the kernels above (same contracts): one
// VGF2P8AFFINEQB replaces the shift and AND of each high-nibble operand.
//
//go:noescape
func packedQ4KDot8GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot4GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot1GFNI(w *byte, nb int, x *byte, y *float32)

// packedQ4KAVX512 is the q4_K layout with the VNNI kernels, for the avx512
// variant.
var packedQ4KAVX512 = func() *PackedLayout {
	l := packedQ4KBase
	l.Dot = dotPackedQ4KAVX512
	return &l
}()

var _ = registerPacked("avx512", packedQ4KAVX512)

// dotPackedQ4KAVX512 checks the bounds once and runs the 8-, 4- and
// 1-token kernels over the tokens, largest first.
func dotPackedQ4KAVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkPackedQ4K(cols, g, x, xStride, nTok, packedQ4KBase.MaxTok, y, yStride)
	nb := cols / qkK
	if nb == 0 {
		for t := range nTok {
			clear(y[t*yStride : t*yStride+q4kPackedRows])
		}
		return
	}
	gp := unsafe.SliceData(g)
	xp := unsafe.Pointer(unsafe.SliceData(x))
	yp := unsafe.Pointer(unsafe.SliceData(y))
	gf := packedQ4KGFNI
	t := 0
	for ; t+8 <= nTok; t += 8 {
		xt, yt := (*byte)(unsafe.Add(xp, t*xStride)), (*float32)(unsafe.Add(yp, 4*t*yStride))
		if gf {
			packedQ4KDot8GFNI(gp, nb, xt, xStride, yt, yStride)
		} else {
			packedQ4KDot8AVX512(gp, nb, xt, xStride, yt, yStride)
		}
	}
	for ; t+4 <= nTok; t += 4 {
		xt, yt := (*byte)(unsafe.Add(xp, t*xStride)), (*float32)(unsafe.Add(yp, 4*t*yStride))
		if gf {
			packedQ4KDot4GFNI(gp, nb, xt, xStride, yt, yStride)
		} else {
			packedQ4KDot4AVX512(gp, nb, xt, xStride, yt, yStride)
		}
	}
	for ; t < nTok; t++ {
		xt, yt := (*byte)(unsafe.Add(xp, t*xStride)), (*float32)(unsafe.Add(yp, 4*t*yStride))
		if gf {
			packedQ4KDot1GFNI(gp, nb, xt, yt)
		} else {
			packedQ4KDot1AVX512(gp, nb, xt, yt)
		}
	}
}
