package kernels

// DeltaStep advances one head of a gated delta-rule recurrence (a gated
// DeltaNet layer) by one token. The state holds len(v) rows of len(k)
// values, row j being column j of the key-by-value matrix S, so that
// every step reads each row once. The token's decay g, write strength
// beta, key k, query q and value v give, per row j,
//
//	row = g*row;  d = beta*(v[j] - row·k);  row += d*k;  out[j] = row·q
//
// computed as a = row·k and b = row·q on the old row in one pass, then
// d = beta*(v[j] - g*a), out[j] = g*b + d*(k·q) and row = g*row + d*k
// in a second pass over the row while it is still in L1: the same
// values up to float32 rounding, at two passes instead of four.
// len(state) must be len(v)*len(k), len(q) >= len(k), len(out) >= len(v).
func (s *Set) DeltaStep(state, k, q, v, out []float32, g, beta float32) {
	n, rows := len(k), len(v)
	if len(state) != n*rows || len(q) < n || len(out) < rows {
		panic("kernels: DeltaStep: vectors do not fit")
	}
	if rows == 0 || n == 0 {
		return
	}
	kq := s.dotF32(k, q[:n])
	if s.deltaStepVec(state, k, q, v, out, g, beta, kq) {
		return
	}
	deltaStepGeneric(state, k, q[:n], v, out, g, beta, kq)
}

// deltaStepGeneric is DeltaStep in Go, the kernels' reference.
func deltaStepGeneric(state, k, q, v, out []float32, g, beta, kq float32) {
	n := len(k)
	for j := range v {
		row := state[j*n : (j+1)*n]
		var a, b float32
		for i, x := range row {
			a += x * k[i]
			b += x * q[i]
		}
		d := beta * (v[j] - g*a)
		out[j] = g*b + d*kq
		for i, x := range row {
			row[i] = g*x + d*k[i]
		}
	}
}

// DotsF32 sets y[g*yStride+i] to the dot product of x[g*xStride:][:n]
// with rows[i*stride:][:n] for g < nx and i < m: a small matrix product
// of nx vectors against m rows, each row read once for four vectors (the
// chunked DeltaNet's products with its state, its keys and its updates).
// Results equal AttnDotF32Rows' to float32 rounding, not bit for bit.
func (s *Set) DotsF32(x []float32, nx, xStride, n int, rows []float32, stride, m int, y []float32, yStride int) {
	if nx <= 0 || m <= 0 {
		return
	}
	if n <= 0 || xStride < n || (nx-1)*xStride+n > len(x) || stride < n || (m-1)*stride+n > len(rows) ||
		yStride < m || (nx-1)*yStride+m > len(y) {
		panic("kernels: DotsF32: vectors do not fit")
	}
	g := 0
	for ; g+4 <= nx; g += 4 {
		done := s.dots4Vec(x[g*xStride:], xStride, n, rows, stride, m, y[g*yStride:], yStride)
		if done == m {
			continue
		}
		for e := range 4 {
			xg := x[(g+e)*xStride : (g+e)*xStride+n]
			s.AttnDotF32Rows(xg, rows[done*stride:], stride, y[(g+e)*yStride+done:(g+e)*yStride+m])
		}
	}
	for ; g < nx; g++ {
		s.AttnDotF32Rows(x[g*xStride:g*xStride+n], rows, stride, y[g*yStride:g*yStride+m])
	}
}
