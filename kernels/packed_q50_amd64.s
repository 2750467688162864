// Packed q5_0 x q8_0 kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q50.go: one weight row per 32-bit lane. Per block the 4 nibble
// runs are split once for all the call's tokens into 8 registers of bytes
// (AND 0x0f, or shift and AND), and each gets 0x10 added where its fifth
// bit is set (KMOVQ of the stored mask, merge-masked VPADDB), giving the
// unsigned quants q in 0..31. Each VPDPBUSD takes the 4 matching signed
// q8_0 activation bytes of one token broadcast from memory. The weights'
// -16 is removed per block and token by subtracting 16*sum(x) (one
// VPDPBUSD of 0x10 bytes against two tokens' 32 activation bytes and a
// lane tree, through the stack) before the integer sum goes to float;
// the row sums then get float(isum)*(d_row*d_a).

#include "textflag.h"
#include "packed_amd64.h"

// Register use (K = tokens per call, at most 8):
//   SI weights, CX blocks left, R13 f16 table, DX f16 index,
//   BX R8 R9 R10 R11 R12 DI R14 the tokens' activations (current block),
//   Z0-Z7 the block's quants as bytes (Z(2c) values 4c.., Z(2c+1) values
//   16+4c..), Z8 row d, Z10-Z12 temporaries, Z13 0x10 bytes, Z14 0x0f
//   bytes, K1-K4 fifth-bit masks, Z16-Z23 float sums, Z24-Z31 integer
//   sums; 32t(SP): 16*sum(x) of token t's block (K >= 2).

// Chunk c's low (LO) and high (HI) quants with their fifth bits.
#define CHUNKW(c, LO, HI, KL, KH) \
	VPANDD   (96+64*c)(SI), Z14, LO \
	KMOVQ    (32+8*c)(SI), KL \
	VPSRLW   $4, (96+64*c)(SI), HI \
	VPANDD   HI, Z14, HI \
	KMOVQ    (64+8*c)(SI), KH \
	VPADDB   Z13, LO, KL, LO \
	VPADDB   Z13, HI, KH, HI

// The block's row scales in float, and its quants as bytes.
#define LOADW \
	VCVTPH2PS (SI), Z8 \
	CHUNKW(0, Z0, Z1, K1, K2) \
	CHUNKW(1, Z2, Z3, K3, K4) \
	CHUNKW(2, Z4, Z5, K1, K2) \
	CHUNKW(3, Z6, Z7, K3, K4)

// off(SP) = 16*sum(x) of the block of the token at PA (every dword of
// off..off+31) and off+32(SP) that of the token at PB.
#define BIAS2(PA, PB, off) \
	VMOVDQU      2(PA), Y10 \
	VINSERTI64X4 $1, 2(PB), Z10, Z10 \
	LANESUMS(Z13) \
	VSHUFI64X2   $0xb1, Z11, Z11, Z12 \
	VPADDD       Z12, Z11, Z11 \
	VMOVDQU64    Z11, off(SP)

// All 8 weight registers of a block against the tokens (DP = DP1..DP8):
// q8_0 quants start at byte 2 of the block.
#define CHUNKS(DP) NIBCHUNKS(DP, 2)

// FA += float(IA - 16*sum(x)) * d_rows * d_a (token block at P, its bias
// at boff(SP)).
#define FIN(P, IA, FA, boff) \
	MOVWLZX       (P), DX \
	VMULPS.BCST   (R13)(DX*4), Z8, Z11 \
	VPSUBD.BCST   boff(SP), IA, IA \
	VCVTDQ2PS     IA, IA \
	VFMADD231PS   IA, Z11, FA

// Decode streams the weights from memory: prefetch the 352-byte block
// eight blocks ahead (groups are contiguous, so near a group's end this
// fetches the next group).
#define PF352 \
	PREFETCHT0 2816(SI) \
	PREFETCHT0 2880(SI) \
	PREFETCHT0 2944(SI) \
	PREFETCHT0 3008(SI) \
	PREFETCHT0 3072(SI) \
	PREFETCHT0 3136(SI)

// Common prologue: arguments, constants, zeroed float sums.
#define PROLOGUE \
	PACKED_ARGS \
	MOVL         $0x0f0f0f0f, DX \
	VPBROADCASTD DX, Z14 \
	MOVL         $0x10101010, DX \
	VPBROADCASTD DX, Z13 \
	ZEROF

// The biases of the tokens, two at a time: token t's at 32t(SP).
#define BIASES2 BIAS2(BX, R8, 0)
#define BIASES4 \
	BIASES2 \
	BIAS2(R9, R10, 64)
#define BIASES8 \
	BIASES4 \
	BIAS2(R11, R12, 128) \
	BIAS2(DI, R14, 192)

#define T_FIN(a, P, I, FA, t) FIN(P, I, FA, 32*t)

// The kernel for K = 8, 4 or 2 tokens (REST, PTRS, BIASES, ZERO, DP of
// that K).
#define KERNEL(REST, PTRS, BIASES, ZERO, DP) \
	PROLOGUE \
	PTRS \
blk: \
	LOADW \
	BIASES \
	ZERO \
	CHUNKS(DP) \
	ALL(REST, T_FIN, 0) \
	ADDQ $352, SI \
	ALL(REST, T_NEXT, 34) \
	DECQ CX \
	JNZ  blk \
	STOREY \
	VMOVUPS Z16, (AX) \
	REST(T_STORE, 0) \
	VZEROUPPER \
	RET

// func packedQ50Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ50Dot8AVX512(SB), NOSPLIT, $256-56
	KERNEL(REST8, PTRS8, BIASES8, ZERO8, DP8)

// func packedQ50Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ50Dot4AVX512(SB), NOSPLIT, $128-56
	KERNEL(REST4, PTRS4, BIASES4, ZERO4, DP4)

// func packedQ50Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ50Dot2AVX512(SB), NOSPLIT, $64-56
	KERNEL(REST2, PTRS2, BIASES2, ZERO2, DP2)

// func packedQ50Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
// One token: the block's integer sum in two chains (low and high quants)
// added at the end, and the bias reduced in registers and broadcast.
TEXT ·packedQ50Dot1AVX512(SB), NOSPLIT, $0-56
	PROLOGUE

q50p1blk:
	PF352
	LOADW
	VMOVDQU       2(BX), Y10
	VPXORD        Y11, Y11, Y11
	VPDPBUSD      Y10, Y13, Y11
	VPXORD        Z24, Z24, Z24
	VPXORD        Z25, Z25, Z25
	VPDPBUSD.BCST 2(BX), Z0, Z24
	VPDPBUSD.BCST 18(BX), Z1, Z25
	VPDPBUSD.BCST 6(BX), Z2, Z24
	VPDPBUSD.BCST 22(BX), Z3, Z25
	VPDPBUSD.BCST 10(BX), Z4, Z24
	VPDPBUSD.BCST 26(BX), Z5, Z25
	VPDPBUSD.BCST 14(BX), Z6, Z24
	VPDPBUSD.BCST 30(BX), Z7, Z25
	VEXTRACTI128  $1, Y11, X12
	VPADDD        X12, X11, X11
	VPSHUFD       $0x4e, X11, X12
	VPADDD        X12, X11, X11
	VPSHUFD       $0xb1, X11, X12
	VPADDD        X12, X11, X11
	VPBROADCASTD  X11, Z12
	VPADDD        Z25, Z24, Z24
	VPSUBD        Z12, Z24, Z24
	MOVWLZX       (BX), DX
	VMULPS.BCST   (R13)(DX*4), Z8, Z11
	VCVTDQ2PS     Z24, Z24
	VFMADD231PS   Z24, Z11, Z16
	ADDQ          $352, SI
	ADDQ          $34, BX
	DECQ          CX
	JNZ           q50p1blk
	STOREY
	VMOVUPS       Z16, (AX)
	VZEROUPPER
	RET
