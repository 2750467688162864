// Four-token MXFP4 x Q8_0 kernels: per token the steps of
// dotMXFP4RowsAVX2 and dotMXFP4RowsAVX512 (dot_avx2_amd64.s,
// dot_avx512_amd64.s) in their order, with each weight block's values,
// their absolute values and signs, and its E8M0 scale computed once for
// the four tokens. Tokens are at BX, SI, DI and R9 (xstride apart); R13
// is the f16 table, R10 the E8M0 one.

#include "textflag.h"
#include "dot_amd64.h"

#define MXT4_ARGS \
	MOVQ w+0(FP), AX \
	MOVQ x+8(FP), BX \
	MOVQ xstride+16(FP), R8 \
	MOVQ nb+24(FP), CX \
	MOVQ f16+40(FP), R13 \
	LEAQ (BX)(R8*1), SI \
	LEAQ (BX)(R8*2), DI \
	LEAQ (SI)(R8*2), R9 \
	LEAQ ·e8m0HalfTable(SB), R10

#define MXT4_NEXT(wb, xb) \
	ADDQ $wb, AX \
	ADDQ $xb, BX \
	ADDQ $xb, SI \
	ADDQ $xb, DI \
	ADDQ $xb, R9

// --- AVX2: Y0-Y3 the tokens' even-block sums, Y4-Y7 their odd-block
// ones; Y8 = the block's values, Y9 their absolute values, Y13 its scale;
// Y12 the value table, Y14 0x0f bytes, Y15 0x0001 words.

// The MXFP4 block at wo(AX): Y8, Y9, Y13.
#define MXT4A_W(wo) \
	VMOVDQU        (wo+1)(AX), X8 \
	VPSRLW         $4, X8, X9 \
	VINSERTI128    $1, X9, Y8, Y8 \
	VPAND          Y14, Y8, Y8 \
	VPSHUFB        Y8, Y12, Y8 \
	VPABSB         Y8, Y9 \
	MOVBLZX        wo(AX), DX \
	VBROADCASTSS   (R10)(DX*4), Y13

// One token's q8_0 block at xo(B) into ACC: MX_SCALE and SIGNED_DOT.
#define MXT4A_TOK(xo, B, ACC) \
	MOVWLZX      xo(B), R12 \
	VBROADCASTSS (R13)(R12*4), Y11 \
	VMULPS       Y13, Y11, Y11 \
	VMOVDQU      (xo+2)(B), Y10 \
	VPSIGNB      Y8, Y10, Y10 \
	VPMADDUBSW   Y10, Y9, Y10 \
	VPMADDWD     Y15, Y10, Y10 \
	VCVTDQ2PS    Y10, Y10 \
	VFMADD231PS  Y10, Y11, ACC

#define MXT4A_BLOCK(wo, xo, A0, A1, A2, A3) \
	MXT4A_W(wo) \
	MXT4A_TOK(xo, BX, A0) \
	MXT4A_TOK(xo, SI, A1) \
	MXT4A_TOK(xo, DI, A2) \
	MXT4A_TOK(xo, R9, A3)

// func dotMXFP4Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotMXFP4Tok4AVX2(SB), NOSPLIT, $0-48
	MXT4_ARGS
	ONES16_Y15
	LOWNIB_Y14
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	CMPQ   CX, $2
	JLT    a2one

a2pair:
	MX_PF
	MXT4A_BLOCK(0, 0, Y0, Y1, Y2, Y3)
	MXT4A_BLOCK(17, 34, Y4, Y5, Y6, Y7)
	MXT4_NEXT(34, 68)
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  a2pair

a2one:
	TESTQ CX, CX
	JZ    a2sum
	MXT4A_BLOCK(0, 0, Y0, Y1, Y2, Y3)

a2sum:
	MOVQ   y+32(FP), R11
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	HSUM(Y0, X0, X8)
	HSUM(Y1, X1, X8)
	HSUM(Y2, X2, X8)
	HSUM(Y3, X3, X8)
	VMOVSS X0, (R11)
	VMOVSS X1, 4(R11)
	VMOVSS X2, 8(R11)
	VMOVSS X3, 12(R11)
	VZEROUPPER
	RET

// --- AVX-512: Z0-Z3 the tokens' sums (lanes 0-7 the even block, 8-15
// the odd one, as dotMXFP4RowsAVX512); Z4 = a block pair's values, Z6
// their absolute values, K1 their signs, Z8 the pair's scales; Z12 the
// value table, Z14 0x0f bytes, Z31 0, Y15 0x0001 words.

// One token's q8_0 block pair at B into ACC: the scales as MX_SCALE
// (into Z10), then SIGNED_PAIRZ.
#define MXT4Z_PAIRTOK(B, ACC) \
	MOVWLZX      (B), R12 \
	VBROADCASTSS (R13)(R12*4), Y10 \
	MOVWLZX      34(B), R12 \
	VBROADCASTSS (R13)(R12*4), Y11 \
	VINSERTF64X4 $1, Y11, Z10, Z10 \
	VMULPS       Z8, Z10, Z10 \
	VMOVDQU      2(B), Y5 \
	VINSERTI64X4 $1, 36(B), Z5, Z5 \
	VPSUBB       Z5, Z31, K1, Z5 \
	VPXORD       Z7, Z7, Z7 \
	VPDPBUSD     Z5, Z6, Z7 \
	VCVTDQ2PS    Z7, Z7 \
	VFMADD231PS  Z7, Z10, ACC

// One token's odd last q8_0 block at B into ACC (Y4 the block's values,
// Y6 their absolute values, Y8 its scale): MX_BLOCK, the scale product
// in Y10.
#define MXT4Z_ONE(B, ACC) \
	MOVWLZX      (B), R12 \
	VBROADCASTSS (R13)(R12*4), Y10 \
	VMULPS       Y8, Y10, Y10 \
	VMOVDQU      2(B), Y5 \
	VPSIGNB      Y4, Y5, Y5 \
	VPMADDUBSW   Y5, Y6, Y7 \
	VPMADDWD     Y15, Y7, Y7 \
	VCVTDQ2PS    Y7, Y7 \
	VFMADD231PS  Y7, Y10, ACC

// func dotMXFP4Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotMXFP4Tok4AVX512(SB), NOSPLIT, $0-48
	MXT4_ARGS
	ONES16_Y15
	MOVL            $0x0f0f0f0f, DX
	VPBROADCASTD    DX, Z14
	VBROADCASTI32X4 ·kvaluesMXFP4(SB), Z12
	VPXORD          Z31, Z31, Z31
	VPXORD          Z0, Z0, Z0
	VPXORD          Z1, Z1, Z1
	VPXORD          Z2, Z2, Z2
	VPXORD          Z3, Z3, Z3
	CMPQ            CX, $2
	JLT             z5fold

z5pair:
	MX_PF
	NIBBLES2(1, 17)
	VPSHUFB      Z4, Z12, Z4
	VPABSB       Z4, Z6
	VPMOVB2M     Z4, K1
	MOVBLZX      0(AX), DX
	VBROADCASTSS (R10)(DX*4), Y8
	MOVBLZX      17(AX), DX
	VBROADCASTSS (R10)(DX*4), Y9
	VINSERTF64X4 $1, Y9, Z8, Z8
	MXT4Z_PAIRTOK(BX, Z0)
	MXT4Z_PAIRTOK(SI, Z1)
	MXT4Z_PAIRTOK(DI, Z2)
	MXT4Z_PAIRTOK(R9, Z3)
	MXT4_NEXT(34, 68)
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  z5pair

z5fold:
	VEXTRACTF64X4 $1, Z0, Y9
	VADDPS        Y9, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y9
	VADDPS        Y9, Y1, Y1
	VEXTRACTF64X4 $1, Z2, Y9
	VADDPS        Y9, Y2, Y2
	VEXTRACTF64X4 $1, Z3, Y9
	VADDPS        Y9, Y3, Y3
	TESTQ         CX, CX
	JZ            z5sum
	NIBBLES32(1(AX), Y14)
	VPSHUFB      Y4, Y12, Y4
	VPABSB       Y4, Y6
	MOVBLZX      0(AX), DX
	VBROADCASTSS (R10)(DX*4), Y8
	MXT4Z_ONE(BX, Y0)
	MXT4Z_ONE(SI, Y1)
	MXT4Z_ONE(DI, Y2)
	MXT4Z_ONE(R9, Y3)

z5sum:
	MOVQ y+32(FP), R11
	HSUM(Y0, X0, X9)
	HSUM(Y1, X1, X9)
	HSUM(Y2, X2, X9)
	HSUM(Y3, X3, X9)
	VMOVSS X0, (R11)
	VMOVSS X1, 4(R11)
	VMOVSS X2, 8(R11)
	VMOVSS X3, 12(R11)
	VZEROUPPER
	RET
