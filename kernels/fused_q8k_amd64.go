//go:build amd64

package kernels

import "github.com/moonlm/moonlm/gguf"

// quantizeQ8KAVX512 quantizes nb blocks of 256 values to q8_K at dst
// (gguf.BytesQ8_K bytes each), byte for byte as quantizeQ8K does.
//
//go:noescape
func quantizeQ8KAVX512(src *float32, nb int, dst *byte)

// quantizeQ8KVec quantizes a whole row to q8_K with the AVX-512 kernel and
// reports whether it did (only in the avx512 set, so the other sets keep
// the pure-Go quantizer).
func (s *Set) quantizeQ8KVec(src []float32, dst []byte) bool {
	if !s.wide() || len(src) < qkK {
		return false
	}
	nb := len(src) / qkK
	_ = src[nb*qkK-1]
	_ = dst[nb*gguf.BytesQ8_K-1]
	quantizeQ8KAVX512(&src[0], nb, &dst[0])
	return true
}
