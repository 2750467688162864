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
	s.setRows(gguf.Q8_0, asmQ8_0RowsAVX512)
	s.setRows(gguf.Q4_0, asmQ4_0RowsAVX512)
	s.setRows(gguf.Q5_0, asmQ5_0RowsAVX512) // q50_amd64.go
	s.types[gguf.Q8_0].tokens = tokKernel(gguf.Q8_0, asmQ8_0Tok4AVX512, asmQ8_0RowsAVX2)
	s.types[gguf.Q4_0].tokens = tokKernel(gguf.Q4_0, asmQ4_0Tok4AVX512, asmQ4_0RowsAVX2)
	s.types[gguf.Q5_0].tokens = tokQ5_0AVX512
	s.types[gguf.Q4_1].tokens = tokKernel(gguf.Q4_1, asmQ4_1Tok4AVX512, asmQ4_1RowsAVX2)
	s.types[gguf.Q4_K].tokens = tokKernel(gguf.Q4_K, asmQ4_KTok4AVX512, asmQ4_KRowsAVX2)
	s.types[gguf.Q6_K].tokens = tokKernel(gguf.Q6_K, asmQ6_KTok4AVX512, asmQ6_KRowsAVX2)
	s.types[gguf.Q4_1].tile = tileQ41AVX512
}

// installAVX2 installs the AVX2 kernels over the generic tables.
func installAVX2(s *Set) {
	s.setRows(gguf.Q8_0, asmQ8_0RowsAVX2)
	s.setRows(gguf.Q4_0, asmQ4_0RowsAVX2)
	s.setRows(gguf.Q5_0, asmQ5_0RowsAVX2) // q50_amd64.go
	s.setRows(gguf.Q4_1, asmQ4_1RowsAVX2)
	s.setRows(gguf.Q4_K, asmQ4_KRowsAVX2)
	s.setRows(gguf.Q6_K, asmQ6_KRowsAVX2)
	s.setRows(gguf.F16, asmF16RowsAVX2)
	s.setRows(gguf.F32, asmF32RowsAVX2)
	s.dotF32, s.axpyF32, s.dotF16 = dotF32AVX2, axpyF32AVX2, dotF16AVX2
	s.types[gguf.Q8_0].tokens = tokKernel(gguf.Q8_0, asmQ8_0Tok4AVX2, asmQ8_0RowsAVX2)
	s.types[gguf.Q4_0].tokens = tokKernel(gguf.Q4_0, asmQ4_0Tok4AVX2, asmQ4_0RowsAVX2)
	s.types[gguf.Q5_0].tokens = tokQ5_0AVX2
	s.types[gguf.Q4_1].tokens = tokKernel(gguf.Q4_1, asmQ4_1Tok4AVX2, asmQ4_1RowsAVX2)
	s.types[gguf.Q4_K].tokens = tokKernel(gguf.Q4_K, asmQ4_KTok4AVX2, asmQ4_KRowsAVX2)
	s.types[gguf.Q6_K].tokens = tokKernel(gguf.Q6_K, asmQ6_KTok4AVX2, asmQ6_KRowsAVX2)
	s.types[gguf.F16].tokens = tokF16AVX2
}
