#include "textflag.h"

// The AVX-512 group kernels: AttnValuesQ8 for K = 1, 2 or 4 heads that
// share their values (grouped-query attention), each position's block
// loaded and converted once for all of them. Per head the arithmetic of
// attnValuesQ8AVX2: the weight times the block's scale rounded to float32,
// fused multiply-adds, even and odd positions apart, added at the end.
//
// Registers: SI the block's column in the first row, R9 the current row,
// DX the row stride, R14 the position's byte offset in the weight rows,
// R10, BX, R8, R12 the weight rows of heads 0-3, DI the output of head 0,
// R13 the f16 table, R11 the positions left, CX the blocks left.

// The block at P0 (P2, P18: its bytes 2 and 18): scale XS, quants 0-15
// ZA and 16-31 ZB as float32.
#define Q8G_LOAD(P0, P2, P18, XS, ZA, ZB) \
	MOVWLZX   P0, AX \
	VMOVSS    (R13)(AX*4), XS \
	VPMOVSXBD P2, ZA \
	VPMOVSXBD P18, ZB \
	VCVTDQ2PS ZA, ZA \
	VCVTDQ2PS ZB, ZB

// One head's weight at WOFF(W)(R14) times the scale XS, into A0, A1.
#define Q8G_FMA(W, WOFF, XS, ZA, ZB, A0, A1, T, ZT) \
	VMULSS       WOFF(W)(R14*1), XS, T \
	VBROADCASTSS T, ZT \
	VFMADD231PS  ZA, ZT, A0 \
	VFMADD231PS  ZB, ZT, A1

// Per head (weights W, even sums E0 E1, odd sums O0 O1, output OUT):
#define Q8G_ZERO(W, E0, E1, O0, O1, OUT) VPXORD E0, E0, E0; VPXORD E1, E1, E1; VPXORD O0, O0, O0; VPXORD O1, O1, O1
#define Q8G_EVEN(W, E0, E1, O0, O1, OUT) Q8G_FMA(W, 0, X8, Z9, Z10, E0, E1, X11, Z11)
#define Q8G_ODD(W, E0, E1, O0, O1, OUT) Q8G_FMA(W, 4, X12, Z13, Z14, O0, O1, X15, Z15)
#define Q8G_STORE(W, E0, E1, O0, O1, OUT) VADDPS O0, E0, E0; VADDPS O1, E1, E1; VMOVUPS E0, (OUT); VMOVUPS E1, 64(OUT)

#define Q8G_HEAD1(M) M(R10, Z0, Z1, Z16, Z17, DI)
#define Q8G_HEAD2(M) Q8G_HEAD1(M); M(BX, Z2, Z3, Z18, Z19, R9)
#define Q8G_HEAD4(M) Q8G_HEAD2(M); M(R8, Z4, Z5, Z20, Z21, R11); M(R12, Z6, Z7, Z22, Z23, R14)

#define Q8G_KERNEL(HEADS) \
	MOVQ out+0(FP), DI \
	MOVQ v+16(FP), SI \
	MOVQ rowBytes+24(FP), DX \
	MOVQ nb+32(FP), CX \
	MOVQ f16+64(FP), R13 \
	MOVQ w+40(FP), R10 \
	MOVQ wStride+48(FP), AX \
	SHLQ $2, AX \
	LEAQ (R10)(AX*1), BX \
	LEAQ (R10)(AX*2), R8 \
	LEAQ (R8)(AX*1), R12 \
block: \
	HEADS(Q8G_ZERO) \
	MOVQ  SI, R9 \
	XORQ  R14, R14 \
	MOVQ  n+56(FP), R11 \
	CMPQ  R11, $2 \
	JLT   last \
pair: \
	Q8G_LOAD((R9), 2(R9), 18(R9), X8, Z9, Z10) \
	Q8G_LOAD((R9)(DX*1), 2(R9)(DX*1), 18(R9)(DX*1), X12, Z13, Z14) \
	HEADS(Q8G_EVEN) \
	HEADS(Q8G_ODD) \
	LEAQ (R9)(DX*2), R9 \
	ADDQ $8, R14 \
	SUBQ $2, R11 \
	CMPQ R11, $2 \
	JGE  pair \
last: \
	TESTQ R11, R11 \
	JZ    store \
	Q8G_LOAD((R9), 2(R9), 18(R9), X8, Z9, Z10) \
	HEADS(Q8G_EVEN) \
store: \
	MOVQ outStride+8(FP), AX \
	SHLQ $2, AX \
	LEAQ (DI)(AX*1), R9 \
	LEAQ (DI)(AX*2), R11 \
	LEAQ (R11)(AX*1), R14 \
	HEADS(Q8G_STORE) \
	ADDQ $128, DI \
	ADDQ $34, SI \
	DECQ CX \
	JNZ  block \
	VZEROUPPER \
	RET

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

// func attnValuesQ8G1AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)
TEXT ·attnValuesQ8G1AVX512(SB), NOSPLIT, $0-72
	Q8G_KERNEL(Q8G_HEAD1)

// func attnValuesQ8G2AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)
TEXT ·attnValuesQ8G2AVX512(SB), NOSPLIT, $0-72
	Q8G_KERNEL(Q8G_HEAD2)

// func attnValuesQ8G4AVX512(out *float32, outStride int, v *byte, rowBytes, nb int, w *float32, wStride, n int, f16 *float32)
TEXT ·attnValuesQ8G4AVX512(SB), NOSPLIT, $0-72
	Q8G_KERNEL(Q8G_HEAD4)
