//go:build amd64

#include "textflag.h"

// The AMX instructions, which Go's assembler does not know, as bytes
// (VEX encodings from Intel's SDM) on fixed registers: the tile
// configuration at (AX); the weights' hi and lo tiles at (SI) and
// 1024(SI), R8 (64) bytes a row; token block 0's activations at (DI) and
// 64(DI), block 1's at (BX) and 64(BX), R9 bytes a token; the results to
// (R10) (block 0) and (R11) (block 1), R12 bytes a token.
#define LDTILECFG_AX     BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE      BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T0      BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T1      BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
#define LOAD_WH_T6       BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x06
#define LOAD_WL_T7       BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0xbc; BYTE $0x06; LONG $0x00000400
#define LOAD_X0H_T2      BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x14; BYTE $0x0f
#define LOAD_X0L_T3      BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x5c; BYTE $0x0f; BYTE $0x40
#define LOAD_X1H_T4      BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x0b
#define LOAD_X1L_T5      BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x6c; BYTE $0x0b; BYTE $0x40
#define DP_T0_T2_T6      BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc2
#define DP_T1_T4_T6      BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xcc
#define DP_T0_T2_T7      BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xc2
#define DP_T1_T4_T7      BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc
#define DP_T0_T3_T6      BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc3
#define DP_T1_T5_T6      BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xcd
#define DP_T0_T3_T7      BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xc3
#define DP_T1_T5_T7      BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcd
#define STORE_T0_Y0      BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x22
#define STORE_T1_Y1      BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x23

// func amxDotF16(cfg *byte, w *byte, nb int, x0, x1 *byte, xstride int, y0, y1 *float32, ystride int)
//
// Tiles: T0, T1 the two token blocks' results (16 rows of the group each),
// T2/T3 block 0's activations (hi, lo), T4/T5 block 1's, T6/T7 the
// weights' (hi, lo). Each 32-value step adds, in this order, hi*hi, hi*lo
// (activation hi, weight lo), lo*hi and lo*lo: every product exact.
TEXT ·amxDotF16(SB), NOSPLIT, $0-72
	MOVQ cfg+0(FP), AX
	MOVQ w+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ x0+24(FP), DI
	MOVQ x1+32(FP), BX
	MOVQ xstride+40(FP), R9
	MOVQ y0+48(FP), R10
	MOVQ y1+56(FP), R11
	MOVQ ystride+64(FP), R12
	MOVQ $64, R8
	LDTILECFG_AX
	TILEZERO_T0
	TILEZERO_T1
	TESTQ CX, CX
	JLE   store

loop:
	LOAD_WH_T6
	LOAD_WL_T7
	LOAD_X0H_T2
	LOAD_X0L_T3
	LOAD_X1H_T4
	LOAD_X1L_T5
	DP_T0_T2_T6
	DP_T1_T4_T6
	DP_T0_T2_T7
	DP_T1_T4_T7
	DP_T0_T3_T6
	DP_T1_T5_T6
	DP_T0_T3_T7
	DP_T1_T5_T7
	ADDQ $2048, SI
	ADDQ $128, DI
	ADDQ $128, BX
	DECQ CX
	JNZ  loop

store:
	STORE_T0_Y0
	STORE_T1_Y1
	TILERELEASE
	RET

// Half a block: the 16 values at off(SI) rounded to f16 (to nearest even)
// and widened back, their hi halves (the f32 bits' top 16) to hi(DI), the
// rest to lo(DI) (Z5: the mask 0xffff0000).
#define SPLIT16(off, hi, lo) \
	VMOVUPS   off(SI), Z0 \
	VCVTPS2PH $0, Z0, Y1 \
	VCVTPH2PS Y1, Z0 \
	VPANDD    Z5, Z0, Z2 \
	VSUBPS    Z2, Z0, Z3 \
	VPSRLD    $16, Z2, Z2 \
	VPSRLD    $16, Z3, Z3 \
	VPMOVDW   Z2, hi(DI) \
	VPMOVDW   Z3, lo(DI)

// func splitBF16x2AVX512(dst *byte, src *float32, nb int)
// QuantizeBF16x2 of nb blocks of 32 values.
TEXT ·splitBF16x2AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         nb+16(FP), CX
	MOVL         $0xffff0000, AX
	VPBROADCASTD AX, Z5
	TESTQ        CX, CX
	JLE          sdone

sloop:
	SPLIT16(0, 0, 64)
	SPLIT16(64, 32, 96)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  sloop

sdone:
	VZEROUPPER
	RET
