package kernels

import "github.com/moonlm/moonlm/gguf"

// quantizeWeightRow quantizes src into weight type t with ggml's reference
// quantizers; it reports false for types without one.
func quantizeWeightRow(t gguf.Type, src []float32, dst []byte) bool {
	switch t {
	}
	return false
}
