package kernels

import (
	"fmt"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// MatMulF32GGML computes rows r0..r1 of the product of an F32 matrix m
// with nTok rows of F32 activations x (as bytes, ActBytes apart) in the
// order of llama.cpp's x86 CPU backend on AVX-512: a batch of two tokens
// or more through llamafile's tinyBLAS (16 fused lanes, then the AVX-512
// reduction tree) when the row is a multiple of 16 values and the matrix
// a multiple of 4 rows, one token (and other shapes) through ggml_vec_dot_f32 (64 fused lanes, products past the
// last multiple of 64 added one by one). The llama.cpp numerics modes
// compute float products (a MoE router, an F32 output head) with it.
func (s *Set) MatMulF32GGML(m *Matrix, x []byte, nTok int, y []float32, r0, r1 int) {
	if m.Type != gguf.F32 {
		panic(fmt.Sprintf("kernels: MatMulF32GGML of a %v matrix", m.Type))
	}
	if r0 >= r1 || nTok <= 0 {
		return
	}
	n := m.Cols
	if r0 < 0 || r1 > m.Rows || len(m.Data) < 4*m.Rows*n || len(x) < 4*nTok*n || len(y) < (nTok-1)*m.Rows+r1 {
		panic(fmt.Sprintf("kernels: MatMulF32GGML: rows %d..%d of %dx%d for %d tokens do not fit", r0, r1, m.Rows, n, nTok))
	}
	w := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(m.Data))), m.Rows*n)
	xs := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(x))), nTok*n)
	rows := w[r0*n : r1*n]
	for t := 0; t < nTok; t++ {
		xt, yt := xs[t*n:(t+1)*n], y[t*m.Rows+r0:t*m.Rows+r1]
		if nTok >= 2 && n%16 == 0 && m.Rows%4 == 0 {
			s.AttnDotF32Rows(xt, rows, n, yt)
		} else {
			s.AttnDotF32RowsSingle(xt, rows, n, yt, false)
		}
	}
}
