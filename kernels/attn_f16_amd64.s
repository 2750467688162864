#include "textflag.h"

// func f16EncodeF16C(dst *uint16, src *float32, n int)
// dst[i] = src[i] rounded to the nearest f16 (ties to even) for i < n, a
// multiple of 8.
TEXT ·f16EncodeF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   f16encdone

f16encloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       f16encloop

f16encdone:
	VZEROUPPER
	RET
