// Packed q6_K kernels (AVX-512 F/BW + VNNI) over the q6_K.r16.v2 layout of
// packed_q6k.go: each 32-bit lane is one of 16 weight rows, so a token's
// four q8_K bytes are broadcast by VPDPBUSD's memory operand to all rows
// and nothing is summed horizontally. Per sub-block of 16 values and token
// the integer sum of (q-32)*x is exact: it starts from -32*bsum (prepared
// per block on the stack, offset by 2^23+2^22 for an exact conversion to
// float) and adds four VPDPBUSD; it is then scaled in float by d*sc (FMA)
// into the block sum, which the token's d scales into the total.

#include "textflag.h"

// Register use. Per token t (up to 8): TOT total (Z0+t), S sub-block sum
// (Z8+t), B block sum (Z16+t), X activation pointer (R8+t), stack slot
// 64t(SP) with the block's 16 initial sub-block sums. Z24 weight operand,
// Z25 temporary, Z26 0x03 bytes, Z27 0x3f bytes, Z28 0x0f bytes, Z29 d,
// Z30 d*sc, Z31 0x4b400000 (12582912.0); SI block, AX sub-block record,
// DX 4*sub-block, CX blocks left.
//
// Each sub-block prefetches the 256 bytes one packed block (3360 bytes)
// ahead: decode streams the packed matrix once, and MatVec measured 10-15%
// faster with it (17-20 -> 22-25 GB/s on 1 and 2 threads).

#define FOR1(M) M(Z0, Z8, Z16, R8, 0)
#define FOR2(M) FOR1(M); M(Z1, Z9, Z17, R9, 64)
#define FOR3(M) FOR2(M); M(Z2, Z10, Z18, R10, 128)
#define FOR4(M) FOR3(M); M(Z3, Z11, Z19, R11, 192)
#define FOR5(M) FOR4(M); M(Z4, Z12, Z20, R12, 256)
#define FOR6(M) FOR5(M); M(Z5, Z13, Z21, R13, 320)
#define FOR7(M) FOR6(M); M(Z6, Z14, Z22, R14, 384)
#define FOR8(M) FOR7(M); M(Z7, Z15, Z23, R15, 448)

#define T_ZERO(TOT, S, B, X, SOFF) VPXORD TOT, TOT, TOT

// Block start: the stack slot gets 0x4b400000 - 32*bsum for each of the 16
// sub-blocks, B = 0.
#define T_PREP(TOT, S, B, X, SOFF) \
	VPMOVSXWD    260(X), Z24 \
	VPSLLD       $5, Z24, Z24 \
	VPSUBD       Z24, Z31, Z24 \
	VMOVDQU32    Z24, SOFF(SP) \
	VPXORD       B, B, B

#define T_INIT(TOT, S, B, X, SOFF) VPBROADCASTD SOFF(SP)(DX*1), S
#define T_DOT0(TOT, S, B, X, SOFF) VPDPBUSD.BCST 4(X)(DX*4), Z24, S
#define T_DOT1(TOT, S, B, X, SOFF) VPDPBUSD.BCST 8(X)(DX*4), Z24, S
#define T_DOT2(TOT, S, B, X, SOFF) VPDPBUSD.BCST 12(X)(DX*4), Z24, S
#define T_DOT3(TOT, S, B, X, SOFF) VPDPBUSD.BCST 16(X)(DX*4), Z24, S

// S holds 0x4b400000 + sum, |sum| <= 2^16: as a float that is exactly
// 12582912 + sum, so subtracting 12582912 converts it exactly (measured 3%
// faster than VCVTDQ2PS, which shares VPDPBUSD's port on some cores).
#define T_SCALE(TOT, S, B, X, SOFF) \
	VSUBPS      Z31, S, S \
	VFMADD231PS Z30, S, B

// Block end: TOT += B * d(token); next block of the token.
#define T_END(TOT, S, B, X, SOFF) \
	VFMADD231PS.BCST (X), B, TOT \
	ADDQ             $292, X

#define T_STORE(TOT, S, B, X, SOFF) \
	VMOVUPS TOT, (DI) \
	ADDQ    BX, DI

// The four weight operands of the sub-block record at AX: A, B and C & 0x3f,
// then (A >> 6) with bits 2..7 taken from (B >> 4), bits 4..7 of that from
// (C >> 2) (VPTERNLOGD 0xe4: the third operand's set bits choose the
// destination's bits, the others the second operand's), & 0x3f.
#define OPERANDS(FOR) \
	VPANDD            (AX), Z27, Z24 \
	FOR(T_DOT0) \
	VPANDD            64(AX), Z27, Z24 \
	FOR(T_DOT1) \
	VPANDD            128(AX), Z27, Z24 \
	FOR(T_DOT2) \
	VPSRLD            $6, (AX), Z24 \
	VPSRLD            $4, 64(AX), Z25 \
	VPTERNLOGD        $0xe4, Z26, Z25, Z24 \
	VPSRLD            $2, 128(AX), Z25 \
	VPTERNLOGD        $0xe4, Z28, Z25, Z24 \
	VPANDD            Z27, Z24, Z24 \
	FOR(T_DOT3)

#define KERNEL(FOR) \
	MOVQ         w+0(FP), SI \
	MOVQ         x+8(FP), R8 \
	MOVQ         xstride+16(FP), BX \
	LEAQ         (R8)(BX*1), R9 \
	LEAQ         (R9)(BX*1), R10 \
	LEAQ         (R10)(BX*1), R11 \
	LEAQ         (R11)(BX*1), R12 \
	LEAQ         (R12)(BX*1), R13 \
	LEAQ         (R13)(BX*1), R14 \
	LEAQ         (R14)(BX*1), R15 \
	MOVQ         nb+24(FP), CX \
	MOVL         $0x03030303, AX \
	VPBROADCASTD AX, Z26 \
	MOVL         $0x3f3f3f3f, AX \
	VPBROADCASTD AX, Z27 \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z28 \
	MOVL         $0x4b400000, AX \
	VPBROADCASTD AX, Z31 \
	FOR(T_ZERO) \
block: \
	FOR(T_PREP) \
	VCVTPH2PS    3328(SI), Z29 \
	MOVQ         SI, AX \
	XORQ         DX, DX \
sub: \
	PREFETCHT0   3360(AX) \
	PREFETCHT0   3424(AX) \
	PREFETCHT0   3488(AX) \
	PREFETCHT0   3552(AX) \
	VPMOVSXBD    192(AX), Z30 \
	VCVTDQ2PS    Z30, Z30 \
	VMULPS       Z29, Z30, Z30 \
	FOR(T_INIT) \
	OPERANDS(FOR) \
	FOR(T_SCALE) \
	ADDQ         $208, AX \
	ADDQ         $4, DX \
	CMPQ         DX, $64 \
	JNE          sub \
	FOR(T_END) \
	ADDQ         $3360, SI \
	DECQ         CX \
	JNZ          block \
	MOVQ         y+32(FP), DI \
	MOVQ         ystride+40(FP), BX \
	SHLQ         $2, BX \
	FOR(T_STORE) \
	VZEROUPPER \
	RET

// func packedQ6KDot1(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot1(SB), 0, $512-48
	KERNEL(FOR1)

// func packedQ6KDot2(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot2(SB), 0, $512-48
	KERNEL(FOR2)

// func packedQ6KDot3(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot3(SB), 0, $512-48
	KERNEL(FOR3)

// func packedQ6KDot4(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot4(SB), 0, $512-48
	KERNEL(FOR4)

// func packedQ6KDot5(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot5(SB), 0, $512-48
	KERNEL(FOR5)

// func packedQ6KDot6(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot6(SB), 0, $512-48
	KERNEL(FOR6)

// func packedQ6KDot7(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot7(SB), 0, $512-48
	KERNEL(FOR7)

// func packedQ6KDot8(w, x *byte, xstride, nb int, y *float32, ystride int)
TEXT ·packedQ6KDot8(SB), 0, $512-48
	KERNEL(FOR8)
