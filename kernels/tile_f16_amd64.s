// F16 x F16 tile kernel for prefill (AVX-512): 4 weight rows against 4
// tokens, 16 columns a step. Each step widens the 4 rows' and the 4
// tokens' halves once (VCVTPH2PS) and makes 16 fused multiply-adds, where
// the multi-token kernel widens every token's halves again for each row.
// Products of two halves are exact in float32, so only the summation
// order differs from ggml's f16 dot.

#include "textflag.h"

// X = Z's 16 lanes folded to 4 (lane i the sum of lanes i, i+4, i+8,
// i+12). Clobbers Z16.
#define RED4(Z, Y, X) \
	VEXTRACTF64X4 $1, Z, Y16 \
	VADDPS        Y16, Y, Y \
	VEXTRACTF32X4 $1, Y, X16 \
	VADDPS        X16, X, X

// A = the lane sums of A, B, C and D, in that order. Clobbers C.
#define HSUM4(A, B, C, D) \
	VHADDPS B, A, A \
	VHADDPS D, C, C \
	VHADDPS C, A, A

// func f16Tile4x4AVX512(w *byte, wstride int, x *byte, xstride int, n16 int, out *float32)
TEXT ·f16Tile4x4AVX512(SB), NOSPLIT, $0-48
	MOVQ   w+0(FP), R8
	MOVQ   wstride+8(FP), R9
	MOVQ   x+16(FP), SI
	MOVQ   xstride+24(FP), DI
	MOVQ   n16+32(FP), CX
	MOVQ   out+40(FP), R11
	LEAQ   (R9)(R9*2), R10
	LEAQ   (DI)(DI*2), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

f16tileloop:
	VCVTPH2PS   (R8), Z16
	VCVTPH2PS   (R8)(R9*1), Z17
	VCVTPH2PS   (R8)(R9*2), Z18
	VCVTPH2PS   (R8)(R10*1), Z19
	VCVTPH2PS   (SI), Z20
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	VCVTPH2PS   (SI)(DI*1), Z21
	VFMADD231PS Z21, Z16, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z21, Z18, Z6
	VFMADD231PS Z21, Z19, Z7
	VCVTPH2PS   (SI)(DI*2), Z22
	VFMADD231PS Z22, Z16, Z8
	VFMADD231PS Z22, Z17, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z22, Z19, Z11
	VCVTPH2PS   (SI)(DX*1), Z23
	VFMADD231PS Z23, Z16, Z12
	VFMADD231PS Z23, Z17, Z13
	VFMADD231PS Z23, Z18, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ        $32, R8
	ADDQ        $32, SI
	DECQ        CX
	JNZ         f16tileloop

	// Each accumulator's 16 lanes summed: halves folded to 4 lanes, then
	// three horizontal adds per token put its 4 rows' sums in one X.
	RED4(Z0, Y0, X0)
	RED4(Z1, Y1, X1)
	RED4(Z2, Y2, X2)
	RED4(Z3, Y3, X3)
	RED4(Z4, Y4, X4)
	RED4(Z5, Y5, X5)
	RED4(Z6, Y6, X6)
	RED4(Z7, Y7, X7)
	RED4(Z8, Y8, X8)
	RED4(Z9, Y9, X9)
	RED4(Z10, Y10, X10)
	RED4(Z11, Y11, X11)
	RED4(Z12, Y12, X12)
	RED4(Z13, Y13, X13)
	RED4(Z14, Y14, X14)
	RED4(Z15, Y15, X15)
	HSUM4(X0, X1, X2, X3)
	HSUM4(X4, X5, X6, X7)
	HSUM4(X8, X9, X10, X11)
	HSUM4(X12, X13, X14, X15)
	VMOVUPS X0, 0(R11)
	VMOVUPS X4, 16(R11)
	VMOVUPS X8, 32(R11)
	VMOVUPS X12, 48(R11)
	VZEROUPPER
	RET
