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
// Each kernel exists for every token count from 1 to 8 (a batched decode
// step of K sequences makes one call per group, with no single-token
// calls for a remainder), and in two forms: AVX512 (F, BW, VL, VNNI) and
// GFNI (the same plus GFNI for the nibble shift), all from the one body
// KERNEL.

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

// Decode, of one sequence or of several in one batched step, streams the
// weights from memory: prefetch the 37 cache lines of the block two ahead,
// five per sub-block step (without it the 8-token kernel ran 3x slower from
// memory than from L2: the hardware prefetchers stop at page boundaries).
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

// One sub-block k of a kernel over the tokens ALL(REST, ...): its
// scales, PF(k) (the prefetch of the block two ahead), its two weight
// halves (at w and w+128)
// against each token's quants at q and q+16, folded into the row sums.
#define SUBN(k, w, q, REST, PF, WHALF) \
	SUBSCALE(k) \
	PF(k) \
	ALL(REST, T_ZEROI, 0) \
	WHALF(w) \
	ALL(REST, T_DOT, q) \
	WHALF(w+128) \
	ALL(REST, T_DOT, q+16) \
	ALL(REST, T_FOLD, 0)

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

// The tokens. Token t: P its q8_K pointer (PREV the one before it), I its
// sub-block dot (Z4+t), FB its block sum (Z12+t), FA its total (Z20+t),
// tmp its pair-sum slot 32t(SP); a is the offset a macro applies to it.
// ALL(REST, M, a) is token 0 then the REST: REST1 .. REST8.
#define ALL(REST, M, a) M(a, R8, R8, Z4, Z12, Z20, 0); REST(M, a)
#define REST1(M, a)
#define REST2(M, a) M(a, R9, R8, Z5, Z13, Z21, 32)
#define REST3(M, a) REST2(M, a); M(a, R10, R9, Z6, Z14, Z22, 64)
#define REST4(M, a) REST3(M, a); M(a, R11, R10, Z7, Z15, Z23, 96)
#define REST5(M, a) REST4(M, a); M(a, R12, R11, Z8, Z16, Z24, 128)
#define REST6(M, a) REST5(M, a); M(a, R13, R12, Z9, Z17, Z25, 160)
#define REST7(M, a) REST6(M, a); M(a, AX, R13, Z10, Z18, Z26, 192)
#define REST8(M, a) REST7(M, a); M(a, BX, AX, Z11, Z19, Z27, 224)

#define T_PTR(a, P, PREV, I, FB, FA, tmp) LEAQ (PREV)(DX*1), P
#define T_ZERO(a, P, PREV, I, FB, FA, tmp) VPXORD FB, FB, FB; VPXORD FA, FA, FA
#define T_ZEROI(a, P, PREV, I, FB, FA, tmp) VPXORD I, I, I
#define T_DOT(a, P, PREV, I, FB, FA, tmp) DOT4(a, P, I)
#define T_FOLD(a, P, PREV, I, FB, FA, tmp) FOLD(I, FB)
#define T_BLKEND(a, P, PREV, I, FB, FA, tmp) BLKEND(P, FB, FA, tmp)
#define T_NEXT(a, P, PREV, I, FB, FA, tmp) ADDQ $Q8K_BLOCK, P
#define T_STORE(a, P, PREV, I, FB, FA, tmp) LEAQ (DI)(DX*4), DI; VMOVUPS FA, (DI)

// Arguments of the several-token kernels (w, nb, x, xstride, y, ystride)
// and of the one-token kernel (w, nb, x, y).
#define ARGSN(REST) \
	MOVQ w+0(FP), SI \
	MOVQ nb+8(FP), CX \
	MOVQ x+16(FP), R8 \
	MOVQ xstride+24(FP), DX \
	REST(T_PTR, 0) \
	MOVQ y+32(FP), DI \
	MOVQ ystride+40(FP), DX
#define ARGS1 \
	MOVQ w+0(FP), SI \
	MOVQ nb+8(FP), CX \
	MOVQ x+16(FP), R8 \
	MOVQ y+24(FP), DI

// The constants of the nibble split beyond Z31: none for WHALF; for
// WHALFGF, Z30 holds the affine matrix that moves a byte's high nibble
// down.
#define NOSETUP
#define GFSETUP \
	MOVQ         $0x1020408000000000, AX \
	VPBROADCASTQ AX, Z30

// One kernel: the tokens ALL(REST, ...) against nb > 0 blocks of the
// packed group at w; y[t*ystride+r] = dot(row r, token t) for r < 16.
#define KERNEL(ARGS, REST, PF, WHALF, SETUP) \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31 \
	SETUP \
	ARGS \
	ALL(REST, T_ZERO, 0) \
block: \
	BLKD \
	SUBN(0, 320, 4, REST, PF, WHALF) \
	SUBN(1, 576, 36, REST, PF, WHALF) \
	SUBN(2, 832, 68, REST, PF, WHALF) \
	SUBN(3, 1088, 100, REST, PF, WHALF) \
	SUBN(4, 1344, 132, REST, PF, WHALF) \
	SUBN(5, 1600, 164, REST, PF, WHALF) \
	SUBN(6, 1856, 196, REST, PF, WHALF) \
	SUBN(7, 2112, 228, REST, PF, WHALF) \
	BLKMINS \
	ALL(REST, T_BLKEND, 0) \
	ADDQ $PQ4K_BLOCK, SI \
	ALL(REST, T_NEXT, 0) \
	DECQ CX \
	JNZ  block \
	VMOVUPS Z20, (DI) \
	REST(T_STORE, 0) \
	VZEROUPPER \
	RET

// The kernels for K = 1..8 tokens, AVX512 and GFNI:
// func packedQ4KDotKAVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)
// func packedQ4KDotKGFNI(w *byte, nb int, x *byte, xstride int, y *float32, ystride int)
// for K >= 2 (tokens xstride bytes apart, ystride in floats), and
// func packedQ4KDot1AVX512(w *byte, nb int, x *byte, y *float32)
// func packedQ4KDot1GFNI(w *byte, nb int, x *byte, y *float32)
// The frame holds the pair sums, 32 bytes per token at 32t(SP).
TEXT ·packedQ4KDot1AVX512(SB), NOSPLIT, $32-32
	KERNEL(ARGS1, REST1, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot1GFNI(SB), NOSPLIT, $32-32
	KERNEL(ARGS1, REST1, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot2AVX512(SB), NOSPLIT, $64-48
	KERNEL(ARGSN(REST2), REST2, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot2GFNI(SB), NOSPLIT, $64-48
	KERNEL(ARGSN(REST2), REST2, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot3AVX512(SB), NOSPLIT, $96-48
	KERNEL(ARGSN(REST3), REST3, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot3GFNI(SB), NOSPLIT, $96-48
	KERNEL(ARGSN(REST3), REST3, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot4AVX512(SB), NOSPLIT, $128-48
	KERNEL(ARGSN(REST4), REST4, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot4GFNI(SB), NOSPLIT, $128-48
	KERNEL(ARGSN(REST4), REST4, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot5AVX512(SB), NOSPLIT, $160-48
	KERNEL(ARGSN(REST5), REST5, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot5GFNI(SB), NOSPLIT, $160-48
	KERNEL(ARGSN(REST5), REST5, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot6AVX512(SB), NOSPLIT, $192-48
	KERNEL(ARGSN(REST6), REST6, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot6GFNI(SB), NOSPLIT, $192-48
	KERNEL(ARGSN(REST6), REST6, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot7AVX512(SB), NOSPLIT, $224-48
	KERNEL(ARGSN(REST7), REST7, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot7GFNI(SB), NOSPLIT, $224-48
	KERNEL(ARGSN(REST7), REST7, PFQ4K, WHALFGF, GFSETUP)

TEXT ·packedQ4KDot8AVX512(SB), NOSPLIT, $256-48
	KERNEL(ARGSN(REST8), REST8, PFQ4K, WHALF, NOSETUP)

TEXT ·packedQ4KDot8GFNI(SB), NOSPLIT, $256-48
	KERNEL(ARGSN(REST8), REST8, PFQ4K, WHALFGF, GFSETUP)
