//go:build amd64

package kernels

import "unsafe"

// packedQ80DotKAVX512 (K = 8, 4, 2, 1) sets y[t*ystride+r] = dot(row r,
// token t) for the 16 rows of a packed q8_0 group (nb > 0 blocks) and K
// q8_0 tokens xstride bytes apart.
//
//go:noescape
func packedQ80Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

// packedQ80AVX512 is the q8_0 layout with the VNNI kernels, for the avx512
// set.
var packedQ80AVX512 = func() *PackedLayout {
	l := packedQ80Base
	l.Dot = dotPackedQ80AVX512
	return &l
}()

var _ = registerPacked("avx512", func(*Set) *PackedLayout { return packedQ80AVX512 })

// dotPackedQ80AVX512 checks the bounds once and runs the 8-, 4-, 2- and
// 1-token kernels over the binary digits of nTok.
func dotPackedQ80AVX512(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkPackedQ80(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	if nb == 0 {
		for t := range nTok {
			clear(y[t*yStride : t*yStride+q80PackedRows])
		}
		return
	}
	gp := unsafe.SliceData(g)
	xp := unsafe.Pointer(unsafe.SliceData(x))
	yp := unsafe.Pointer(unsafe.SliceData(y))
	f16 := &f16Table[0]
	t := 0
	if nTok&8 != 0 {
		packedQ80Dot8AVX512(gp, nb, (*byte)(xp), xStride, (*float32)(yp), yStride, f16)
		t = 8
	}
	if nTok&4 != 0 {
		packedQ80Dot4AVX512(gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), xStride, (*float32)(unsafe.Add(yp, 4*t*yStride)), yStride, f16)
		t += 4
	}
	if nTok&2 != 0 {
		packedQ80Dot2AVX512(gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), xStride, (*float32)(unsafe.Add(yp, 4*t*yStride)), yStride, f16)
		t += 2
	}
	if nTok&1 != 0 {
		packedQ80Dot1AVX512(gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), xStride, (*float32)(unsafe.Add(yp, 4*t*yStride)), yStride, f16)
	}
}
