//go:build amd64

package kernels

// packedQ6KAVX512 is the q6_K layout with the AVX-512 VNNI kernel.
var packedQ6KAVX512 = func() PackedLayout {
	l := packedQ6KBase
	l.Dot = dotPackedQ6KAVX512
	return l
}()

// The packed q6_K kernels for 1..8 tokens: each sets y[t*ystride+r] (ystride
// in floats) for 16 rows and its token count from nb packed blocks at w and
// the tokens' q8_K activations xstride bytes apart at x; nb must be positive.
// One function per token count keeps each token's accumulators in
// registers.
//
//go:noescape
func packedQ6KDot1(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot2(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot3(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot4(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot5(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot6(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot7(w, x *byte, xstride, nb int, y *float32, ystride int)

//go:noescape
func packedQ6KDot8(w, x *byte, xstride, nb int, y *float32, ystride int)

// dotPackedQ6KAVX512 is the Dot of the AVX-512 q6_K layout: it checks the
// slices once and runs the kernel for nTok tokens.
func dotPackedQ6KAVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	q6kGroup.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qkK
	if nb == 0 {
		for t := 0; t < nTok; t++ {
			clear(y[t*yStride : t*yStride+q6kPackedRows])
		}
		return
	}
	gp, xp, yp := &g[0], &x[0], &y[0]
	switch nTok {
	case 1:
		packedQ6KDot1(gp, xp, xStride, nb, yp, yStride)
	case 2:
		packedQ6KDot2(gp, xp, xStride, nb, yp, yStride)
	case 3:
		packedQ6KDot3(gp, xp, xStride, nb, yp, yStride)
	case 4:
		packedQ6KDot4(gp, xp, xStride, nb, yp, yStride)
	case 5:
		packedQ6KDot5(gp, xp, xStride, nb, yp, yStride)
	case 6:
		packedQ6KDot6(gp, xp, xStride, nb, yp, yStride)
	case 7:
		packedQ6KDot7(gp, xp, xStride, nb, yp, yStride)
	default:
		packedQ6KDot8(gp, xp, xStride, nb, yp, yStride)
	}
}
