// Packed q4_1 x q8_1 kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q41.go: one weight row per 32-bit lane. Per block the 4 nibble
// runs are split once for all the call's tokens into 8 registers of
// unsigned bytes (16 rows x 4 values each: AND 0x0f for values 4c..4c+3,
// shift and AND for values 16+4c..16+4c+3); each VPDPBUSD takes the 4
// matching signed q8_1 activation bytes of one token broadcast from memory,
// so nothing is summed across rows. Per block and token the integer sum
// goes to float and the row sums get float(isum)*(d_row*d_a) and
// m_row*s_a, the token's f16 d_a and s_a read through the f16 table.

#include "textflag.h"
#include "packed_amd64.h"

// Register use (K = tokens per call, at most 8):
//   SI weights, CX blocks left, R13 f16 table, DX f16 index,
//   BX R8 R9 R10 R11 R12 DI R14 the tokens' activations (current block),
//   Z0-Z7 the block's nibbles as bytes (Z(2c) values 4c.., Z(2c+1) values
//   16+4c..), Z8 row d, Z9 row m, Z10 0x0f bytes, Z11 d_row*d_a, Z12 the
//   GFNI matrix that moves a byte's high nibble down,
//   Z16-Z23 float sums, one per token,
//   Z24-Z31 integer sums.

// The block's row scales and offsets in float, and its nibbles as bytes.
#define LOADW \
	VCVTPH2PS (SI), Z8 \
	VCVTPH2PS 32(SI), Z9 \
	VPANDD    64(SI), Z10, Z0 \
	VPSRLW    $4, 64(SI), Z1 \
	VPANDD    Z1, Z10, Z1 \
	VPANDD    128(SI), Z10, Z2 \
	VPSRLW    $4, 128(SI), Z3 \
	VPANDD    Z3, Z10, Z3 \
	VPANDD    192(SI), Z10, Z4 \
	VPSRLW    $4, 192(SI), Z5 \
	VPANDD    Z5, Z10, Z5 \
	VPANDD    256(SI), Z10, Z6 \
	VPSRLW    $4, 256(SI), Z7 \
	VPANDD    Z7, Z10, Z7

// LOADW with GFNI: one VGF2P8AFFINEQB by the matrix in Z12 moves each
// byte's high nibble down and clears the rest, instead of a shift and an
// AND (4 vector uops less per block).
#define LOADWGF \
	VCVTPH2PS      (SI), Z8 \
	VCVTPH2PS      32(SI), Z9 \
	VMOVDQU64      64(SI), Z1 \
	VMOVDQU64      128(SI), Z3 \
	VMOVDQU64      192(SI), Z5 \
	VMOVDQU64      256(SI), Z7 \
	VPANDD         Z1, Z10, Z0 \
	VGF2P8AFFINEQB $0, Z12, Z1, Z1 \
	VPANDD         Z3, Z10, Z2 \
	VGF2P8AFFINEQB $0, Z12, Z3, Z3 \
	VPANDD         Z5, Z10, Z4 \
	VGF2P8AFFINEQB $0, Z12, Z5, Z5 \
	VPANDD         Z7, Z10, Z6 \
	VGF2P8AFFINEQB $0, Z12, Z7, Z7

// All 8 weight registers of a block against the tokens (DP = DP1..DP8):
// q8_1 quants start at byte 4 of the block.
#define CHUNKS(DP) NIBCHUNKS(DP, 4)

// FA += float(IA) * d_rows * d_a; FM += m_rows * s_a (token block at P).
#define FIN(P, IA, FA, FM) \
	MOVWLZX          (P), DX \
	VMULPS.BCST      (R13)(DX*4), Z8, Z11 \
	VCVTDQ2PS        IA, IA \
	VFMADD231PS      IA, Z11, FA \
	MOVWLZX          2(P), DX \
	VFMADD231PS.BCST (R13)(DX*4), Z9, FM

// Decode streams the weights from memory: prefetch the 5 cache lines of
// the block eight blocks ahead (groups are contiguous, so near a group's
// end this fetches the next group). MatVec from memory on this machine:
// 10.4 -> 12.6 GB/s (the GGUF row kernel: 10.4); no change in cache.
#define PF320 \
	PREFETCHT0 2560(SI) \
	PREFETCHT0 2624(SI) \
	PREFETCHT0 2688(SI) \
	PREFETCHT0 2752(SI) \
	PREFETCHT0 2816(SI)

// Common prologue: arguments, the nibble mask and GFNI matrix, zeroed
// float sums.
#define PROLOGUE \
	PACKED_ARGS \
	MOVL         $0x0f0f0f0f, DX \
	VPBROADCASTD DX, Z10 \
	MOVQ         $0x1020408000000000, DX \
	VPBROADCASTQ DX, Z12 \
	ZEROF

// FIN for each token. The m terms go into the float sums themselves, one
// block after another, in every form: a token's row then rounds the same
// whether it is computed alone or among 2, 4 or 8 tokens (batch
// invariance; the 8-token form has no registers for separate m sums).
#define T_FIN8(a, P, I, FA, t) FIN(P, I, FA, FA)
#define FINS8 ALL(REST8, T_FIN8, 0)
#define FINS2 \
	FIN(BX, Z24, Z16, Z16) \
	FIN(R8, Z25, Z17, Z17)
#define FINS4 \
	FINS2 \
	FIN(R9, Z26, Z18, Z18) \
	FIN(R10, Z27, Z19, Z19)
#define ADDS8
#define ADDS2
#define ADDS4

// The kernel for K = 8, 4 or 2 tokens (REST, PTRS, ZERO, DP, FINS, ADDS of
// that K) with the nibble split LW (LOADW or LOADWGF); labels are local to
// each TEXT.
#define BODY(LW, REST, PTRS, ZERO, DP, FINS, ADDS) \
	PROLOGUE \
	PTRS \
blk: \
	LW \
	ZERO \
	CHUNKS(DP) \
	FINS \
	ADDQ $320, SI \
	ALL(REST, T_NEXT, 36) \
	DECQ CX \
	JNZ  blk \
	STOREY \
	ADDS \
	VMOVUPS Z16, (AX) \
	REST(T_STORE, 0) \
	VZEROUPPER \
	RET

#define BODY8(LW) BODY(LW, REST8, PTRS8, ZERO8, DP8, FINS8, ADDS8)
#define BODY4(LW) BODY(LW, REST4, PTRS4, ZERO4, DP4, FINS4, ADDS4)
#define BODY2(LW) BODY(LW, REST2, PTRS2, ZERO2, DP2, FINS2, ADDS2)

// One token: the block's integer sum in two chains (low and high nibbles)
// added at the end, which halves the VPDPBUSD latency a block waits on
// (Dot from L1 ~5% faster).
#define BODY1(LW) \
	PROLOGUE \
blk: \
	PF320 \
	LW \
	VPXORD        Z24, Z24, Z24 \
	VPXORD        Z25, Z25, Z25 \
	VPDPBUSD.BCST 4(BX), Z0, Z24 \
	VPDPBUSD.BCST 20(BX), Z1, Z25 \
	VPDPBUSD.BCST 8(BX), Z2, Z24 \
	VPDPBUSD.BCST 24(BX), Z3, Z25 \
	VPDPBUSD.BCST 12(BX), Z4, Z24 \
	VPDPBUSD.BCST 28(BX), Z5, Z25 \
	VPDPBUSD.BCST 16(BX), Z6, Z24 \
	VPDPBUSD.BCST 32(BX), Z7, Z25 \
	VPADDD        Z25, Z24, Z24 \
	FIN(BX, Z24, Z16, Z16) \
	ADDQ $320, SI \
	ADDQ $36, BX \
	DECQ CX \
	JNZ  blk \
	STOREY \
	VMOVUPS Z16, (AX) \
	VZEROUPPER \
	RET

// func packedQ41Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot8AVX512(SB), NOSPLIT, $0-56
	BODY8(LOADW)

// func packedQ41Dot8GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot8GFNI(SB), NOSPLIT, $0-56
	BODY8(LOADWGF)

// func packedQ41Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot4AVX512(SB), NOSPLIT, $0-56
	BODY4(LOADW)

// func packedQ41Dot4GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot4GFNI(SB), NOSPLIT, $0-56
	BODY4(LOADWGF)

// func packedQ41Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot2AVX512(SB), NOSPLIT, $0-56
	BODY2(LOADW)

// func packedQ41Dot2GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot2GFNI(SB), NOSPLIT, $0-56
	BODY2(LOADWGF)

// func packedQ41Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot1AVX512(SB), NOSPLIT, $0-56
	BODY1(LOADW)

// func packedQ41Dot1GFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ41Dot1GFNI(SB), NOSPLIT, $0-56
	BODY1(LOADWGF)
