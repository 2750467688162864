//go:build amd64

package kernels

import "unsafe"

// packedQ4KDot4AVX512 sets y[t*ystride+r] = dot(row r, token t) for the 16
// rows of packed q4_K group g and 4 q8_K tokens xstride bytes apart; nb > 0.
//
//go:noescape
func packedQ4KDot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

// packedQ4KDot1AVX512 is packedQ4KDot4AVX512 for one token.
//
//go:noescape
func packedQ4KDot1AVX512(w *byte, nb int, x *byte, y *float32)

// packedQ4KAVX512 is the q4_K layout with the VNNI kernels, for the avx512
// variant.
var packedQ4KAVX512 = func() *PackedLayout {
	l := packedQ4KBase
	l.Dot = dotPackedQ4KAVX512
	return &l
}()

var _ = registerPacked("avx512", packedQ4KAVX512)

// dotPackedQ4KAVX512 checks the bounds once and runs the 4-token kernel
// over whole quads of tokens and the 1-token one over the rest.
func dotPackedQ4KAVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkPackedQ4K(cols, g, x, xStride, nTok, y, yStride)
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
	for ; t+4 <= nTok; t += 4 {
		packedQ4KDot4AVX512(gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), xStride, (*float32)(unsafe.Add(yp, 4*t*yStride)), yStride)
	}
	for ; t < nTok; t++ {
		packedQ4KDot1AVX512(gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), (*float32)(unsafe.Add(yp, 4*t*yStride)))
	}
}
