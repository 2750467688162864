//go:build amd64

package kernels

import (
	"github.com/moonlm/moonlm/gguf"
	"golang.org/x/sys/cpu"
)

// init registers the SIMD kernel sets this CPU supports, least capable
// first, then installs the one MOONLM_KERNELS names or else the best.
func init() {
	if hasAVX2() {
		registerVariant("avx2", applyAVX2)
	}
	chooseDefaultVariant()
}

// hasAVX2 reports AVX2 with FMA and F16C, which every AVX2 kernel here
// uses; the OS must save the YMM state (x/sys/cpu checks OSXSAVE).
func hasAVX2() bool {
	return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
}

// applyAVX2 installs the AVX2 kernels over the generic tables.
func applyAVX2() {
	rowDot[gguf.Q8_0], rowsDot[gguf.Q8_0] = rowQ8_0AVX2, rowsQ8_0AVX2
	rowDot[gguf.Q4_0], rowsDot[gguf.Q4_0] = rowQ4_0AVX2, rowsQ4_0AVX2
	rowDot[gguf.Q4_1], rowsDot[gguf.Q4_1] = rowQ4_1AVX2, rowsQ4_1AVX2
	rowDot[gguf.Q4_K], rowsDot[gguf.Q4_K] = rowQ4_KAVX2, rowsQ4_KAVX2
	rowDot[gguf.Q6_K], rowsDot[gguf.Q6_K] = rowQ6_KAVX2, rowsQ6_KAVX2
	rowDot[gguf.F16], rowsDot[gguf.F16] = rowF16AVX2, rowsF16AVX2
	rowDot[gguf.F32], rowsDot[gguf.F32] = rowF32AVX2, rowsF32AVX2
}
