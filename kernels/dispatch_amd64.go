//go:build amd64

package kernels

import (
	"github.com/moonlm/moonlm/gguf"
	"golang.org/x/sys/cpu"
)

// archSets lists the kernel sets of amd64, least capable first.
func archSets() []setDef {
	return []setDef{
		genericDef,
		{name: "avx2", isa: isaAVX2, supported: hasAVX2, install: installAVX2},
		{name: "avx512", isa: isaAVX512, supported: func() bool { return hasAVX2() && hasAVX512() }, install: installAVX512},
	}
}

// hasGFNI reports the GFNI extension the packed q4_1 and q4_K kernels can
// use.
func hasGFNI() bool { return cpu.X86.HasAVX512GFNI }

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

// installAVX512 installs the AVX2 kernels, then the AVX-512 ones: q8_0 and
// q4_0 row kernels (two blocks per register, VPDPBUSD; for q4_1 the AVX2
// kernel, which pairs rows, measured faster) and
// four-token kernels (VPDPBUSD for the 32-value formats, 512-bit registers
// for the K-quants). The K-quant row kernels stay AVX2: their per-sub-block
// scales keep them on VPMADDUBSW/VPMADDWD, and decode is memory bound.
func installAVX512(s *Set) {
	installAVX2(s)
	s.rowDot[gguf.Q8_0], s.rowsDot[gguf.Q8_0] = rowQ8_0AVX512, rowsQ8_0AVX512
	s.rowDot[gguf.Q4_0], s.rowsDot[gguf.Q4_0] = rowQ4_0AVX512, rowsQ4_0AVX512
	s.rowDot[gguf.Q5_0], s.rowsDot[gguf.Q5_0] = rowQ5_0AVX512, rowsQ5_0AVX512 // q50_amd64.go
	s.tokensDot[gguf.Q8_0] = tokQ8_0AVX512
	s.tokensDot[gguf.Q4_0] = tokQ4_0AVX512
	s.tokensDot[gguf.Q5_0] = tokQ5_0AVX512
	s.tokensDot[gguf.Q4_1] = tokQ4_1AVX512
	s.tokensDot[gguf.Q4_K] = tokQ4_KAVX512
	s.tokensDot[gguf.Q6_K] = tokQ6_KAVX512
}

// installAVX2 installs the AVX2 kernels over the generic tables.
func installAVX2(s *Set) {
	s.rowDot[gguf.Q8_0], s.rowsDot[gguf.Q8_0] = rowQ8_0AVX2, rowsQ8_0AVX2
	s.rowDot[gguf.Q4_0], s.rowsDot[gguf.Q4_0] = rowQ4_0AVX2, rowsQ4_0AVX2
	s.rowDot[gguf.Q5_0], s.rowsDot[gguf.Q5_0] = rowQ5_0AVX2, rowsQ5_0AVX2 // q50_amd64.go
	s.rowDot[gguf.Q4_1], s.rowsDot[gguf.Q4_1] = rowQ4_1AVX2, rowsQ4_1AVX2
	s.rowDot[gguf.Q4_K], s.rowsDot[gguf.Q4_K] = rowQ4_KAVX2, rowsQ4_KAVX2
	s.rowDot[gguf.Q6_K], s.rowsDot[gguf.Q6_K] = rowQ6_KAVX2, rowsQ6_KAVX2
	s.rowDot[gguf.F16], s.rowsDot[gguf.F16] = rowF16AVX2, rowsF16AVX2
	s.rowDot[gguf.F32], s.rowsDot[gguf.F32] = rowF32AVX2, rowsF32AVX2
	s.dotF32, s.axpyF32, s.dotF16 = dotF32AVX2, axpyF32AVX2, dotF16AVX2
	s.tokensDot[gguf.Q8_0] = tokQ8_0AVX2
	s.tokensDot[gguf.Q4_0] = tokQ4_0AVX2
	s.tokensDot[gguf.Q5_0] = tokQ5_0AVX2
	s.tokensDot[gguf.Q4_1] = tokQ4_1AVX2
	s.tokensDot[gguf.Q4_K] = tokQ4_KAVX2
	s.tokensDot[gguf.Q6_K] = tokQ6_KAVX2
	s.tokensDot[gguf.F16] = tokF16AVX2
}
