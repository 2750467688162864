package kernels

import (
	"fmt"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// DotF16Rows sets y[i] = DotF16(x, rows[i*stride:i*stride+len(x)]) for
// i < len(y): attention's scores against many cached keys, or its output
// dimensions against transposed values, in one call instead of one per
// row. The SIMD sets run the same kernel as DotF16, so each result is
// bit-identical to DotF16's.
func (s *Set) DotF16Rows(x, rows []uint16, stride int, y []float32) {
	n := len(x)
	if len(y) == 0 {
		return
	}
	if stride < n || (len(y)-1)*stride+n > len(rows) {
		panic(fmt.Sprintf("kernels: DotF16Rows: %d rows of %d values (stride %d) do not fit %d values", len(y), n, stride, len(rows)))
	}
	if f := s.types[gguf.F16].rows; f != nil && n > 0 {
		w := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(rows))), 2*((len(y)-1)*stride+n))
		xb := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*n)
		f(n, w, 2*stride, xb, y)
		return
	}
	for i := range y {
		y[i] = s.dotF16(x, rows[i*stride:i*stride+n])
	}
}

// FastF16Encode is F16Encode with the CPU's conversion instruction where
// there is one (same rounding, to nearest even, so bit-identical for every
// non-NaN value): attention converts its query and softmax weights to f16
// for every head.
func (s *Set) FastF16Encode(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i := s.f16EncodeVec(dst, src); i < len(src); i++ {
		dst[i] = F32ToF16(src[i])
	}
}
