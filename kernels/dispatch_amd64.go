//go:build amd64

package kernels

import "golang.org/x/sys/cpu"

// archSets lists the kernel sets of amd64, least capable first.
func archSets() []setDef {
	return []setDef{
		genericDef,
		{name: "avx2", isa: isaAVX2, supported: hasAVX2,
			dotF32: dotF32AVX2, axpyF32: axpyF32AVX2, dotF16: dotF16AVX2},
		{name: "avx512", isa: isaAVX512, supported: func() bool { return hasAVX2() && hasAVX512() },
			dotF32: dotF32AVX2, axpyF32: axpyF32AVX2, dotF16: dotF16AVX2},
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
