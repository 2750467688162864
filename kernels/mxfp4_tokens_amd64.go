//go:build amd64

package kernels

import (
	"fmt"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// dotMXFP4Tok4AVX2 and dotMXFP4Tok4AVX512 (mxfp4_tokens_amd64.s) are the
// four-token twins of dotMXFP4RowsAVX2 and dotMXFP4RowsAVX512: y[k] =
// dot(w, token k) for four tokens xstride bytes apart, nb blocks each.

//go:noescape
func dotMXFP4Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

//go:noescape
func dotMXFP4Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

// mxfp4Tok4 is the four-token MXFP4 kernel that matches the set's row
// kernel (the format table's rows kernel of the set's level).
func (s *Set) mxfp4Tok4() mxfp4Tok4Func {
	switch s.isa {
	case isaAVX512:
		return mxfp4Tok4AVX512
	case isaAVX2:
		return mxfp4Tok4AVX2
	}
	return dotMXFP4Tok4Generic
}

// checkMXFP4Tok4 panics when the slices do not hold nb blocks of weights
// and four tokens of nb activation blocks.
func checkMXFP4Tok4(nb int, w, x []byte, xStride int) {
	if nb <= 0 || len(w) < nb*bytesMXFP4 || xStride < nb*gguf.BytesQ8_0 || len(x) < 3*xStride+nb*gguf.BytesQ8_0 {
		panic(fmt.Sprintf("kernels: mxfp4 four-token dot: %d blocks (x stride %d) do not fit %d weight and %d activation bytes", nb, xStride, len(w), len(x)))
	}
}

func mxfp4Tok4AVX2(nb int, w, x []byte, xStride int, y *[4]float32) {
	checkMXFP4Tok4(nb, w, x, xStride)
	dotMXFP4Tok4AVX2(unsafe.SliceData(w), unsafe.SliceData(x), xStride, nb, &y[0], &f16Table[0])
}

func mxfp4Tok4AVX512(nb int, w, x []byte, xStride int, y *[4]float32) {
	checkMXFP4Tok4(nb, w, x, xStride)
	dotMXFP4Tok4AVX512(unsafe.SliceData(w), unsafe.SliceData(x), xStride, nb, &y[0], &f16Table[0])
}
