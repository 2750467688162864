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

// packedQ4KAVX512 and packedQ4KGFNI are the q4_K layout with the VNNI
// kernels, for the avx512 set without and with GFNI (the same bytes, so the
// same name).
var packedQ4KAVX512, packedQ4KGFNI = func() (*PackedLayout, *PackedLayout) {
	a, g := packedQ4KBase, packedQ4KBase
	a.Dot, g.Dot = dotPackedQ4KAVX512, dotPackedQ4KGFNI
	return &a, &g
}()

var _ = registerPacked("avx512", func(s *Set) *PackedLayout {
	if s.gfni {
		return packedQ4KGFNI
	}
	return packedQ4KAVX512
})

// dotPackedQ4KAVX512 is dotPackedQ4KVNNI with the AVX-512 forms.
func dotPackedQ4KAVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	dotPackedQ4KVNNI(false, cols, g, x, xStride, nTok, y, yStride)
}

// dotPackedQ4KGFNI is dotPackedQ4KVNNI with the GFNI forms.
func dotPackedQ4KGFNI(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	dotPackedQ4KVNNI(true, cols, g, x, xStride, nTok, y, yStride)
}

// dotPackedQ4KVNNI checks the bounds once and runs the 8-, 4- and 1-token
// kernels over the tokens, largest first, in their GFNI forms when gf is
// set.
func dotPackedQ4KVNNI(gf bool, cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
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
