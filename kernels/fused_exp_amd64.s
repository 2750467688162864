// Vectorized exp for softmax and SwiGLU (AVX2 + FMA), eight lanes at a time:
// n = round(x*log2(e)), r = x - n*ln2 (ln2 split in a high part exact in
// float32 and a low correction), exp(r) by its Taylor series to r^7 in
// Horner form (|r| <= ln2/2, truncation below 1e-8 relative), times 2^n
// built in the exponent bits. x is clamped to [-87, 88] so 2^n stays a
// normal float; results there are within a few ulp of the true exp.

#include "textflag.h"

DATA expc<>+0x00(SB)/4, $0x3fb8aa3b // log2(e)
DATA expc<>+0x04(SB)/4, $0x3f318000 // ln2 high (0.693359375)
DATA expc<>+0x08(SB)/4, $0xb95e8083 // ln2 low (-2.12194440e-4)
DATA expc<>+0x0c(SB)/4, $0x39500d01 // 1/5040
DATA expc<>+0x10(SB)/4, $0x3ab60b61 // 1/720
DATA expc<>+0x14(SB)/4, $0x3c088889 // 1/120
DATA expc<>+0x18(SB)/4, $0x3d2aaaab // 1/24
DATA expc<>+0x1c(SB)/4, $0x3e2aaaab // 1/6
DATA expc<>+0x20(SB)/4, $0x3f000000 // 1/2
DATA expc<>+0x24(SB)/4, $0x3f800000 // 1
DATA expc<>+0x28(SB)/4, $0xc2ae0000 // -87
DATA expc<>+0x2c(SB)/4, $0x42b00000 // 88
DATA expc<>+0x30(SB)/4, $0x0000007f // exponent bias
GLOBL expc<>(SB), RODATA|NOPTR, $52

// Loads the constants into Y4-Y15 (Y4 log2e, Y5 ln2hi, Y6 ln2lo, Y7-Y12
// the series from 1/5040 to 1/2, Y13 one, Y14 -87, Y15 88).
#define EXPCONST \
	VBROADCASTSS expc<>+0x00(SB), Y4 \
	VBROADCASTSS expc<>+0x04(SB), Y5 \
	VBROADCASTSS expc<>+0x08(SB), Y6 \
	VBROADCASTSS expc<>+0x0c(SB), Y7 \
	VBROADCASTSS expc<>+0x10(SB), Y8 \
	VBROADCASTSS expc<>+0x14(SB), Y9 \
	VBROADCASTSS expc<>+0x18(SB), Y10 \
	VBROADCASTSS expc<>+0x1c(SB), Y11 \
	VBROADCASTSS expc<>+0x20(SB), Y12 \
	VBROADCASTSS expc<>+0x24(SB), Y13 \
	VBROADCASTSS expc<>+0x28(SB), Y14 \
	VBROADCASTSS expc<>+0x2c(SB), Y15

// Y0 = exp(Y0). Clobbers Y1-Y3.
#define EXP8 \
	VMAXPS       Y14, Y0, Y0 \
	VMINPS       Y15, Y0, Y0 \
	VMULPS       Y4, Y0, Y1 \
	VROUNDPS     $0, Y1, Y1 \
	VFNMADD231PS Y5, Y1, Y0 \
	VFNMADD231PS Y6, Y1, Y0 \
	VMOVAPS      Y7, Y2 \
	VFMADD213PS  Y8, Y0, Y2 \
	VFMADD213PS  Y9, Y0, Y2 \
	VFMADD213PS  Y10, Y0, Y2 \
	VFMADD213PS  Y11, Y0, Y2 \
	VFMADD213PS  Y12, Y0, Y2 \
	VFMADD213PS  Y13, Y0, Y2 \
	VFMADD213PS  Y13, Y0, Y2 \
	VCVTPS2DQ    Y1, Y1 \
	VPBROADCASTD expc<>+0x30(SB), Y3 \
	VPADDD       Y3, Y1, Y1 \
	VPSLLD       $23, Y1, Y1 \
	VMULPS       Y1, Y2, Y0

// func expSubAVX2(x *float32, n int, sub float32)
// x[i] = exp(x[i] - sub) for i < n, n a multiple of 8.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	EXPCONST
	SHRQ         $3, CX
	JZ           expsubdone

expsubloop:
	VMOVUPS      (SI), Y0
	VBROADCASTSS sub+16(FP), Y3
	VSUBPS       Y3, Y0, Y0
	EXP8
	VMOVUPS      Y0, (SI)
	ADDQ         $32, SI
	DECQ         CX
	JNZ          expsubloop

expsubdone:
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, u *float32, n int)
// dst[i] = gate[i] / (1 + exp(-gate[i])) * u[i] for i < n, n a multiple of 8.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONST
	SHRQ $3, CX
	JZ   swiglusdone

swigluloop:
	VXORPS  Y0, Y0, Y0
	VSUBPS  (SI), Y0, Y0
	EXP8
	VADDPS  Y13, Y0, Y0
	VMOVUPS (SI), Y1
	VDIVPS  Y0, Y1, Y1
	VMULPS  (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     swigluloop

swiglusdone:
	VZEROUPPER
	RET
