package kernels

// AttnDotF16RowsMulti is AttnDotF16Rows for nx query vectors at once:
// y[g*yStride+i] = dot(x[g*xStride:][:n], rows[i*stride:][:n]) for g < nx
// and i < m, each bit-identical to what AttnDotF16Rows gives for that
// query. Attention calls it with the query heads that share a KV head
// (grouped-query attention), for their scores against the cached keys and
// their outputs against the transposed values: each cached row is
// converted from f16 once for all of them instead of once per head.
func AttnDotF16RowsMulti(x []uint16, nx, xStride, n int, rows []uint16, stride, m int, y []float32, yStride int) {
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
		done := attnMultiVec(xs, k, xStride, n, rows, stride, m, ys, yStride)
		if done == m {
			continue
		}
		for g := 0; g < k; g++ {
			AttnDotF16Rows(xs[g*xStride:g*xStride+n], rows[done*stride:], stride, ys[g*yStride+done:g*yStride+m])
		}
	}
}
