//go:build amd64

package kernels

import "github.com/moonlm/moonlm/gguf"

//go:noescape
func quantizeQ8AVX512(src *float32, nb int, dst *byte, blockBytes int, withSum bool)

// quantizeQ8Vec quantizes whole rows to q8_0 or q8_1 with the AVX-512
// kernel and reports whether it did.
func (s *Set) quantizeQ8Vec(sum bool, src []float32, dst []byte) bool {
	if !s.wide() || len(src) < 32 {
		return false
	}
	nb := len(src) / 32
	bb := gguf.BytesQ8_0
	if sum {
		bb = gguf.BytesQ8_1
	}
	_ = src[nb*32-1]
	_ = dst[nb*bb-1]
	quantizeQ8AVX512(&src[0], nb, &dst[0], bb, sum)
	return true
}
