package kernels

import "github.com/moonlm/moonlm/gguf"

// FastQuantizeRow is QuantizeRow with a vector quantizer for the Q8_0,
// Q8_1 and Q8_K activation types where the CPU has one (AVX-512); the
// bytes are the same (same scale, round half to even, f16 conversions),
// checked by TestFastQuantizeRow and TestFastQuantizeQ8K. Prefill converts
// every matrix input with it.
func (s *Set) FastQuantizeRow(t gguf.Type, src []float32, dst []byte) {
	if (t == gguf.Q8_0 || t == gguf.Q8_1) && len(src)%32 == 0 && s.quantizeQ8Vec(t == gguf.Q8_1, src, dst) {
		return
	}
	if t == gguf.Q8_K && len(src)%qkK == 0 && s.quantizeQ8KVec(src, dst) {
		return
	}
	QuantizeRow(t, src, dst)
}
