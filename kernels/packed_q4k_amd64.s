// Packed q4_K x q8_K kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q4k.go: one weight row per 32-bit lane, so each VPDPBUSD takes 4
// activation bytes of one token broadcast from memory and adds 16 rows x 4
// products; nothing is summed horizontally. Per sub-block and token the
// exact int32 dot is converted to float and accumulated times d*scale of
// each row (VPMULLD by the scales measured slower: it is two uops on the
// port VPDPBUSD needs); per block and token the mins term comes from the
// q8_K bsums (pair sums by VPHADDW, then VPDPWSSD against the rows' min
// pairs) and the token's accumulator gets dy * (sum - dmin*summ).
//
// Registers: Z0..Z3 weight operands (min pairs at block end), Z4+t the
// sub-block int32 dot of token t, Z12+t its block sum (float), Z20+t its
// total, Z28 d*scale of the sub-block, Z29 d, Z30 the GFNI nibble matrix
// (GFNI kernels), Z31 0x0f bytes; at block end Z4, Z5 temporaries and Z6
// dmin.
//
// Each kernel exists for 8, 4 and 1 tokens, and in two forms: AVX512 (F,
// BW, VL, VNNI) and GFNI (the same plus GFNI for the nibble shift).

#include "textflag.h"

#define PQ4K_BLOCK 2368
#define Q8K_BLOCK 292

// Z0..Z3 = the weight operands of the two 64-byte vectors at off(SI):
// low nibbles in Z0, Z2, high ones in Z1, Z3.
#define WHALF(off) \
	VMOVDQU64 off+0(SI), Z0 \
	VMOVDQU64 off+64(SI), Z2 \
	VPSRLW    $4, Z0, Z1 \
	VPSRLW    $4, Z2, Z3 \
	VPANDD    Z31, Z0, Z0 \
	VPANDD    Z31, Z1, Z1 \
	VPANDD    Z31, Z2, Z2 \
	VPANDD    Z31, Z3, Z3

// WHALF with GFNI: one VGF2P8AFFINEQB by the matrix in Z30 moves each
// byte's high nibble down and clears the rest, instead of a shift and an
// AND (one vector uop less per 64 bytes; 4-10% faster).
#define WHALFGF(off) \
	VMOVDQU64      off+0(SI), Z0 \
	VMOVDQU64      off+64(SI), Z2 \
	VGF2P8AFFINEQB $0, Z30, Z0, Z1 \
	VGF2P8AFFINEQB $0, Z30, Z2, Z3 \
	VPANDD         Z31, Z0, Z0 \
	VPANDD         Z31, Z2, Z2

// ACC += the dot of Z0..Z3 with 16 quants at q(P), 4 broadcast per lane.
#define DOT4(q, P, ACC) \
	VPDPBUSD.BCST q+0(P), Z0, ACC \
	VPDPBUSD.BCST q+4(P), Z1, ACC \
	VPDPBUSD.BCST q+8(P), Z2, ACC \
	VPDPBUSD.BCST q+12(P), Z3, ACC

// Decode streams the weights from memory: prefetch the 37 cache lines of
// the block two ahead, five per sub-block step.
#define PFQ4K(k) \
	PREFETCHT0 (2*2368+320*k)(SI) \
	PREFETCHT0 (2*2368+320*k+64)(SI) \
	PREFETCHT0 (2*2368+320*k+128)(SI) \
	PREFETCHT0 (2*2368+320*k+192)(SI) \
	PREFETCHT0 (2*2368+320*k+256)(SI)

// Z28 = d * scale of sub-block s, per row.
#define SUBSCALE(s) \
	VPMOVZXBD 64+16*s(SI), Z28 \
	VCVTDQ2PS Z28, Z28 \
	VMULPS    Z29, Z28, Z28

// FB += float(ACC) * Z28.
#define FOLD(ACC, FB) \
	VCVTDQ2PS   ACC, ACC \
	VFMADD231PS Z28, ACC, FB

// One sub-block k of the one-token kernel: its scales, the prefetch of
// the block two ahead, its two weight halves (at w and w+128) against the
// token's quants at q and q+16, folded into the row sums.
#define SUB1(k, w, q) \
	SUBSCALE(k) \
	PFQ4K(k) \
	VPXORD Z4, Z4, Z4 \
	PQ4K_WHALF(w) \
	DOT4(q, R8, Z4) \
	PQ4K_WHALF(w+128) \
	DOT4(q+16, R8, Z4) \
	FOLD(Z4, Z12)

// Block prologue: Z29 = d of the 16 rows.
#define BLKD \
	VCVTPH2PS 0(SI), Z29

// Block epilogue, all tokens: Z0..Z3 = the rows' min pairs (m0,m1),
// (m2,m3), (m4,m5), (m6,m7) as words, Z6 = dmin.
#define BLKMINS \
	VCVTPH2PS 32(SI), Z6 \
	VPMOVZXBW 192(SI), Z0 \
	VPMOVZXBW 224(SI), Z1 \
	VPMOVZXBW 256(SI), Z2 \
	VPMOVZXBW 288(SI), Z3

// Block epilogue of the token at P: FACC += dy * (FB - dmin*summ), summ =
// sum_s m_s * (bsum[2s] + bsum[2s+1]), and FB = 0. The pair sums go
// through the stack at tmp(SP) so VPDPWSSD can broadcast them. Clobbers
// Z4, Z5.
#define BLKEND(P, FB, FACC, tmp) \
	VMOVDQU          260(P), Y4 \
	VPHADDW          Y4, Y4, Y4 \
	VMOVDQU          Y4, tmp(SP) \
	VPXORD           Z5, Z5, Z5 \
	VPDPWSSD.BCST    tmp+0(SP), Z0, Z5 \
	VPDPWSSD.BCST    tmp+4(SP), Z1, Z5 \
	VPDPWSSD.BCST    tmp+16(SP), Z2, Z5 \
	VPDPWSSD.BCST    tmp+20(SP), Z3, Z5 \
	VCVTDQ2PS        Z5, Z5 \
	VFNMADD231PS     Z6, Z5, FB \
	VFMADD231PS.BCST 0(P), FB, FACC \
	VPXORD           FB, FB, FB

// Plain AVX-512 VNNI form.
#define PQ4K_DOT8 ·packedQ4KDot8AVX512
#define PQ4K_DOT4 ·packedQ4KDot4AVX512
#define PQ4K_DOT1 ·packedQ4KDot1AVX512
#define PQ4K_WHALF(off) WHALF(off)
#define PQ4K_SETUP
#include "packed_q4k_amd64.h"
#undef PQ4K_DOT8
#undef PQ4K_DOT4
#undef PQ4K_DOT1
#undef PQ4K_WHALF
#undef PQ4K_SETUP

// GFNI form: Z30 holds the affine matrix that moves a byte's high nibble
// down.
#define PQ4K_DOT8 ·packedQ4KDot8GFNI
#define PQ4K_DOT4 ·packedQ4KDot4GFNI
#define PQ4K_DOT1 ·packedQ4KDot1GFNI
#define PQ4K_WHALF(off) WHALFGF(off)
#define PQ4K_SETUP \
	MOVQ         $0x1020408000000000, AX \
	VPBROADCASTQ AX, Z30
#include "packed_q4k_amd64.h"
