package kernels

import (
	"fmt"

	"github.com/moonlm/moonlm/gguf"
)

// MXFP4 products of several tokens (prefill through gpt-oss's experts):
// a four-token kernel reads each weight row and decodes its nibbles and
// block scales once for four tokens, where the row kernel does it once
// per token. MatMul takes them from the format table as every type's
// multi-token kernel (the generic one here, the AVX2 and AVX-512 ones in
// mxfp4_tokens_amd64.s). Every token's result is bit-identical to the
// set's row kernel (MatVec): the four-token kernels run, per token, the
// very integer and float steps of that set's row kernel, in its order, so
// a token's output does not depend on the batch it came in.

// dotMXFP4TokensGeneric is the generic set's multi-token MXFP4 kernel
// (the format table's tokens): the tokens in groups of four through
// dotMXFP4Tok4Generic, the last nTok%4 through the row dot.
func dotMXFP4TokensGeneric(n int, w, x []byte, xStride, nTok int, y []float32, yStride int) {
	checkRow(gguf.MXFP4, n)
	nb := n / qk32
	if nTok <= 0 {
		return
	}
	ab := nb * gguf.BytesQ8_0
	if nb == 0 {
		for k := range nTok {
			y[k*yStride] = 0
		}
		return
	}
	if len(w) < nb*bytesMXFP4 || xStride < ab || len(x) < (nTok-1)*xStride+ab || len(y) < (nTok-1)*yStride+1 {
		panic(fmt.Sprintf("kernels: mxfp4 tokens: %d tokens of %d values (x stride %d, y stride %d) do not fit %d weight, %d activation and %d output values",
			nTok, n, xStride, yStride, len(w), len(x), len(y)))
	}
	var out [4]float32
	k := 0
	for ; k+4 <= nTok; k += 4 {
		dotMXFP4Tok4Generic(nb, w, x[k*xStride:], xStride, &out)
		y[k*yStride], y[(k+1)*yStride], y[(k+2)*yStride], y[(k+3)*yStride] = out[0], out[1], out[2], out[3]
	}
	for ; k < nTok; k++ {
		y[k*yStride] = dotMXFP4Generic(n, w, x[k*xStride:k*xStride+ab])
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
