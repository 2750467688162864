//go:build amd64

#include "textflag.h"

// The AMX instructions, which Go's assembler does not know, as bytes
// (VEX encodings from Intel's SDM) on fixed registers: the tile
// configuration at (AX); a block's weight tiles at (SI) (rows 0-15, hi),
// 1024(SI) (rows 0-15, lo), 2048(SI) and 3072(SI) (rows 16-31), R8 (64)
// bytes a row; token block 0's activations at (DI) (hi) and 64(DI) (lo),
// block 1's at (BX) and 64(BX), R9 bytes a token; the results to (R10)
// (block 0) and (R11) (block 1), rows 16-31 64 bytes on, R12 bytes a
// token. Tiles: T0 (block 0, rows 0-15), T1 (block 0, rows 16-31), T2,
// T3 (block 1), T4, T5 the blocks' activations, T6, T7 the two row
// halves' weights.
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE  BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
#define TILEZERO_C \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8
#define LOAD_AH \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x0f \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x0b
#define LOAD_AL \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x64; BYTE $0x0f; BYTE $0x40 \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x6c; BYTE $0x0b; BYTE $0x40
#define LOAD_BH \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x06 \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0xbc; BYTE $0x06; LONG $0x00000800
#define LOAD_BL \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0xb4; BYTE $0x06; LONG $0x00000400 \
	BYTE $0xc4; BYTE $0xa2; BYTE $0x7b; BYTE $0x4b; BYTE $0xbc; BYTE $0x06; LONG $0x00000c00
// DP4: T0 += T4.T6, T1 += T4.T7, T2 += T5.T6, T3 += T5.T7 (TDPBF16PS).
#define DP4 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5 \
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd
#define STORE_C \
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x22 \
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x4c; BYTE $0x22; BYTE $0x40 \
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x23 \
	BYTE $0xc4; BYTE $0x82; BYTE $0x7a; BYTE $0x4b; BYTE $0x5c; BYTE $0x23; BYTE $0x40

// func amxDotF16(cfg *byte, w *byte, nb int, x0, x1 *byte, xstride int, y0, y1 *float32, ystride int)
//
// Four result tiles (two token blocks by two halves of the 32 rows), so
// that four chains of dot products overlap. Each 32-value step adds, in
// this order, activation hi times weight hi, hi*lo and lo*hi (the
// AMX f16 layout's three terms).
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
	TILEZERO_C
	TESTQ CX, CX
	JLE   store

loop:
	LOAD_AH
	LOAD_BH
	DP4
	LOAD_BL
	DP4
	LOAD_AL
	LOAD_BH
	DP4
	ADDQ $4096, SI
	ADDQ $128, DI
	ADDQ $128, BX
	DECQ CX
	JNZ  loop

store:
	STORE_C
	TILERELEASE
	RET

// Half a block: the 16 values at off(SI) rounded to f16 (to nearest even)
// and widened back, their hi halves (rounded to bf16, to nearest even) to
// hi(DI), the rest to lo(DI) (Z5: the mask 0xffff0000, Z6: 0x7fff, Z7: 1).
#define SPLIT16(off, hi, lo) \
	VMOVUPS   off(SI), Z0 \
	VCVTPS2PH $0, Z0, Y1 \
	VCVTPH2PS Y1, Z0 \
	VPSRLD    $16, Z0, Z2 \
	VPANDD    Z7, Z2, Z2 \
	VPADDD    Z6, Z2, Z2 \
	VPADDD    Z0, Z2, Z2 \
	VPANDD    Z5, Z2, Z2 \
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
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z6
	MOVL         $1, AX
	VPBROADCASTD AX, Z7
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
