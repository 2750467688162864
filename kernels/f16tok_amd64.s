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

// The tile kernels' arguments: AX row 0, R8 wstride; BX token 0 of the
// group, R9 xstride, R10 3*xstride; DX the groups; DI the group's
// results, R11 ystride, R12 3*ystride.
#define TILE_ARGS \
	MOVQ wstride+8(FP), R8 \
	MOVQ x+16(FP), BX \
	MOVQ xstride+24(FP), R9 \
	LEAQ (R9)(R9*2), R10 \
	MOVQ ntok4+32(FP), DX \
	MOVQ y+48(FP), DI \
	MOVQ ystride+56(FP), R11 \
	LEAQ (R11)(R11*2), R12

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

// ---------------------------------------------------------------------------
// The f16 tile kernels: three weight rows (wstride bytes apart) against
// 4*ntok4 tokens (xstride bytes apart), y[t*ystride + 4r] (bytes) the dot
// of row r and token t; nb, the values of a row, a multiple of 8 (the
// adapter sends other lengths to the four-token kernels). Each (row,
// token) pair keeps exactly the row kernel's arithmetic: its four 8-lane
// accumulators, 32-value steps, then 8-value steps into the first one,
// the fold and the horizontal sum, so its result is bit-identical to
// dotF16RowsAVX2's whatever the rows and tokens around it.

// The AVX-512 kernel holds a pair's four 8-lane accumulators in two
// 16-lane registers, the first two in one (values 0-15 of a 32-value
// step) and the last two in the other (values 16-31): 12 pairs (3 rows x
// 4 tokens) take Z8-Z31. A step widens the three rows' halves once
// (Z0-Z2) for the four tokens and each token's halves once for the three
// rows; the 8-value steps run on the first register's low half under the
// mask K1 (0xff), which keeps its high half, the second accumulator.
// Row r, token t: the first register Z(8+4r+t), the second Z(20+4r+t).

// The three rows' halves at off(AX), widened into W0..W2 (ZMM: 16 values,
// YMM: 8).
#define TILEW(off, W0, W1, W2) \
	VCVTPH2PS off(AX), W0 \
	VCVTPH2PS off(AX)(R8*1), W1 \
	VCVTPH2PS off(AX)(R8*2), W2

// One token's 16 halves at src, widened through T, times the three rows
// into A0..A2.
#define TILEX16(src, T, A0, A1, A2) \
	VCVTPH2PS   src, T \
	VFMADD231PS T, Z0, A0 \
	VFMADD231PS T, Z1, A1 \
	VFMADD231PS T, Z2, A2

// One token's 8 halves at src times the three rows into the low halves of
// A0..A2.
#define TILEX8(src, A0, A1, A2) \
	VCVTPH2PS   src, Y3 \
	VFMADD231PS Z3, Z0, K1, A0 \
	VFMADD231PS Z3, Z1, K1, A1 \
	VFMADD231PS Z3, Z2, K1, A2

// The four tokens of one 16-value half at off: rows 0, 1, 2 of token t
// into a_t, b_t, c_t.
#define TILE16(off, a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3) \
	TILEW(off, Z0, Z1, Z2) \
	TILEX16(off(SI), Z3, a0, b0, c0) \
	TILEX16(off(SI)(R9*1), Z4, a1, b1, c1) \
	TILEX16(off(SI)(R9*2), Z3, a2, b2, c2) \
	TILEX16(off(SI)(R10*1), Z4, a3, b3, c3)

// Two tokens' pairs of one row folded as the row kernel folds Y0..Y3,
// side by side: A0, B0 token u's first and second registers, A1, B1 token
// v's; D = [(acc0+acc1)+(acc2+acc3) of u | of v] (clobbers T0, T1).
#define TILEFOLD2(A0, B0, A1, B1, D, T0, T1) \
	VSHUFF64X2 $0x44, A1, A0, D \
	VSHUFF64X2 $0xee, A1, A0, T0 \
	VADDPS     T0, D, D \
	VSHUFF64X2 $0x44, B1, B0, T0 \
	VSHUFF64X2 $0xee, B1, B0, T1 \
	VADDPS     T1, T0, T0 \
	VADDPS     T0, D, D

// Row r's four pairs (token t's registers At, Bt) folded and summed as the
// row kernel does (HSUM, on the four tokens' 8 lanes at once, a 128-bit
// lane each), the results to off(DI) and on by ystride (R11, R12
// 3*ystride).
#define TILEFOLD4(off, A0, B0, A1, B1, A2, B2, A3, B3) \
	TILEFOLD2(A0, B0, A1, B1, Z0, Z1, Z2) \
	TILEFOLD2(A2, B2, A3, B3, Z3, Z4, Z5) \
	VSHUFF64X2    $0x88, Z3, Z0, Z1 \
	VSHUFF64X2    $0xdd, Z3, Z0, Z2 \
	VADDPS        Z2, Z1, Z1 \
	VPERMILPS     $0x4e, Z1, Z2 \
	VADDPS        Z2, Z1, Z1 \
	VMOVSHDUP     Z1, Z2 \
	VADDPS        Z2, Z1, Z1 \
	VMOVSS        X1, off(DI) \
	VEXTRACTF32X4 $1, Z1, X2 \
	VMOVSS        X2, off(DI)(R11*1) \
	VEXTRACTF32X4 $2, Z1, X2 \
	VMOVSS        X2, off(DI)(R11*2) \
	VEXTRACTF32X4 $3, Z1, X2 \
	VMOVSS        X2, off(DI)(R12*1)

// func dotF16Tile3x4AVX512(w *byte, wstride int, x *byte, xstride int, ntok4 int, nb int, y *float32, ystride int)
TEXT ·dotF16Tile3x4AVX512(SB), NOSPLIT, $0-64
	MOVL $0xff, AX
	KMOVW AX, K1
	TILE_ARGS
	TESTQ DX, DX
	JLE   done

group:
	MOVQ   w+0(FP), AX
	MOVQ   BX, SI
	MOVQ   nb+40(FP), CX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
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
	CMPQ   CX, $32
	JLT    by8

by32:
	TILE16(0, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19)
	TILE16(32, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31)
	ADDQ $64, AX
	ADDQ $64, SI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  by32

by8:
	CMPQ CX, $8
	JLT  fold
	TILEW(0, Y0, Y1, Y2)
	TILEX8((SI), Z8, Z12, Z16)
	TILEX8((SI)(R9*1), Z9, Z13, Z17)
	TILEX8((SI)(R9*2), Z10, Z14, Z18)
	TILEX8((SI)(R10*1), Z11, Z15, Z19)
	ADDQ $16, AX
	ADDQ $16, SI
	SUBQ $8, CX
	JMP  by8

fold:
	TILEFOLD4(0, Z8, Z20, Z9, Z21, Z10, Z22, Z11, Z23)
	TILEFOLD4(4, Z12, Z24, Z13, Z25, Z14, Z26, Z15, Z27)
	TILEFOLD4(8, Z16, Z28, Z17, Z29, Z18, Z30, Z19, Z31)
	LEAQ (BX)(R9*4), BX
	LEAQ (DI)(R11*4), DI
	DECQ DX
	JNZ  group

done:
	VZEROUPPER
	RET

// The AVX2 kernel (16 registers) takes the tokens one at a time against
// the three rows: row r's accumulators Y(4r)..Y(4r+3), the rows' halves
// widened once per token into Y12-Y14, the token's once for the three
// rows into Y15.

// The token's 8 halves at off(SI) times the three rows' into accumulators
// A (row 0), B (row 1), C (row 2): the j-th 8 values of a 32-value step
// (off 16j) into the j-th accumulators, an 8-value step into the first.
#define TILE8X3(off, A, B, C) \
	VCVTPH2PS   off(SI), Y15 \
	VCVTPH2PS   off(AX), Y12 \
	VFMADD231PS Y15, Y12, A \
	VCVTPH2PS   off(AX)(R8*1), Y13 \
	VFMADD231PS Y15, Y13, B \
	VCVTPH2PS   off(AX)(R8*2), Y14 \
	VFMADD231PS Y15, Y14, C

// func dotF16Tile3x4AVX2(w *byte, wstride int, x *byte, xstride int, ntok4 int, nb int, y *float32, ystride int)
// BX the token, DI its results, DX the tokens left.
TEXT ·dotF16Tile3x4AVX2(SB), NOSPLIT, $0-64
	TILE_ARGS
	SHLQ  $2, DX
	TESTQ DX, DX
	JLE   done

token:
	MOVQ   w+0(FP), AX
	MOVQ   BX, SI
	MOVQ   nb+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	CMPQ   CX, $32
	JLT    by8

by32:
	TILE8X3(0, Y0, Y4, Y8)
	TILE8X3(16, Y1, Y5, Y9)
	TILE8X3(32, Y2, Y6, Y10)
	TILE8X3(48, Y3, Y7, Y11)
	ADDQ $64, AX
	ADDQ $64, SI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE  by32

by8:
	CMPQ CX, $8
	JLT  fold
	TILE8X3(0, Y0, Y4, Y8)
	ADDQ $16, AX
	ADDQ $16, SI
	SUBQ $8, CX
	JMP  by8

fold:
	F16FOLD(Y0, Y1, Y2, Y3, X12)
	VMOVSS X12, (DI)
	F16FOLD(Y4, Y5, Y6, Y7, X12)
	VMOVSS X12, 4(DI)
	F16FOLD(Y8, Y9, Y10, Y11, X12)
	VMOVSS X12, 8(DI)
	ADDQ R9, BX
	ADDQ R11, DI
	DECQ DX
	JNZ  token

done:
	VZEROUPPER
	RET
