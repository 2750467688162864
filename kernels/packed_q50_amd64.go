//go:build amd64

package kernels

import "unsafe"

// packedQ50DotKAVX512 (K = 8, 4, 2, 1) sets y[t*ystride+r] = dot(row r,
// token t) for the 16 rows of a packed q5_0 group (nb > 0 blocks) and K
// q8_0 tokens xstride bytes apart.
//
//go:noescape
func packedQ50Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

// packedQ50AVX512 is the q5_0 layout with the VNNI kernels, for the avx512
// set.
var packedQ50AVX512 = func() *PackedLayout {
	l := packedQ50Base
	l.Dot = dotPackedQ50AVX512
	return &l
}()

// dotPackedQ50AVX512 checks the bounds once and runs the 8-, 4-, 2- and
// 1-token kernels over the binary digits of nTok.
func dotPackedQ50AVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkPackedQ50(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	if nb == 0 {
		for t := range nTok {
			clear(y[t*yStride : t*yStride+q50PackedRows])
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
		switch k {
		case 8:
			packedQ50Dot8AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		case 4:
			packedQ50Dot4AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		case 2:
			packedQ50Dot2AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		default:
			packedQ50Dot1AVX512(gp, nb, xt, xStride, yt, yStride, f16)
		}
	}
}

var _ = registerPacked("avx512", func(*Set) *PackedLayout { return packedQ50AVX512 })
