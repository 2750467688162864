// Packed q8_0 x q8_0 kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q80.go: one weight row per 32-bit lane, quants stored as q+128.
// Per block the 8 weight registers (16 rows x 4 values each) are loaded
// once for all the call's tokens; each VPDPBUSD takes 4 signed activation
// bytes of one token broadcast from memory, so nothing is summed across
// rows. The bias is removed by starting each token's integer sum of a block
// at -128*sum(x). Those sums are made 16 blocks at a time per token (one
// VPDPBUSD of 0x80 bytes per two blocks, then a VPERMT2D tree that leaves
// block j's sum in lane j) into a stack table, so the block loop only adds
// a broadcast load; per block and token the float accumulator then gets
// float(sum) * d_row * d_token. Blocks past the last whole 16 take the
// sums inline (INIT1/INIT2), a few more instructions per block.

#include "textflag.h"
#include "packed_amd64.h"

// Register use (K = tokens per call, at most 8):
//   SI weights, CX block pairs left, R13 f16 table, DX scale index,
//   BX R8 R9 R10 R11 R12 DI R14 the tokens' activations,
//   AX the sums table row of the block pair (0(SP): 64 bytes per token,
//   int32 -128*sum(x) of block j at 4j), 512(SP) whole 16-block chunks left,
//   Z0-Z7 weights of the block, Z8 row scales, Z9 0x80 bytes, Z10-Z13
//   temporaries, Z14/Z15 the even/odd VPERMT2D indices, Z16-Z23 float sums,
//   Z24-Z31 integer sums.

// Z(u) = 128 * the 8 four-byte sums of blocks 2u (lanes 0-7) and 2u+1
// (lanes 8-15) of the token at P (off = 68u).
#define UNIT(P, off, Yu, Zu) \
	VMOVDQU      (off+2)(P), Y10 \
	VINSERTI64X4 $1, (off+36)(P), Z10, Z10 \
	VPXORD       Zu, Zu, Zu \
	VPDPBUSD     Z10, Z9, Zu

// A[i] = C[2i] + C[2i+1] with C = A:B (32 lanes), using T.
#define COMB(A, B, T) \
	VMOVDQA64 A, T \
	VPERMT2D  B, Z14, T \
	VPERMT2D  B, Z15, A \
	VPADDD    T, A, A

// soff(SP) = -128*sum(x) of the 16 blocks at P, block j in lane j.
#define SUMS16(P, soff) \
	UNIT(P, 0, Y0, Z0) \
	UNIT(P, 68, Y1, Z1) \
	UNIT(P, 136, Y2, Z2) \
	UNIT(P, 204, Y3, Z3) \
	UNIT(P, 272, Y4, Z4) \
	UNIT(P, 340, Y5, Z5) \
	UNIT(P, 408, Y6, Z6) \
	UNIT(P, 476, Y7, Z7) \
	COMB(Z0, Z1, Z10) \
	COMB(Z2, Z3, Z11) \
	COMB(Z4, Z5, Z12) \
	COMB(Z6, Z7, Z13) \
	COMB(Z0, Z2, Z10) \
	COMB(Z4, Z6, Z11) \
	VMOVDQA64 Z0, Z10 \
	VPERMT2D  Z4, Z14, Z10 \
	VPERMT2D  Z4, Z15, Z0 \
	VPXORD    Z11, Z11, Z11 \
	VPSUBD    Z10, Z11, Z11 \
	VPSUBD    Z0, Z11, Z11 \
	VMOVDQU32 Z11, (soff)(SP)

// IA = -128*sum(x) of the block(s) in Z10 (one in each 256-bit half),
// the lower half's sum broadcast to all lanes; Z11 keeps both.
#define NEGSUM(IA) \
	LANESUMS(Z9) \
	VSHUFI32X4 $0xb1, Z11, Z11, Z12 \
	VPXORD     Z13, Z13, Z13 \
	VPSUBD     Z11, Z13, Z11 \
	VPSUBD     Z12, Z11, Z11 \
	VSHUFI32X4 $0x00, Z11, Z11, IA

// IA, IB = -128*sum(x) of the block at xoff of the tokens at PA and PB,
// broadcast to all lanes.
#define INIT2(xoff, PA, PB, IA, IB) \
	VMOVDQU      (xoff+2)(PA), Y10 \
	VINSERTI64X4 $1, (xoff+2)(PB), Z10, Z10 \
	NEGSUM(IA) \
	VSHUFI32X4   $0xaa, Z11, Z11, IB

// INIT2 for one token (the upper half of Z10 is zero).
#define INIT1(xoff, PA, IA) \
	VMOVDQU (xoff+2)(PA), Y10 \
	NEGSUM(IA)

// FA += float(IA) * d_rows * d_token (token at P, block at xoff).
#define FIN(xoff, P, IA, FA) \
	MOVWLZX          (xoff)(P), DX \
	VMULPS.BCST      (R13)(DX*4), Z8, Z13 \
	VCVTDQ2PS        IA, IA \
	VFMADD231PS      IA, Z13, FA

// The block's row scales and weights.
#define LOADW(doff, qoff) \
	VCVTPH2PS (doff)(SI), Z8 \
	VMOVDQU64 (qoff)(SI), Z0 \
	VMOVDQU64 (qoff+64)(SI), Z1 \
	VMOVDQU64 (qoff+128)(SI), Z2 \
	VMOVDQU64 (qoff+192)(SI), Z3 \
	VMOVDQU64 (qoff+256)(SI), Z4 \
	VMOVDQU64 (qoff+320)(SI), Z5 \
	VMOVDQU64 (qoff+384)(SI), Z6 \
	VMOVDQU64 (qoff+448)(SI), Z7

// All 8 weight registers of a block against the tokens (DP = DP1..DP8).
#define CHUNKS(DP, xoff) \
	DP(xoff+2, Z0) \
	DP(xoff+6, Z1) \
	DP(xoff+10, Z2) \
	DP(xoff+14, Z3) \
	DP(xoff+18, Z4) \
	DP(xoff+22, Z5) \
	DP(xoff+26, Z6) \
	DP(xoff+30, Z7)

// Token t's row of the sums table is 64t bytes into it.
#define T_SUMS(a, P, I, FA, t) SUMS16(P, 64*t)
#define T_BCAST(a, P, I, FA, t) VPBROADCASTD (a+64*t)(AX), I
#define T_FIN(a, P, I, FA, t) FIN(a, P, I, FA)

// The integer sums of the block at xoff started inline, two tokens at a
// time.
#define INITS1(xoff) INIT1(xoff, BX, Z24)
#define INITS2(xoff) INIT2(xoff, BX, R8, Z24, Z25)
#define INITS4(xoff) \
	INITS2(xoff) \
	INIT2(xoff, R9, R10, Z26, Z27)
#define INITS8(xoff) \
	INITS4(xoff) \
	INIT2(xoff, R11, R12, Z28, Z29) \
	INIT2(xoff, DI, R14, Z30, Z31)

// One block of the tokens: LOADW, integer sums started by INITS (BLK) or
// from the sums table at soff(AX) (BLKS), the 8 weight registers (DP =
// DP1..DP8), FIN per token.
#define BLK(doff, qoff, xoff, REST, INITS, DP) \
	LOADW(doff, qoff) \
	INITS(xoff) \
	CHUNKS(DP, xoff) \
	ALL(REST, T_FIN, xoff)

#define BLKS(doff, qoff, xoff, soff, REST, DP) \
	LOADW(doff, qoff) \
	ALL(REST, T_BCAST, soff) \
	CHUNKS(DP, xoff) \
	ALL(REST, T_FIN, xoff)

// Decode (one token, or a batched step of several sequences) streams the
// weights from memory: prefetch the 17 cache lines of the block pair four
// pairs ahead (+5-7% from memory on this machine for one token; it costs
// ~10% when the group is already in L2, which decode of a real model never
// sees).
#define PF1088 \
	PREFETCHT0 (4352)(SI) \
	PREFETCHT0 (4416)(SI) \
	PREFETCHT0 (4480)(SI) \
	PREFETCHT0 (4544)(SI) \
	PREFETCHT0 (4608)(SI) \
	PREFETCHT0 (4672)(SI) \
	PREFETCHT0 (4736)(SI) \
	PREFETCHT0 (4800)(SI) \
	PREFETCHT0 (4864)(SI) \
	PREFETCHT0 (4928)(SI) \
	PREFETCHT0 (4992)(SI) \
	PREFETCHT0 (5056)(SI) \
	PREFETCHT0 (5120)(SI) \
	PREFETCHT0 (5184)(SI) \
	PREFETCHT0 (5248)(SI) \
	PREFETCHT0 (5312)(SI) \
	PREFETCHT0 (5376)(SI)

// Common prologue: arguments, constants, zeroed float sums.
#define PROLOGUE \
	PACKED_ARGS \
	MOVL         $0x80808080, DX \
	VPBROADCASTD DX, Z9 \
	VMOVDQU64    ·p80Perm+0(SB), Z14 \
	VMOVDQU64    ·p80Perm+64(SB), Z15 \
	ZEROF

// One kernel: whole 16-block chunks with the sums table, then block
// pairs and a lone block with the sums inline.
#define KERNEL(REST, PTRS, INITS, DP, PF) \
	PROLOGUE \
	PTRS \
	MOVQ CX, DX \
	SHRQ $4, DX \
	MOVQ DX, 512(SP) \
	JZ   tail \
chunk: \
	ALL(REST, T_SUMS, 0) \
	MOVQ SP, AX \
	MOVQ $8, CX \
pair: \
	PF \
	BLKS(0, 64, 0, 0, REST, DP) \
	BLKS(32, 576, 34, 4, REST, DP) \
	ADDQ $1088, SI \
	ALL(REST, T_NEXT, 68) \
	ADDQ $8, AX \
	DECQ CX \
	JNZ  pair \
	DECQ 512(SP) \
	JNZ  chunk \
tail: \
	MOVQ nb+8(FP), CX \
	ANDQ $15, CX \
	SHRQ $1, CX \
	JZ   lone \
tpair: \
	PF \
	BLK(0, 64, 0, REST, INITS, DP) \
	BLK(32, 576, 34, REST, INITS, DP) \
	ADDQ $1088, SI \
	ALL(REST, T_NEXT, 68) \
	DECQ CX \
	JNZ  tpair \
lone: \
	TESTQ $1, nb+8(FP) \
	JZ    store \
	BLK(0, 32, 0, REST, INITS, DP) \
store: \
	STOREY \
	VMOVUPS Z16, (AX) \
	REST(T_STORE, 0) \
	VZEROUPPER \
	RET

// func packedQ80Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot8AVX512(SB), 0, $520-56
	KERNEL(REST8, PTRS8, INITS8, DP8, PF1088)

// func packedQ80Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot4AVX512(SB), 0, $520-56
	KERNEL(REST4, PTRS4, INITS4, DP4, PF1088)

// func packedQ80Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot2AVX512(SB), 0, $520-56
	KERNEL(REST2, PTRS2, INITS2, DP2, PF1088)

// func packedQ80Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot1AVX512(SB), 0, $520-56
	KERNEL(REST1, PTRS1, INITS1, DP1, PF1088)
