//go:build !amd64

package kernels

import "github.com/moonlm/moonlm/gguf"

// archSets lists the kernel sets of this architecture: only the generic
// one.
func archSets() []setDef { return []setDef{genericDef} }

// hasGFNI reports false: there are no GFNI kernels here.
func hasGFNI() bool { return false }

// apply is never called here: no set of this architecture is above the
// generic level, and the format table's SIMD kernels are amd64's.
func (k simdKernels) apply(gguf.Type, *typeKernels, asmKernel) {
	panic("kernels: no SIMD kernels on this architecture")
}

// packedLayout is never called here, for the same reason.
func packedLayout(asmPacked) *PackedLayout {
	panic("kernels: no SIMD packed layouts on this architecture")
}
