//go:build amd64

package kernels

import (
	"fmt"
	"unsafe"
)

// The packed-group kernels of the avx512 set for q8_0, q5_0, q4_1 and q4_K
// (packed_q*_amd64.s). Each packedXDotK sets y[t*ystride+r] = dot(row r,
// token t) for the 16 rows of a packed group (nb > 0 blocks) and K tokens'
// activations xstride bytes apart (the one-token q4_K kernels take no
// strides). q4_K has a kernel for every K up to 8, the others for 8, 4, 2
// and 1. The GFNI forms (q4_1, q4_K) have the same contracts: one
// VGF2P8AFFINEQB replaces the shift and AND of each high-nibble operand.

//go:noescape
func packedQ80Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ80Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ50Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot8GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot4GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot2GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ41Dot1GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)

//go:noescape
func packedQ4KDot1AVX512(w *byte, nb int, x *byte, y *float32)

//go:noescape
func packedQ4KDot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot3AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot5AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot6AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot7AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot1GFNI(w *byte, nb int, x *byte, y *float32)

//go:noescape
func packedQ4KDot2GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot3GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot4GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot5GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot6GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot7GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

//go:noescape
func packedQ4KDot8GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)

// packedKernel names one family of packed-group kernels (its 8-, 4-, 2-
// and 1-token forms; q4_K has every form from 1 to 8).
type packedKernel uint8

const (
	_ packedKernel = iota
	packedQ80VNNI
	packedQ50VNNI
	packedQ41VNNI
	packedQ41VNNIGFNI
	packedQ4KVNNI
	packedQ4KVNNIGFNI
)

// runPacked runs the n-token form of kernel family k. The assembly is
// called directly from a switch, not through a func value, so the pointers
// do not escape.
func runPacked(k packedKernel, n int, w *byte, nb int, x *byte, xs int, y *float32, ys int) {
	f16 := &f16Table[0]
	switch k {
	case packedQ80VNNI:
		switch n {
		case 8:
			packedQ80Dot8AVX512(w, nb, x, xs, y, ys, f16)
		case 4:
			packedQ80Dot4AVX512(w, nb, x, xs, y, ys, f16)
		case 2:
			packedQ80Dot2AVX512(w, nb, x, xs, y, ys, f16)
		default:
			packedQ80Dot1AVX512(w, nb, x, xs, y, ys, f16)
		}
	case packedQ50VNNI:
		switch n {
		case 8:
			packedQ50Dot8AVX512(w, nb, x, xs, y, ys, f16)
		case 4:
			packedQ50Dot4AVX512(w, nb, x, xs, y, ys, f16)
		case 2:
			packedQ50Dot2AVX512(w, nb, x, xs, y, ys, f16)
		default:
			packedQ50Dot1AVX512(w, nb, x, xs, y, ys, f16)
		}
	case packedQ41VNNI:
		switch n {
		case 8:
			packedQ41Dot8AVX512(w, nb, x, xs, y, ys, f16)
		case 4:
			packedQ41Dot4AVX512(w, nb, x, xs, y, ys, f16)
		case 2:
			packedQ41Dot2AVX512(w, nb, x, xs, y, ys, f16)
		default:
			packedQ41Dot1AVX512(w, nb, x, xs, y, ys, f16)
		}
	case packedQ41VNNIGFNI:
		switch n {
		case 8:
			packedQ41Dot8GFNI(w, nb, x, xs, y, ys, f16)
		case 4:
			packedQ41Dot4GFNI(w, nb, x, xs, y, ys, f16)
		case 2:
			packedQ41Dot2GFNI(w, nb, x, xs, y, ys, f16)
		default:
			packedQ41Dot1GFNI(w, nb, x, xs, y, ys, f16)
		}
	case packedQ4KVNNI:
		switch n {
		case 8:
			packedQ4KDot8AVX512(w, nb, x, xs, y, ys)
		case 7:
			packedQ4KDot7AVX512(w, nb, x, xs, y, ys)
		case 6:
			packedQ4KDot6AVX512(w, nb, x, xs, y, ys)
		case 5:
			packedQ4KDot5AVX512(w, nb, x, xs, y, ys)
		case 4:
			packedQ4KDot4AVX512(w, nb, x, xs, y, ys)
		case 3:
			packedQ4KDot3AVX512(w, nb, x, xs, y, ys)
		case 2:
			packedQ4KDot2AVX512(w, nb, x, xs, y, ys)
		default:
			packedQ4KDot1AVX512(w, nb, x, y)
		}
	case packedQ4KVNNIGFNI:
		switch n {
		case 8:
			packedQ4KDot8GFNI(w, nb, x, xs, y, ys)
		case 7:
			packedQ4KDot7GFNI(w, nb, x, xs, y, ys)
		case 6:
			packedQ4KDot6GFNI(w, nb, x, xs, y, ys)
		case 5:
			packedQ4KDot5GFNI(w, nb, x, xs, y, ys)
		case 4:
			packedQ4KDot4GFNI(w, nb, x, xs, y, ys)
		case 3:
			packedQ4KDot3GFNI(w, nb, x, xs, y, ys)
		case 2:
			packedQ4KDot2GFNI(w, nb, x, xs, y, ys)
		default:
			packedQ4KDot1GFNI(w, nb, x, y)
		}
	default:
		panic(fmt.Sprintf("kernels: %d is not a packed kernel", k))
	}
}

// dotPacked is the Dot of a packed layout with kernel family k and group
// geometry p: it checks the operands once and runs the 8-, 4-, 2- and
// 1-token forms over the tokens, largest first (q4_K, with a form for
// every count, runs its one call).
func dotPacked(k packedKernel, p *packedGroup, cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	p.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols >> p.shift
	if nb == 0 {
		for t := range nTok {
			clear(y[t*yStride : t*yStride+p.rows])
		}
		return
	}
	gp := unsafe.SliceData(g)
	xp := unsafe.Pointer(unsafe.SliceData(x))
	yp := unsafe.Pointer(unsafe.SliceData(y))
	if nTok == 1 || k == packedQ4KVNNI || k == packedQ4KVNNIGFNI { // decode, or a form for every count
		runPacked(k, nTok, gp, nb, (*byte)(xp), xStride, (*float32)(yp), yStride)
		return
	}
	t := 0
	for _, n := range [4]int{8, 4, 2, 1} {
		for ; t+n <= nTok; t += n {
			runPacked(k, n, gp, nb, (*byte)(unsafe.Add(xp, t*xStride)), xStride, (*float32)(unsafe.Add(yp, 4*t*yStride)), yStride)
		}
	}
}

// withDot returns a copy of layout l whose Dot computes with kernel
// family k over group geometry p.
func withDot(l PackedLayout, k packedKernel, p *packedGroup) *PackedLayout {
	l.Dot = func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
		dotPacked(k, p, cols, g, x, xStride, nTok, y, yStride)
	}
	return &l
}

// The avx512 set's packed layouts: the bytes of the pure-Go ones (so the
// same names) with the VNNI kernels; q4_1 and q4_K in their GFNI forms when
// the set uses GFNI.
var (
	packedQ80AVX512 = withDot(packedQ80Base, packedQ80VNNI, &q80Group)
	packedQ50AVX512 = withDot(packedQ50Base, packedQ50VNNI, &q50Group)
	packedQ41AVX512 = withDot(packedQ41Base, packedQ41VNNI, &q41Group)
	packedQ41GFNI   = withDot(packedQ41Base, packedQ41VNNIGFNI, &q41Group)
	packedQ4KAVX512 = withDot(packedQ4KBase, packedQ4KVNNI, &q4kGroup)
	packedQ4KGFNI   = withDot(packedQ4KBase, packedQ4KVNNIGFNI, &q4kGroup)
)

// packedLayout is the layout the format table names p.
func packedLayout(p asmPacked) *PackedLayout {
	switch p {
	case asmPackedQ8_0AVX512:
		return packedQ80AVX512
	case asmPackedQ5_0AVX512:
		return packedQ50AVX512
	case asmPackedQ4_1AVX512:
		return packedQ41AVX512
	case asmPackedQ4_1GFNI:
		return packedQ41GFNI
	case asmPackedQ4_KAVX512:
		return packedQ4KAVX512
	case asmPackedQ4_KGFNI:
		return packedQ4KGFNI
	case asmPackedQ6_KAVX512:
		return &packedQ6KAVX512
	}
	panic(fmt.Sprintf("kernels: %d is not a packed layout", p))
}
