#include "textflag.h"

// One position's Q8_0 block at (P) with weight (W) into the accumulators
// A0..A3 (32 float32 lanes): scale = f16(block) * weight, then each 8
// quants sign-extended, converted and multiply-added.
#define Q8_POS(P, W, A0, A1, A2, A3) \
	MOVWLZX      (P), AX \
	VMOVSS       (R13)(AX*4), X8 \
	VMULSS       W, X8, X8 \
	VBROADCASTSS X8, Y8 \
	VPMOVSXBD    2(P), Y9 \
	VPMOVSXBD    10(P), Y10 \
	VPMOVSXBD    18(P), Y11 \
	VPMOVSXBD    26(P), Y12 \
	VCVTDQ2PS    Y9, Y9 \
	VCVTDQ2PS    Y10, Y10 \
	VCVTDQ2PS    Y11, Y11 \
	VCVTDQ2PS    Y12, Y12 \
	VFMADD231PS  Y9, Y8, A0 \
	VFMADD231PS  Y10, Y8, A1 \
	VFMADD231PS  Y11, Y8, A2 \
	VFMADD231PS  Y12, Y8, A3

// func attnValuesQ8AVX2(out *float32, v *byte, rowBytes, nb int, w *float32, n int, f16 *float32)
// AttnValuesQ8 for n >= 1 positions and nb >= 1 blocks: per block, the
// even positions into Y0-Y3 and the odd ones into Y4-Y7, added at the end.
TEXT ·attnValuesQ8AVX2(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ rowBytes+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ f16+48(FP), R13
	LEAQ (DX)(DX*1), R14

block:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   SI, R9
	MOVQ   w+32(FP), R10
	MOVQ   n+40(FP), R11
	CMPQ   R11, $2
	JLT    last

pair:
	LEAQ (R9)(DX*1), R12
	Q8_POS(R9, (R10), Y0, Y1, Y2, Y3)
	Q8_POS(R12, 4(R10), Y4, Y5, Y6, Y7)
	ADDQ R14, R9
	ADDQ $8, R10
	SUBQ $2, R11
	CMPQ R11, $2
	JGE  pair

last:
	TESTQ R11, R11
	JZ    store
	Q8_POS(R9, (R10), Y0, Y1, Y2, Y3)

store:
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $34, SI
	DECQ    CX
	JNZ     block
	VZEROUPPER
	RET
