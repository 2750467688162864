// The four-token f16 kernels: one weight row of halves against four
// tokens of halves xstride bytes apart. Each step widens the row's halves
// once and multiplies them into several tokens' accumulators; each token
// keeps the four 8-lane accumulators, steps, fold, horizontal sum and
// scalar tail of dotF16RowsAVX2 (FROWS in dot_avx2_amd64.s), so its result
// is bit-identical to the row kernel's whatever the batch. Four tokens'
// 16 accumulators need the registers above Y15 (AVX-512 VL); the AVX2
// kernel, with 16 registers, takes the row twice, two tokens a pass.

#include "textflag.h"
#include "dot_amd64.h"

// The 32 weight halves at AX, widened into Y4..Y7.
#define F16W32 \
	VCVTPH2PS (AX), Y4 \
	VCVTPH2PS 16(AX), Y5 \
	VCVTPH2PS 32(AX), Y6 \
	VCVTPH2PS 48(AX), Y7

// One token's 32-value step (the row kernel's F16STEP32): its halves at
// B, widened through T, times Y4..Y7 into A0..A3.
#define F16TOK32(B, T, A0, A1, A2, A3) \
	VCVTPH2PS   (B), T \
	VFMADD231PS T, Y4, A0 \
	VCVTPH2PS   16(B), T \
	VFMADD231PS T, Y5, A1 \
	VCVTPH2PS   32(B), T \
	VFMADD231PS T, Y6, A2 \
	VCVTPH2PS   48(B), T \
	VFMADD231PS T, Y7, A3

// One token's 8-value step (F16STEP8): halves at B times Y4 into A0.
#define F16TOK8(B, T, A0) \
	VCVTPH2PS   (B), T \
	VFMADD231PS T, Y4, A0

// One token's tail value (F16STEP1): the half at B, widened through T,
// times X4 into X.
#define F16TOK1(B, T, X) \
	MOVWLZX     (B), DX \
	VMOVD       DX, T \
	VCVTPH2PS   T, T \
	VFMADD231SS T, X4, X

// The row kernel's fold of one token's accumulators A0..A3 (moved to
// Y0..Y3 first, where HSUM's VEX instructions reach them) into lane 0
// of OUT.
#define F16FOLD(A0, A1, A2, A3, OUT) \
	VMOVAPS A0, Y0 \
	VMOVAPS A1, Y1 \
	VMOVAPS A2, Y2 \
	VMOVAPS A3, Y3 \
	VADDPS  Y1, Y0, Y0 \
	VADDPS  Y3, Y2, Y2 \
	VADDPS  Y2, Y0, Y0 \
	HSUM_Y0 \
	VMOVAPS X0, OUT

#define HSUM_Y0 HSUM(Y0, X0, X1)

#define ADVANCE(n) \
	ADDQ $(n), AX \
	ADDQ $(n), BX \
	ADDQ $(n), SI \
	ADDQ $(n), DI \
	ADDQ $(n), R10

// func dotF16Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32)
// Tokens at BX, SI, DI, R10, their accumulators Y16-Y19, Y20-Y23,
// Y24-Y27, Y28-Y31; their results X12..X15.
TEXT ·dotF16Tok4AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), AX
	MOVQ x+8(FP), BX
	MOVQ xstride+16(FP), R8
	MOVQ nb+24(FP), CX
	MOVQ y+32(FP), R11
	LEAQ (BX)(R8*1), SI
	LEAQ (BX)(R8*2), DI
	LEAQ (SI)(R8*2), R10
	VPXORD Y16, Y16, Y16
	VMOVAPS Y16, Y17
	VMOVAPS Y16, Y18
	VMOVAPS Y16, Y19
	VMOVAPS Y16, Y20
	VMOVAPS Y16, Y21
	VMOVAPS Y16, Y22
	VMOVAPS Y16, Y23
	VMOVAPS Y16, Y24
	VMOVAPS Y16, Y25
	VMOVAPS Y16, Y26
	VMOVAPS Y16, Y27
	VMOVAPS Y16, Y28
	VMOVAPS Y16, Y29
	VMOVAPS Y16, Y30
	VMOVAPS Y16, Y31
	CMPQ CX, $32
	JLT  by8

by32:
	PREFETCHT0 2048(AX)
	F16W32
	F16TOK32(BX, Y8, Y16, Y17, Y18, Y19)
	F16TOK32(SI, Y9, Y20, Y21, Y22, Y23)
	F16TOK32(DI, Y10, Y24, Y25, Y26, Y27)
	F16TOK32(R10, Y11, Y28, Y29, Y30, Y31)
	ADVANCE(64)
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  by32

by8:
	CMPQ CX, $8
	JLT  fold

by8loop:
	VCVTPH2PS (AX), Y4
	F16TOK8(BX, Y8, Y16)
	F16TOK8(SI, Y9, Y20)
	F16TOK8(DI, Y10, Y24)
	F16TOK8(R10, Y11, Y28)
	ADVANCE(16)
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  by8loop

fold:
	F16FOLD(Y16, Y17, Y18, Y19, X12)
	F16FOLD(Y20, Y21, Y22, Y23, X13)
	F16FOLD(Y24, Y25, Y26, Y27, X14)
	F16FOLD(Y28, Y29, Y30, Y31, X15)
	TESTQ CX, CX
	JLE   store

tail:
	MOVWLZX   (AX), DX
	VMOVD     DX, X4
	VCVTPH2PS X4, X4
	F16TOK1(BX, X8, X12)
	F16TOK1(SI, X8, X13)
	F16TOK1(DI, X8, X14)
	F16TOK1(R10, X8, X15)
	ADVANCE(2)
	DECQ CX
	JNZ  tail

store:
	VMOVSS X12, (R11)
	VMOVSS X13, 4(R11)
	VMOVSS X14, 8(R11)
	VMOVSS X15, 12(R11)
	VZEROUPPER
	RET

// func dotF16Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)
// Two passes over the row, tokens 0 and 1, then 2 and 3: the pass's
// tokens at BX and SI, their accumulators Y8-Y11 and Y12-Y15, the weights
// Y4-Y7, their results X6 and X7; R12 the passes left.
TEXT ·dotF16Tok4AVX2(SB), NOSPLIT, $0-40
	MOVQ xstride+16(FP), R8
	MOVQ y+32(FP), R11
	MOVQ x+8(FP), BX
	MOVQ $2, R12

pass:
	MOVQ   w+0(FP), AX
	MOVQ   nb+24(FP), CX
	LEAQ   (BX)(R8*1), SI
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	CMPQ   CX, $32
	JLT    by8

by32:
	PREFETCHT0 2048(AX)
	F16W32
	F16TOK32(BX, Y0, Y8, Y9, Y10, Y11)
	F16TOK32(SI, Y1, Y12, Y13, Y14, Y15)
	ADDQ $64, AX
	ADDQ $64, BX
	ADDQ $64, SI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  by32

by8:
	CMPQ CX, $8
	JLT  fold

by8loop:
	VCVTPH2PS (AX), Y4
	F16TOK8(BX, Y0, Y8)
	F16TOK8(SI, Y1, Y12)
	ADDQ $16, AX
	ADDQ $16, BX
	ADDQ $16, SI
	SUBQ $8, CX
	CMPQ CX, $8
	JGE  by8loop

fold:
	F16FOLD(Y8, Y9, Y10, Y11, X6)
	F16FOLD(Y12, Y13, Y14, Y15, X7)
	TESTQ CX, CX
	JLE   store

tail:
	MOVWLZX   (AX), DX
	VMOVD     DX, X4
	VCVTPH2PS X4, X4
	F16TOK1(BX, X5, X6)
	F16TOK1(SI, X5, X7)
	ADDQ $2, AX
	ADDQ $2, BX
	ADDQ $2, SI
	DECQ CX
	JNZ  tail

store:
	VMOVSS X6, (R11)
	VMOVSS X7, 4(R11)
	// The next pass: tokens 2 and 3 (BX ran nb halves past token 0).
	MOVQ x+8(FP), BX
	LEAQ (BX)(R8*2), BX
	ADDQ $8, R11
	DECQ R12
	JNZ  pass
	VZEROUPPER
	RET
