//go:build amd64

package kernels

import (
	"fmt"
	"unsafe"
)

// Assembly row-dot kernels (dot_avx2_amd64.s). Each computes
// y[i] = dot(row i, x) for nrows rows stride bytes apart, each nb blocks
// (values, for F16 and F32) long. The 32-value formats take f16Table to
// look up their f16 block scales. The adapters in simd_adapter_amd64.go
// check lengths, so the assembly never reads outside the slices.

//go:noescape
func dotQ8_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotMXFP4RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotMXFP4RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_1RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_KRowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)

//go:noescape
func dotQ6_KRowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)

//go:noescape
func dotF16RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)

//go:noescape
func dotF32RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)

// checkRows panics, naming the kernel, if a call would read past its
// inputs: nrows rows of rowLen bytes spaced stride apart in w, and xLen
// bytes of activations. It keeps the assembly memory safe.
func checkRows(kind string, wLen, stride, nrows, rowLen, xHave, xLen int) {
	if nrows <= 0 {
		return
	}
	if xHave < xLen || rowLen < 0 || stride < 0 || (nrows-1)*stride+rowLen > wLen {
		panic(fmt.Sprintf("kernels: %s dot: %d rows of %d bytes (stride %d) need %d weight and %d activation bytes, have %d and %d",
			kind, nrows, rowLen, stride, (nrows-1)*stride+rowLen, xLen, wLen, xHave))
	}
}

// AVX-512 VNNI kernels (dot_avx512_amd64.s), same contract as the AVX2 ones.

//go:noescape
func dotQ8_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n int)

// dotF32AVX2 is Dot on the AVX2 row kernel (float32 lanes, not float64).
func dotF32AVX2(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	dotF32RowsAVX2((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 0, 1, (*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(a), &s)
	return s
}

// dotF16AVX2 is DotF16 on the AVX2 row kernel.
func dotF16AVX2(a, b []uint16) float32 {
	b = b[:len(a)]
	var s float32
	dotF16RowsAVX2((*byte)(unsafe.Pointer(unsafe.SliceData(a))), 0, 1, (*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(a), &s)
	return s
}

func axpyF32AVX2(y []float32, a float32, x []float32) {
	y = y[:len(x)]
	axpyAVX2(unsafe.SliceData(y), a, unsafe.SliceData(x), len(x))
}

// Four-token AVX2 kernels (prefill, batched decode): one weight row against
// four tokens whose activations lie xstride bytes apart; y receives the
// four dots, each computed exactly as the type's row kernel computes it.

//go:noescape
func dotQ8_0Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_0Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_1Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ4_KTok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)

//go:noescape
func dotQ6_KTok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)

// checkTokens panics, naming the kernel, if a multi-token call would read
// or write outside its slices.
func checkTokens(kind string, wLen, rowLen, xLen, xStride, nTok, xRow, yLen, yStride int) {
	if nTok <= 0 {
		return
	}
	if wLen < rowLen || xStride < 0 || yStride < 0 || (nTok-1)*xStride+xRow > xLen || (nTok-1)*yStride >= yLen {
		panic(fmt.Sprintf("kernels: %s multi-token dot: %d tokens (x stride %d, y stride %d) of %d weight and %d activation bytes do not fit slices of %d, %d and %d",
			kind, nTok, xStride, yStride, rowLen, xRow, wLen, xLen, yLen))
	}
}
