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
	if hasAVX2() && hasAVX512() {
		registerVariant("avx512", applyAVX512)
	}
	chooseDefaultVariant()
}

// hasAVX2 reports AVX2 with FMA and F16C, which every AVX2 kernel here
// uses; the OS must save the YMM state (x/sys/cpu checks OSXSAVE).
func hasAVX2() bool {
	return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
}

// hasAVX512 reports the AVX-512 subsets the avx512 kernels use: F, BW
// (byte ops, mask moves), VL (EVEX on 256-bit registers) and VNNI.
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI
}

// applyAVX512 installs the AVX2 kernels, then the AVX-512 ones: q8_0 and
// q4_0 row kernels (two blocks per register, VPDPBUSD; for q4_1 the AVX2
// kernel, which pairs rows, measured faster) and
// four-token kernels (VPDPBUSD for the 32-value formats, 512-bit registers
// for the K-quants). The K-quant row kernels stay AVX2: their per-sub-block
// scales keep them on VPMADDUBSW/VPMADDWD, and decode is memory bound.
func applyAVX512() {
	applyAVX2()
	rowDot[gguf.Q8_0], rowsDot[gguf.Q8_0] = rowQ8_0AVX512, rowsQ8_0AVX512
	rowDot[gguf.Q4_0], rowsDot[gguf.Q4_0] = rowQ4_0AVX512, rowsQ4_0AVX512
	rowDot[gguf.Q5_0], rowsDot[gguf.Q5_0] = rowQ5_0AVX512, rowsQ5_0AVX512 // q50_amd64.go
	tokensDot[gguf.Q8_0] = tokQ8_0AVX512
	tokensDot[gguf.Q4_0] = tokQ4_0AVX512
	tokensDot[gguf.Q5_0] = tokQ5_0AVX512
	tokensDot[gguf.Q4_1] = tokQ4_1AVX512
	tokensDot[gguf.Q4_K] = tokQ4_KAVX512
	tokensDot[gguf.Q6_K] = tokQ6_KAVX512
}

// applyAVX2 installs the AVX2 kernels over the generic tables.
func applyAVX2() {
	rowDot[gguf.Q8_0], rowsDot[gguf.Q8_0] = rowQ8_0AVX2, rowsQ8_0AVX2
	rowDot[gguf.Q4_0], rowsDot[gguf.Q4_0] = rowQ4_0AVX2, rowsQ4_0AVX2
	rowDot[gguf.Q5_0], rowsDot[gguf.Q5_0] = rowQ5_0AVX2, rowsQ5_0AVX2 // q50_amd64.go
	rowDot[gguf.Q4_1], rowsDot[gguf.Q4_1] = rowQ4_1AVX2, rowsQ4_1AVX2
	rowDot[gguf.Q4_K], rowsDot[gguf.Q4_K] = rowQ4_KAVX2, rowsQ4_KAVX2
	rowDot[gguf.Q6_K], rowsDot[gguf.Q6_K] = rowQ6_KAVX2, rowsQ6_KAVX2
	rowDot[gguf.F16], rowsDot[gguf.F16] = rowF16AVX2, rowsF16AVX2
	rowDot[gguf.F32], rowsDot[gguf.F32] = rowF32AVX2, rowsF32AVX2
	dotF32Impl, axpyF32Impl, dotF16Impl = dotF32AVX2, axpyF32AVX2, dotF16AVX2
	tokensDot[gguf.Q8_0] = tokQ8_0AVX2
	tokensDot[gguf.Q4_0] = tokQ4_0AVX2
	tokensDot[gguf.Q5_0] = tokQ5_0AVX2
	tokensDot[gguf.Q4_1] = tokQ4_1AVX2
	tokensDot[gguf.Q4_K] = tokQ4_KAVX2
	tokensDot[gguf.Q6_K] = tokQ6_KAVX2
	tokensDot[gguf.F16] = tokF16AVX2
}
