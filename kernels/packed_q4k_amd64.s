// Packed q4_K x q8_K kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q4k.go: one weight row per 32-bit lane, so each VPDPBUSD takes 4
// activation bytes of one token broadcast from memory and adds 16 rows x 4
// products; nothing is summed horizontally. Per sub-block and token the
// int32 dot is multiplied by the rows' 6-bit scales (VPMULLD) into a block
// integer sum; per block and token the mins term comes from the q8_K bsums
// (pair sums by VPHADDW, then VPDPWSSD against the rows' min pairs), and
// the float accumulator gets dy * (d*sumi - dmin*summ).

#include "textflag.h"

// Block-relative offsets (see packed_q4k.go).
#define PQ4K_BLOCK 2368
#define Q8K_BLOCK 292

// Z0..Z7 = the 8 weight operands of the sub-block whose quants start at
// off(SI): Z(2k) the low nibbles (values 8k..8k+3), Z(2k+1) the high ones
// (8k+4..8k+7). Needs Z31 = 0x0f bytes.
#define WLOAD(off) \
	VMOVDQU64 off+0(SI), Z0 \
	VMOVDQU64 off+64(SI), Z2 \
	VMOVDQU64 off+128(SI), Z4 \
	VMOVDQU64 off+192(SI), Z6 \
	VPSRLW    $4, Z0, Z1 \
	VPSRLW    $4, Z2, Z3 \
	VPSRLW    $4, Z4, Z5 \
	VPSRLW    $4, Z6, Z7 \
	VPANDD    Z31, Z0, Z0 \
	VPANDD    Z31, Z1, Z1 \
	VPANDD    Z31, Z2, Z2 \
	VPANDD    Z31, Z3, Z3 \
	VPANDD    Z31, Z4, Z4 \
	VPANDD    Z31, Z5, Z5 \
	VPANDD    Z31, Z6, Z6 \
	VPANDD    Z31, Z7, Z7

// BLK += Z20 * (the sub-block's dot with the token's quants at q(P)),
// using ACC.
#define DOTSUB(q, P, ACC, BLK) \
	VPXORD        ACC, ACC, ACC \
	VPDPBUSD.BCST q+0(P), Z0, ACC \
	VPDPBUSD.BCST q+4(P), Z1, ACC \
	VPDPBUSD.BCST q+8(P), Z2, ACC \
	VPDPBUSD.BCST q+12(P), Z3, ACC \
	VPDPBUSD.BCST q+16(P), Z4, ACC \
	VPDPBUSD.BCST q+20(P), Z5, ACC \
	VPDPBUSD.BCST q+24(P), Z6, ACC \
	VPDPBUSD.BCST q+28(P), Z7, ACC \
	VPMULLD       Z20, ACC, ACC \
	VPADDD        ACC, BLK, BLK

// Weights and scale of sub-block s into Z0..Z7 and Z20.
#define SUBW(s) \
	WLOAD(320+256*s) \
	VPMOVZXBD 64+16*s(SI), Z20

// Block prologue: Z21 = d, Z22 = dmin of the 16 rows (as float32).
#define BLKD \
	VCVTPH2PS 0(SI), Z21 \
	VCVTPH2PS 32(SI), Z22

// Z0..Z3 = the rows' min pairs (m0,m1), (m2,m3), (m4,m5), (m6,m7) as words.
#define BLKMINS \
	VPMOVZXBW 192(SI), Z0 \
	VPMOVZXBW 224(SI), Z1 \
	VPMOVZXBW 256(SI), Z2 \
	VPMOVZXBW 288(SI), Z3

// Block epilogue of one token at P: FACC += dy * (d*BLK - dmin*summ),
// summ = sum_s m_s * (bsum[2s] + bsum[2s+1]). The 8 pair sums go through
// the stack at tmp(SP) so VPDPWSSD can broadcast them. Clobbers Z4..Z6.
#define BLKEND(P, BLK, FACC, tmp) \
	VMOVDQU           260(P), Y4 \
	VPHADDW           Y4, Y4, Y4 \
	VMOVDQU           Y4, tmp(SP) \
	VPXORD            Z5, Z5, Z5 \
	VPDPWSSD.BCST     tmp+0(SP), Z0, Z5 \
	VPDPWSSD.BCST     tmp+4(SP), Z1, Z5 \
	VPDPWSSD.BCST     tmp+16(SP), Z2, Z5 \
	VPDPWSSD.BCST     tmp+20(SP), Z3, Z5 \
	VCVTDQ2PS         BLK, Z6 \
	VMULPS            Z21, Z6, Z6 \
	VCVTDQ2PS         Z5, Z5 \
	VFNMADD231PS      Z22, Z5, Z6 \
	VFMADD231PS.BCST  0(P), Z6, FACC

#define SUB4(s) \
	SUBW(s) \
	DOTSUB(4+32*s, R8, Z8, Z12) \
	DOTSUB(4+32*s, R11, Z9, Z13) \
	DOTSUB(4+32*s, R12, Z10, Z14) \
	DOTSUB(4+32*s, R13, Z11, Z15)

// func packedQ4KDot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)
// y[t*ystride+r] = dot(row r of the packed group g, token t) for r < 16,
// t < 4; nb > 0 blocks; tokens xstride bytes apart, ystride in floats.
TEXT ·packedQ4KDot4AVX512(SB), NOSPLIT, $128-48
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         x+16(FP), R8
	MOVQ         xstride+24(FP), R9
	MOVQ         y+32(FP), DI
	MOVQ         ystride+40(FP), DX
	LEAQ         (R8)(R9*1), R11
	LEAQ         (R8)(R9*2), R12
	LEAQ         (R11)(R9*2), R13
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	VPXORD       Z16, Z16, Z16
	VPXORD       Z17, Z17, Z17
	VPXORD       Z18, Z18, Z18
	VPXORD       Z19, Z19, Z19

pq4k4blk:
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	SUB4(0)
	SUB4(1)
	SUB4(2)
	SUB4(3)
	SUB4(4)
	SUB4(5)
	SUB4(6)
	SUB4(7)
	BLKD
	BLKMINS
	BLKEND(R8, Z12, Z16, 0)
	BLKEND(R11, Z13, Z17, 32)
	BLKEND(R12, Z14, Z18, 64)
	BLKEND(R13, Z15, Z19, 96)
	ADDQ $PQ4K_BLOCK, SI
	ADDQ $Q8K_BLOCK, R8
	ADDQ $Q8K_BLOCK, R11
	ADDQ $Q8K_BLOCK, R12
	ADDQ $Q8K_BLOCK, R13
	DECQ CX
	JNZ  pq4k4blk

	VMOVUPS    Z16, (DI)
	VMOVUPS    Z17, (DI)(DX*4)
	LEAQ       (DI)(DX*8), DI
	VMOVUPS    Z18, (DI)
	VMOVUPS    Z19, (DI)(DX*4)
	VZEROUPPER
	RET

#define SUB1(s) \
	SUBW(s) \
	DOTSUB(4+32*s, R8, Z8, Z12)

// func packedQ4KDot1AVX512(w *byte, nb int, x *byte, y *float32)
// y[r] = dot(row r of the packed group g, the token at x) for r < 16; nb > 0.
TEXT ·packedQ4KDot1AVX512(SB), NOSPLIT, $32-32
	MOVQ         w+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         x+16(FP), R8
	MOVQ         y+24(FP), DI
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	VPXORD       Z16, Z16, Z16

pq4k1blk:
	VPXORD Z12, Z12, Z12
	SUB1(0)
	SUB1(1)
	SUB1(2)
	SUB1(3)
	SUB1(4)
	SUB1(5)
	SUB1(6)
	SUB1(7)
	BLKD
	BLKMINS
	BLKEND(R8, Z12, Z16, 0)
	ADDQ $PQ4K_BLOCK, SI
	ADDQ $Q8K_BLOCK, R8
	DECQ CX
	JNZ  pq4k1blk

	VMOVUPS    Z16, (DI)
	VZEROUPPER
	RET
