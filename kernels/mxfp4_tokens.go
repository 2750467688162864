package kernels

import "github.com/moonlm/moonlm/gguf"

// MXFP4 products of several tokens (prefill through gpt-oss's experts):
// a four-token kernel reads each weight row and decodes its nibbles and
// block scales once for four tokens, where MatMul's row kernel does it
// once per token. Every token's result is bit-identical to the set's row
// kernel (MatVec): the four-token kernels run, per token, the very
// integer and float steps of that set's row kernel, in its order, so a
// token's output does not depend on the batch it came in.

// mxfp4Tok4Func computes y[k] = dot(row w, token k) for the four tokens
// at x, xStride bytes apart, nb blocks each.
type mxfp4Tok4Func func(nb int, w, x []byte, xStride int, y *[4]float32)

// MatMulMXFP4 is MatMul, with the four-token kernel for an unpacked MXFP4
// matrix m; other matrices (and the last nTok%4 tokens) go through
// MatMul. Rows r0..r1 of each of nTok tokens: y[k*m.Rows+r].
func (s *Set) MatMulMXFP4(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	tok4 := s.mxfp4Tok4()
	if m.Type != gguf.MXFP4 || m.Packed != nil || tok4 == nil || nTok < 4 || r0 >= r1 {
		s.MatMul(m, xq, nTok, y, r0, r1)
		return
	}
	n := m.Cols
	checkRow(m.Type, n)
	nb := n / qk32
	rb := m.RowBytes()
	ab := ActivationBytes(m.Type, n)
	_ = xq[nTok*ab-1]
	_ = y[(nTok-1)*m.Rows+r1-1]
	_ = m.Data[r1*rb-1]
	full := nTok &^ 3
	// Token tiles and row blocks as MatMul's: a tile's activations stay
	// in the L2 cache while a block of rows meets each group of four.
	tile := max(4, matMulTileBytes/max(ab, 1)&^3)
	block := max(1, matMulRowBlockBytes/max(rb, 1))
	var out [4]float32
	for t0 := 0; t0 < full; t0 += tile {
		t1 := min(t0+tile, full)
		for b0 := r0; b0 < r1; b0 += block {
			b1 := min(b0+block, r1)
			for k := t0; k < t1; k += 4 {
				x := xq[k*ab : (k+4)*ab]
				for r := b0; r < b1; r++ {
					tok4(nb, m.Data[r*rb:(r+1)*rb], x, ab, &out)
					y[k*m.Rows+r], y[(k+1)*m.Rows+r], y[(k+2)*m.Rows+r], y[(k+3)*m.Rows+r] = out[0], out[1], out[2], out[3]
				}
			}
		}
	}
	if full < nTok {
		s.MatMul(m, xq[full*ab:], nTok-full, y[full*m.Rows:], r0, r1)
	}
}

// dotMXFP4Tok4Generic is dotMXFP4Generic for four tokens: each block's
// values decoded once, then per token the same integer sums and float
// steps as the one-token kernel.
func dotMXFP4Tok4Generic(nb int, w, x []byte, xStride int, y *[4]float32) {
	_ = w[nb*bytesMXFP4-1]
	_ = x[3*xStride+nb*gguf.BytesQ8_0-1]
	var sum [4]float32
	var v [32]int32
	for i := 0; i < nb; i++ {
		b := w[i*bytesMXFP4 : (i+1)*bytesMXFP4]
		qs := b[1:bytesMXFP4]
		for j := range 16 {
			v[j] = int32(kvaluesMXFP4[qs[j]&0xf])
			v[j+16] = int32(kvaluesMXFP4[qs[j]>>4])
		}
		e := e8m0Half(b[0])
		for k := range 4 {
			xb := x[k*xStride+i*gguf.BytesQ8_0 : k*xStride+(i+1)*gguf.BytesQ8_0]
			q8 := xb[2:34]
			var s1, s2 int32
			for j := range 16 {
				s1 += int32(int8(q8[j])) * v[j]
				s2 += int32(int8(q8[j+16])) * v[j+16]
			}
			d := f16At(xb) * e
			sum[k] += d * float32(s1+s2)
		}
	}
	*y = sum
}
