// Q4_1 x Q8_1 tile kernel for prefill (AVX-512 VNNI): 4 weight rows against
// 4 tokens. A 512-bit register holds one block of two rows (lanes 0-7 the
// first, 8-15 the second) against one token's block broadcast to both
// halves, so each weight block is unpacked once for four tokens and each
// token block loaded once for four rows. Every (row, token) keeps its own
// 8 lanes accumulating block after block, d_w*d_x times the integer dot,
// and the min terms m*s apart, then sums the lanes and adds the min terms
// last: the same operations in the same order as ggml's q4_1 x q8_1 dot, so
// prefill tracks llama.cpp as closely as the single-token kernels do.

#include "textflag.h"

// Rows A and B's current block: nibbles in NIB as [A lo | A hi | B lo | B hi]
// (needs Z13 = 0x0f bytes), d_w of each row over its 8 lanes in DW, and m
// of each row in lanes 0 and 8 only of MV. Clobbers Z9, Z10, DX, R12.
#define ROWPAIR(A, B, NIB, DW, MV) \
	VMOVDQU      4(A), X9 \
	VINSERTI128  $1, 4(B), Y9, Y9 \
	VPSRLW       $4, Y9, Y10 \
	VINSERTI64X4 $1, Y10, Z9, Z9 \
	VSHUFI64X2   $0xd8, Z9, Z9, NIB \
	VPANDD       Z13, NIB, NIB \
	MOVWLZX      0(A), DX \
	MOVWLZX      0(B), R12 \
	VBROADCASTSS (R13)(DX*4), Y9 \
	VBROADCASTSS (R13)(R12*4), Y10 \
	VINSERTF64X4 $1, Y10, Z9, DW \
	MOVWLZX      2(A), DX \
	MOVWLZX      2(B), R12 \
	VMOVSS       (R13)(DX*4), X9 \
	VMOVSS       (R13)(R12*4), X10 \
	VINSERTF64X4 $1, Y10, Z9, MV

// A token's current block at register T: its 32 quants in both halves of
// Z6, d_x in every lane of Z7, s_x in every lane of Z8.
#define TOK(T) \
	VBROADCASTI64X4 4(T), Z6 \
	MOVWLZX         0(T), DX \
	VBROADCASTSS    (R13)(DX*4), Z7 \
	MOVWLZX         2(T), DX \
	VBROADCASTSS    (R13)(DX*4), Z8

// ACC += (d_w*d_x) * dot lanes; MACC += m*s (lanes 0 and 8).
#define PROD(NIB, DW, MV, ACC, MACC) \
	VPXORD      Z9, Z9, Z9 \
	VPDPBUSD    Z6, NIB, Z9 \
	VCVTDQ2PS   Z9, Z9 \
	VMULPS      Z7, DW, Z10 \
	VFMADD231PS Z10, Z9, ACC \
	VFMADD231PS Z8, MV, MACC

// Token T against both rows of the pair: row 0 into ACC0, MACC0, row 1
// into ACC1, MACC1.
#define TOKROWS(T, ACC0, MACC0, ACC1, MACC1) \
	TOK(T) \
	PROD(Z0, Z2, Z4, ACC0, MACC0) \
	PROD(Z1, Z3, Z5, ACC1, MACC1)

// X9 = the sum of the 8 lanes of Y register YS (low half XS) as ggml's
// hsum_float_8 orders it. Clobbers X10.
#define HSUM8(YS, XS) \
	VEXTRACTF32X4 $1, YS, X9 \
	VADDPS        XS, X9, X9 \
	VMOVHLPS      X9, X9, X10 \
	VADDPS        X10, X9, X9 \
	VMOVSHDUP     X9, X10 \
	VADDSS        X10, X9, X9

// Stores the two rows of accumulator pair (ACC, MACC) at ADDR and ADDR+4.
#define STORE2(ACC, YACC, XACC, MACC, XMACC, ADDR0, ADDR1) \
	HSUM8(YACC, XACC) \
	VADDSS        XMACC, X9, X9 \
	VMOVSS        X9, ADDR0 \
	VEXTRACTF64X4 $1, ACC, Y11 \
	HSUM8(Y11, X11) \
	VEXTRACTF32X4 $2, MACC, X10 \
	VADDSS        X10, X9, X9 \
	VMOVSS        X9, ADDR1

// func fusedQ41Tile4x4(w *byte, wstride int, x *byte, xstride int, nb int, y *float32, ystride int, f16 *float32)
// y[t*ystride+r] = dot(row r, token t) for r, t < 4; nb > 0.
TEXT ·fusedQ41Tile4x4(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ wstride+8(FP), DX
	LEAQ (SI)(DX*1), AX
	LEAQ (SI)(DX*2), BX
	LEAQ (AX)(DX*2), R10
	MOVQ x+16(FP), DI
	MOVQ xstride+24(FP), DX
	LEAQ (DI)(DX*1), R8
	LEAQ (DI)(DX*2), R9
	LEAQ (R8)(DX*2), R11
	MOVQ nb+32(FP), CX
	MOVQ f16+56(FP), R13
	MOVL         $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z13
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31

block:
	ROWPAIR(SI, AX, Z0, Z2, Z4)
	ROWPAIR(BX, R10, Z1, Z3, Z5)
	TOKROWS(DI, Z16, Z24, Z17, Z25)
	TOKROWS(R8, Z18, Z26, Z19, Z27)
	TOKROWS(R9, Z20, Z28, Z21, Z29)
	TOKROWS(R11, Z22, Z30, Z23, Z31)
	ADDQ $20, SI
	ADDQ $20, AX
	ADDQ $20, BX
	ADDQ $20, R10
	ADDQ $36, DI
	ADDQ $36, R8
	ADDQ $36, R9
	ADDQ $36, R11
	DECQ CX
	JNZ  block

	MOVQ y+40(FP), AX
	MOVQ ystride+48(FP), BX
	SHLQ $2, BX
	STORE2(Z16, Y16, X16, Z24, X24, (AX), 4(AX))
	STORE2(Z17, Y17, X17, Z25, X25, 8(AX), 12(AX))
	ADDQ BX, AX
	STORE2(Z18, Y18, X18, Z26, X26, (AX), 4(AX))
	STORE2(Z19, Y19, X19, Z27, X27, 8(AX), 12(AX))
	ADDQ BX, AX
	STORE2(Z20, Y20, X20, Z28, X28, (AX), 4(AX))
	STORE2(Z21, Y21, X21, Z29, X29, 8(AX), 12(AX))
	ADDQ BX, AX
	STORE2(Z22, Y22, X22, Z30, X30, (AX), 4(AX))
	STORE2(Z23, Y23, X23, Z31, X31, 8(AX), 12(AX))
	VZEROUPPER
	RET
