//go:build amd64

package kernels

import "unsafe"

// packedQ41DotKAVX512 (K = 8, 4, 2, 1) sets y[t*ystride+r] = dot(row r,
// token t) for the 16 rows of a packed q4_1 group (nb > 0 blocks) and K
// q8_1 tokens xstride bytes apart.
//
//go:noescape
func packedQ41Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

// The GFNI forms of the kernels above (same contracts): one
// VGF2P8AFFINEQB replaces the shift and AND of each high-nibble operand.
//
//go:noescape
func packedQ41Dot8GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot4GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot2GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot1GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

// packedQ41AVX512 and packedQ41GFNI are the q4_1 layout with the VNNI
// kernels, for the avx512 set without and with GFNI (the same bytes, so the
// same name).
var packedQ41AVX512, packedQ41GFNI = func() (*PackedLayout, *PackedLayout) {
	a, g := packedQ41Base, packedQ41Base
	a.Dot, g.Dot = dotPackedQ41AVX512, dotPackedQ41GFNI
	return &a, &g
}()

var _ = registerPacked("avx512", func(s *Set) *PackedLayout {
	if s.gfni {
		return packedQ41GFNI
	}
	return packedQ41AVX512
})

// dotPackedQ41AVX512 is dotPackedQ41VNNI with the AVX-512 forms.
func dotPackedQ41AVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	dotPackedQ41VNNI(false, cols, g, x, xStride, nTok, y, yStride)
}

// dotPackedQ41GFNI is dotPackedQ41VNNI with the GFNI forms.
func dotPackedQ41GFNI(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	dotPackedQ41VNNI(true, cols, g, x, xStride, nTok, y, yStride)
}

// dotPackedQ41VNNI checks the bounds once and runs the 8-, 4-, 2- and
// 1-token kernels over the binary digits of nTok, in their GFNI forms when
// gf is set.
func dotPackedQ41VNNI(gf bool, cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkPackedQ41(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	if nb == 0 {
		for t := range nTok {
			clear(y[t*yStride : t*yStride+q41PackedRows])
		}
		return
	}
	gp := unsafe.SliceData(g)
	xp := unsafe.Pointer(unsafe.SliceData(x))
	yp := unsafe.Pointer(unsafe.SliceData(y))
	f16 := &f16Table[0]
	t := 0
	for _, k := range [4]int{8, 4, 2, 1} {
		if nTok&k == 0 {
			continue
		}
		xt, yt := (*byte)(unsafe.Add(xp, t*xStride)), (*float32)(unsafe.Add(yp, 4*t*yStride))
		t += k
		// Direct calls (not a table of funcs), so that g, x and y do not
		// escape.
		switch {
		case k == 8 && gf:
			packedQ41Dot8GFNI(gp, nb, xt, xStride, yt, yStride, f16)
		case k == 8:
			packedQ41Dot8AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		case k == 4 && gf:
			packedQ41Dot4GFNI(gp, nb, xt, xStride, yt, yStride, f16)
		case k == 4:
			packedQ41Dot4AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		case k == 2 && gf:
			packedQ41Dot2GFNI(gp, nb, xt, xStride, yt, yStride, f16)
		case k == 2:
			packedQ41Dot2AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		case gf:
			packedQ41Dot1GFNI(gp, nb, xt, xStride, yt, yStride, f16)
		default:
			packedQ41Dot1AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		}
	}
}
