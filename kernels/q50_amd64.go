//go:build amd64

package kernels

import (
	"github.com/moonlm/moonlm/gguf"
	"unsafe"
)

// AVX-512 VNNI kernels for Q5_0 weights (q50_amd64.s), registered in the
// avx512 set. Same contracts as the q4_0 kernels in simd_amd64.go: the Go
// wrappers (the multi-row ones in simd_adapter_amd64.go, the multi-token
// ones below, which store straight into y) check lengths so the assembly
// stays inside its slices.

//go:noescape
func dotQ5_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ5_0Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, ystride int, f16 *float32)

//go:noescape
func dotQ5_0Tok8AVX512(w *byte, x *byte, xstride int, nb int, y *float32, ystride int, f16 *float32)

// AVX2 kernels (q50_avx2_amd64.s), registered in the avx2 set (and so under
// avx512 wherever it has no kernel of its own).

//go:noescape
func dotQ5_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

//go:noescape
func dotQ5_0Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, ystride int, f16 *float32)

// tokQ5_0AVX512 and tokQ5_0AVX2 are the TokensDotFuncs of MatMul (prefill)
// for q5_0 (tokQ5_0).
func tokQ5_0AVX512(n int, w, x []byte, xStride, nTok int, y []float32, yStride int) {
	tokQ5_0(true, n, w, x, xStride, nTok, y, yStride)
}

func tokQ5_0AVX2(n int, w, x []byte, xStride, nTok int, y []float32, yStride int) {
	tokQ5_0(false, n, w, x, xStride, nTok, y, yStride)
}

// tokQ5_0 runs groups of eight (avx512 only), then four tokens that share
// each unpacked weight block, the kernels storing straight into y
// (checkTokens has checked its length); the last nTok%4 tokens go through
// the row kernel.
func tokQ5_0(avx512 bool, n int, w, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := n / 32
	checkTokens("q5_0", len(w), nb*gguf.BytesQ5_0, len(x), xStride, nTok, nb*gguf.BytesQ8_0, len(y), yStride)
	if nb == 0 {
		for k := range nTok {
			y[k*yStride] = 0
		}
		return
	}
	xp := unsafe.Pointer(unsafe.SliceData(x))
	yp := unsafe.Pointer(unsafe.SliceData(y))
	f16 := &f16Table[0]
	k := 0
	for ; avx512 && k+8 <= nTok; k += 8 {
		dotQ5_0Tok8AVX512(&w[0], (*byte)(unsafe.Add(xp, k*xStride)), xStride, nb, (*float32)(unsafe.Add(yp, 4*k*yStride)), 4*yStride, f16)
	}
	for ; k+4 <= nTok; k += 4 {
		xk, yk := (*byte)(unsafe.Add(xp, k*xStride)), (*float32)(unsafe.Add(yp, 4*k*yStride))
		if avx512 {
			dotQ5_0Tok4AVX512(&w[0], xk, xStride, nb, yk, 4*yStride, f16)
		} else {
			dotQ5_0Tok4AVX2(&w[0], xk, xStride, nb, yk, 4*yStride, f16)
		}
	}
	for ; k < nTok; k++ {
		xk := (*byte)(unsafe.Add(xp, k*xStride))
		if avx512 {
			dotQ5_0RowsAVX512(&w[0], 0, 1, xk, nb, &y[k*yStride], f16)
		} else {
			dotQ5_0RowsAVX2(&w[0], 0, 1, xk, nb, &y[k*yStride], f16)
		}
	}
}
