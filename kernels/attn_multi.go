package kernels

// AttnDotF16RowsMulti is AttnDotF16Rows for nx query vectors at once:
// y[g*yStride+i] = dot(x[g*xStride:][:n], rows[i*stride:][:n]) for g < nx
// and i < m, each bit-identical to what AttnDotF16Rows gives for the query
// in f16. The queries are float32 holding f16 values (RoundF16), so the
// kernel reads them as they are. Attention calls it with the query heads
// that share a KV head (grouped-query attention), for their scores against
// the cached keys and their outputs against the transposed values: each
// cached row is converted from f16 once for all of them.
func (s *Set) AttnDotF16RowsMulti(x []float32, nx, xStride, n int, rows []uint16, stride, m int, y []float32, yStride int) {
	if nx <= 0 || m <= 0 {
		return
	}
	if n <= 0 || xStride < n || (nx-1)*xStride+n > len(x) || stride < n || (m-1)*stride+n > len(rows) ||
		yStride < m || (nx-1)*yStride+m > len(y) {
		panic("kernels: AttnDotF16RowsMulti: vectors do not fit")
	}
	for g0 := 0; g0 < nx; g0 += 4 {
		k := min(4, nx-g0)
		xs, ys := x[g0*xStride:], y[g0*yStride:]
		done := s.attnMultiVec(xs, k, xStride, n, rows, stride, m, ys, yStride)
		if done == m {
			continue
		}
		for g := 0; g < k; g++ {
			for i := done; i < m; i++ {
				ys[g*yStride+i] = attnDotF32F16(xs[g*xStride:g*xStride+n], rows[i*stride:i*stride+n])
			}
		}
	}
}

// attnDotF32F16 is attnDotF16Generic for a query already widened.
func attnDotF32F16(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	tab := f16Table
	var acc [16]float32
	i := 0
	for ; i+16 <= len(a); i += 16 {
		for l := range acc {
			acc[l] += a[i+l] * tab[b[i+l]]
		}
	}
	for l := 0; i+l < len(a); l++ {
		acc[l] += a[i+l] * tab[b[i+l]]
	}
	return sum16(&acc)
}

// RoundF16 sets dst[i] to src[i] rounded to f16 (to nearest even, as
// F32ToF16) and widened back to float32.
func (s *Set) RoundF16(dst, src []float32) {
	dst = dst[:len(src)]
	for i := s.roundF16Vec(dst, src); i < len(src); i++ {
		dst[i] = F16ToF32(F32ToF16(src[i]))
	}
}
