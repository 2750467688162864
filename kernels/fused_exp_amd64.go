//go:build amd64

package kernels

// expSubAVX2 sets x[i] = exp(x[i]-sub) for i < n, a multiple of 8.
//
//go:noescape
func expSubAVX2(x *float32, n int, sub float32)

// swigluAVX2 sets dst[i] = gate[i]/(1+exp(-gate[i]))*u[i] for i < n, a multiple of 8.
//
//go:noescape
func swigluAVX2(dst, gate, u *float32, n int)

// expSubVec does the multiple-of-8 head of expSub with the vector kernel
// and returns how many values it did.
func (s *Set) expSubVec(x []float32, sub float32) int {
	n := len(x) &^ 7
	if n == 0 || !s.vec() {
		return 0
	}
	expSubAVX2(&x[0], n, sub)
	return n
}

// swigluVec does the multiple-of-8 head of FastSwiGLU with the vector
// kernel and returns how many values it did.
func (s *Set) swigluVec(dst, g, u []float32) int {
	n := len(g) &^ 7
	if n == 0 || !s.vec() {
		return 0
	}
	_, _ = dst[n-1], u[n-1]
	swigluAVX2(&dst[0], &g[0], &u[0], n)
	return n
}

// attnF16AVX2 is the vector twin of attnDotF16Generic (mode 0) and
// attnDotF16SingleGeneric with padding (mode 1) over m rows; scratch holds
// 64 float32.
//
//go:noescape
func attnF16AVX2(x *uint16, n int, rows *uint16, stride int, y *float32, m int, mode int, scratch *float32)

// attnDotF16Vec runs AttnDotF16Rows (mode 0) or AttnDotF16RowsSingle with
// padding (mode 1) on the vector kernel and returns how many rows it did.
func (s *Set) attnDotF16Vec(x, rows []uint16, stride int, y []float32, mode int) int {
	if len(x) == 0 || len(y) == 0 || !s.vec() {
		return 0
	}
	var scratch [64]float32
	attnF16AVX2(&x[0], len(x), &rows[0], stride, &y[0], len(y), mode, &scratch[0])
	return len(y)
}

// attnF32AVX2 is attnF16AVX2 for float32 vectors (attnDotF32Generic,
// attnDotF32SingleGeneric with padding).
//
//go:noescape
func attnF32AVX2(x *float32, n int, rows *float32, stride int, y *float32, m int, mode int, scratch *float32)

// attnDotF32Vec is attnDotF16Vec for float32 vectors.
func (s *Set) attnDotF32Vec(x, rows []float32, stride int, y []float32, mode int) int {
	if len(x) == 0 || len(y) == 0 || !s.vec() {
		return 0
	}
	var scratch [64]float32
	attnF32AVX2(&x[0], len(x), &rows[0], stride, &y[0], len(y), mode, &scratch[0])
	return len(y)
}
