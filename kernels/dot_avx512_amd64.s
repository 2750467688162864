// AVX-512 (F, BW, VL) + VNNI row-dot kernels: two 32-value blocks per
// 512-bit register, integer dot products with VPDPBUSD (unsigned x signed
// bytes, four products summed into an int32 lane, no saturation). Same row
// loop, prefetching and float accumulation scheme as the AVX2 kernels.

#include "textflag.h"
#include "dot_amd64.h"

// Z2 = per-lane product of the scales of two consecutive blocks (at off and
// off+stride of AX and BX), looked up in the f16 table at R13: lanes 0-7
// block 0, lanes 8-15 block 1.
#define SCALES2(woff, wstride, xoff, xstride) \
	MOVWLZX      woff(AX), DX \
	MOVWLZX      xoff(BX), R12 \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VBROADCASTSS (R13)(R12*4), Y3 \
	VMULPS       Y3, Y2, Y2 \
	MOVWLZX      (woff+wstride)(AX), DX \
	MOVWLZX      (xoff+xstride)(BX), R12 \
	VBROADCASTSS (R13)(DX*4), Y3 \
	VBROADCASTSS (R13)(R12*4), Y4 \
	VMULPS       Y4, Y3, Y3 \
	VINSERTF64X4 $1, Y3, Z2, Z2

// Y2 = product of one block's scales, broadcast.
#define SCALES1(woff, xoff) \
	MOVWLZX      woff(AX), DX \
	MOVWLZX      xoff(BX), R12 \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VBROADCASTSS (R13)(R12*4), Y3 \
	VMULPS       Y3, Y2, Y2

// The q8_0 and q4_0 row kernels: CONSTS, then per row two blocks a step
// (PAIR, 2*wb weight bytes, with the prefetch PF) into Z0, folded to Y0,
// and ONE for an odd last block.
#define ROWS512(CONSTS, PAIR, ONE, wb, PF) \
	MOVQ         f16+48(FP), R13 \
	MOVQ         w+0(FP), SI \
	MOVQ         nrows+16(FP), R9 \
	MOVQ         y+40(FP), R11 \
	CONSTS \
	TESTQ        R9, R9 \
	JLE          done \
row: \
	MOVQ   SI, AX \
	MOVQ   x+24(FP), BX \
	MOVQ   nb+32(FP), CX \
	VPXORD Z0, Z0, Z0 \
	CMPQ   CX, $2 \
	JLT    fold \
pair: \
	PF \
	PAIR \
	ADDQ         $(2*wb), AX \
	ADDQ         $68, BX \
	SUBQ         $2, CX \
	CMPQ         CX, $2 \
	JGE          pair \
fold: \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0 \
	TESTQ         CX, CX \
	JZ            sum \
	ONE \
sum: \
	HSUM(Y0, X0, X1) \
	ROWNEXT(row) \
done: \
	VZEROUPPER \
	RET

// q8_0: the activations get the weights' signs (x * sign(w): VPSUBB from
// zero in Z31 where the weight is negative), VPDPBUSD against |w|.
#define Q80_CONSTSZ VPXORD Z31, Z31, Z31

// Two blocks of signed weight quants (Z4) against two q8_0 blocks at BX,
// times the scales Z2, into Z0 (needs Z31 = 0).
#define SIGNED_PAIRZ \
	VMOVDQU      2(BX), Y5 \
	VINSERTI64X4 $1, 36(BX), Z5, Z5 \
	VPABSB       Z4, Z6 \
	VPMOVB2M     Z4, K1 \
	VPSUBB       Z5, Z31, K1, Z5 \
	VPXORD       Z7, Z7, Z7 \
	VPDPBUSD     Z5, Z6, Z7 \
	VCVTDQ2PS    Z7, Z7 \
	VFMADD231PS  Z7, Z2, Z0

#define Q80_PAIRZ \
	SCALES2(0, 34, 0, 34) \
	VMOVDQU      2(AX), Y4 \
	VINSERTI64X4 $1, 36(AX), Z4, Z4 \
	SIGNED_PAIRZ
#define Q80_ONEZ \
	SCALES1(0, 0) \
	VMOVDQU       2(AX), Y4 \
	VMOVDQU       2(BX), Y5 \
	VPABSB        Y4, Y6 \
	VPMOVB2M      Y4, K1 \
	VPSUBB        Y5, Y31, K1, Y5 \
	VPXORD        Y7, Y7, Y7 \
	VPDPBUSD      Y5, Y6, Y7 \
	VCVTDQ2PS     Y7, Y7 \
	VFMADD231PS   Y7, Y2, Y0
#define Q80_PFZ \
	PREFETCHT0 2048(AX) \
	PREFETCHT0 2112(AX)

// func dotQ8_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotQ8_0RowsAVX512(SB), NOSPLIT, $0-56
	ROWS512(Q80_CONSTSZ, Q80_PAIRZ, Q80_ONEZ, 34, Q80_PFZ)

// q4_0: quants q-8 with q in 0..15: dot = sum(q*x) - sum(8*x), both by
// VPDPBUSD (Z14 = 0x0f bytes, Z13 = 0x08 bytes).
#define Q40_CONSTSZ \
	MOVL         $0x0f0f0f0f, DX \
	VPBROADCASTD DX, Z14 \
	MOVL         $0x08080808, DX \
	VPBROADCASTD DX, Z13
#define Q40_PAIRZ \
	SCALES2(0, 18, 0, 34) \
	NIBBLES2(2, 18) \
	VMOVDQU      2(BX), Y5 \
	VINSERTI64X4 $1, 36(BX), Z5, Z5 \
	VPXORD       Z7, Z7, Z7 \
	VPDPBUSD     Z5, Z4, Z7 \
	VPXORD       Z8, Z8, Z8 \
	VPDPBUSD     Z5, Z13, Z8 \
	VPSUBD       Z8, Z7, Z7 \
	VCVTDQ2PS    Z7, Z7 \
	VFMADD231PS  Z7, Z2, Z0
#define Q40_ONEZ \
	SCALES1(0, 0) \
	NIBBLES32(2(AX), Y14) \
	VMOVDQU       2(BX), Y5 \
	VPXORD        Y7, Y7, Y7 \
	VPDPBUSD      Y5, Y4, Y7 \
	VPXORD        Y8, Y8, Y8 \
	VPDPBUSD      Y5, Y13, Y8 \
	VPSUBD        Y8, Y7, Y7 \
	VCVTDQ2PS     Y7, Y7 \
	VFMADD231PS   Y7, Y2, Y0
#define Q40_PFZ PREFETCHT0 2048(AX)

// func dotQ4_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotQ4_0RowsAVX512(SB), NOSPLIT, $0-56
	ROWS512(Q40_CONSTSZ, Q40_PAIRZ, Q40_ONEZ, 18, Q40_PFZ)

// MXFP4 (see dot_avx2_amd64.s): two blocks per 512-bit register (lanes 0-7
// the even block, 8-15 the odd one), integer sums by VPDPBUSD, an odd last
// block as the AVX2 kernel's MX_BLOCK; Z14 = 0x0f bytes, Z12 = the value
// table in every 128-bit lane, Z31 = 0, Y15 = 0x0001 words, R10 = the
// scale table.
#define MX_CONSTSZ \
	ONES16_Y15 \
	MOVL            $0x0f0f0f0f, DX \
	VPBROADCASTD    DX, Z14 \
	VBROADCASTI32X4 ·kvaluesMXFP4(SB), Z12 \
	VPXORD          Z31, Z31, Z31 \
	LEAQ            ·e8m0HalfTable(SB), R10

#define MX_PAIRZ \
	MX_SCALE(0, 0, Y2, Y3) \
	MX_SCALE(17, 34, Y3, Y4) \
	VINSERTF64X4 $1, Y3, Z2, Z2 \
	NIBBLES2(1, 17) \
	VPSHUFB      Z4, Z12, Z4 \
	SIGNED_PAIRZ

#define MX_ONEZ MX_BLOCK(0, 0, Y0)

// func dotMXFP4RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotMXFP4RowsAVX512(SB), NOSPLIT, $0-56
	ROWS512(MX_CONSTSZ, MX_PAIRZ, MX_ONEZ, 17, MX_PF)

// ---------------------------------------------------------------------------
// Four-token prefill kernels for the K-quants on 512-bit registers: each
// 64-value slice of a weight block is unpacked once (low nibbles of one
// 32-value sub-block next to the next sub-block) so it meets 64 contiguous
// activation bytes, and VPMADDUBSW/VPMADDWD then cost one instruction per
// 64 values and token instead of two.

// VPERMW indexes: Q4_K pair j takes words [2j x16, 2j+1 x16] of the scale
// words (vector j at 64j); Q6_K vector v takes words [4v .. 4v+3], each x8.

// Horizontal sum of the 16 lanes of Z into lane 0 of X (Y its low half;
// clobbers T and its Y).
#define HSUMZ(Z, Y, X, TY, TX) \
	VEXTRACTF64X4 $1, Z, TY \
	VADDPS        TY, Y, Y \
	HSUM(Y, X, TX)

#define STORE4Z \
	HSUMZ(Z0, Y0, X0, Y4, X4) \
	HSUMZ(Z1, Y1, X1, Y4, X4) \
	HSUMZ(Z2, Y2, X2, Y4, X4) \
	HSUMZ(Z3, Y3, X3, Y4, X4) \
	VMOVSS X0, (R11) \
	VMOVSS X1, 4(R11) \
	VMOVSS X2, 8(R11) \
	VMOVSS X3, 12(R11)

// Sum of products of Z4 (unsigned) with 64 activation bytes at xoff(B),
// scaled per word pair by Z6, into IACC.
#define KTOK(B, xoff, Q, S, IACC) \
	VPMADDUBSW xoff(B), Q, Z15 \
	VPMADDWD   S, Z15, Z15 \
	VPADDD     Z15, IACC, IACC

// Q4_K pair j (32 bytes of nibbles at qoff): Z4 = [low | high nibbles].
#define Q4K_PAIRZ(qoff, xoff, perm) \
	VMOVDQU      qoff(AX), Y4 \
	VPSRLW       $4, Y4, Y5 \
	VINSERTI64X4 $1, Y5, Z4, Z4 \
	VPANDD       Z14, Z4, Z4 \
	VPERMW       Z8, perm, Z6 \
	KTOK(BX, xoff, Z4, Z6, Z16) \
	KTOK(SI, xoff, Z4, Z6, Z17) \
	KTOK(DI, xoff, Z4, Z6, Z18) \
	KTOK(R10, xoff, Z4, Z6, Z19)

// Q4_K epilogue for one token at B (X4 = [d, dmin]; Y10 = mins, doubled).
#define Q4K_ENDZ(B, IACC, ACC) Q4K_KEND(B, IACC, ACC, Z6, Z7, Z15)

// Loads the four 64-byte VPERMW index vectors of table tab.
#define PERMS4(tab, Za, Zb, Zc, Zd) \
	VMOVDQU64 tab+0x00(SB), Za \
	VMOVDQU64 tab+0x40(SB), Zb \
	VMOVDQU64 tab+0x80(SB), Zc \
	VMOVDQU64 tab+0xc0(SB), Zd

#define ZERO4Z \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3

// Z14 = 0x0f bytes, Z20-Z23 the VPERMW indexes of the pairs' scales.
#define Q4K_CONSTSZ \
	MOVL         $0x0f0f0f0f, DX \
	VPBROADCASTD DX, Z14 \
	PERMS4(·q4kPerm, Z20, Z21, Z22, Z23)

// One q4_K block of the four tokens: scales and mins as in
// dotQ4_KRowsAVX2 (Y8 = words sc0..7 | m0..7, the upper half of Z8 zero;
// Y10 = m0,m0,...,m7,m7), the four sub-block pairs, the epilogues.
#define Q4K_BLOCKZ \
	Q4K_SCALES(R9) \
	VPMOVZXBW    X8, Y8 \
	VEXTRACTI128 $1, Y8, X9 \
	VPUNPCKLWD   X9, X9, X6 \
	VPUNPCKHWD   X9, X9, X7 \
	VINSERTI128  $1, X7, Y6, Y10 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	Q4K_PAIRZ(16, 4, Z20) \
	Q4K_PAIRZ(48, 68, Z21) \
	Q4K_PAIRZ(80, 132, Z22) \
	Q4K_PAIRZ(112, 196, Z23) \
	VMOVD     (AX), X4 \
	VCVTPH2PS X4, X4 \
	KENDS4(Q4K_ENDZ, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)

// func dotQ4_KTok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32)
TEXT ·dotQ4_KTok4AVX512(SB), NOSPLIT, $0-40
	KTOK4(Q4K_CONSTSZ, ZERO4Z, Q4K_BLOCKZ, 144, STORE4Z)

// Q6_K half: 64 bytes of ql at qloff, 32 of qh at qhoff, activations at
// xoff; Z24..Z27 hold the VPERMW indexes of this half's scales.
#define Q6K_HALFZ(qloff, qhoff, xoff, p12, p34) \
	VMOVDQU64    qloff(AX), Z9 \
	VMOVDQU      qhoff(AX), Y10 \
	VPSLLW       $4, Y10, Y11 \
	VPSLLW       $2, Y10, Y12 \
	VINSERTI64X4 $1, Y12, Z11, Z11 \
	VPANDD       Z13, Z11, Z11 \
	VPANDD       Z14, Z9, Z4 \
	VPORD        Z11, Z4, Z4 \
	VPERMW       Z8, p12, Z6 \
	KTOK(BX, xoff, Z4, Z6, Z16) \
	KTOK(SI, xoff, Z4, Z6, Z17) \
	KTOK(DI, xoff, Z4, Z6, Z18) \
	KTOK(R10, xoff, Z4, Z6, Z19) \
	VPSRLW       $2, Y10, Y12 \
	VINSERTI64X4 $1, Y12, Z10, Z11 \
	VPANDD       Z13, Z11, Z11 \
	VPSRLW       $4, Z9, Z4 \
	VPANDD       Z14, Z4, Z4 \
	VPORD        Z11, Z4, Z4 \
	VPERMW       Z8, p34, Z6 \
	KTOK(BX, (xoff+64), Z4, Z6, Z16) \
	KTOK(SI, (xoff+64), Z4, Z6, Z17) \
	KTOK(DI, (xoff+64), Z4, Z6, Z18) \
	KTOK(R10, (xoff+64), Z4, Z6, Z19)

// Q6_K epilogue for one token at B (Y8 = the 16 scales as words, Z5 = d).
#define Q6K_ENDZ(B, IACC, ACC) Q6K_KEND(B, IACC, ACC, Y8, Z15, Z5, Z7)

// Z14 = 0x0f bytes, Z13 = 0x30 bytes, Z24-Z27 the VPERMW indexes of the
// halves' scales.
#define Q6K_CONSTSZ \
	MOVL         $0x0f0f0f0f, DX \
	VPBROADCASTD DX, Z14 \
	MOVL         $0x30303030, DX \
	VPBROADCASTD DX, Z13 \
	PERMS4(·q6kPerm, Z24, Z25, Z26, Z27)

// One q6_K block of the four tokens (Y8 = the 16 scales as words, the
// upper half of Z8 zero).
#define Q6K_BLOCKZ \
	VPMOVSXBW 192(AX), Y8 \
	VPXORD    Z16, Z16, Z16 \
	VPXORD    Z17, Z17, Z17 \
	VPXORD    Z18, Z18, Z18 \
	VPXORD    Z19, Z19, Z19 \
	Q6K_HALFZ(0, 128, 4, Z24, Z25) \
	Q6K_HALFZ(64, 160, 132, Z26, Z27) \
	VPBROADCASTW 208(AX), Y5 \
	VCVTPH2PS    Y5, Z5 \
	KENDS4(Q6K_ENDZ, Z16, Z17, Z18, Z19, Z0, Z1, Z2, Z3)

// func dotQ6_KTok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32)
TEXT ·dotQ6_KTok4AVX512(SB), NOSPLIT, $0-40
	KTOK4(Q6K_CONSTSZ, ZERO4Z, Q6K_BLOCKZ, 210, STORE4Z)

// ---------------------------------------------------------------------------
// Four-token prefill kernels for q8_0, q4_0 and q4_1: the AVX2 ones (one
// body each in dot_amd64.h) with VPDPBUSD on 256-bit registers in place
// of VPMADDUBSW+VPMADDWD (one multiply instruction instead of two per
// block and token).

// func dotQ8_0Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotQ8_0Tok4AVX512(SB), NOSPLIT, $0-48
	SIGNED_TOK4(Q80_CONSTS, Q80_UNPACK, 34, VNNI, Y12)

// func dotQ4_0Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotQ4_0Tok4AVX512(SB), NOSPLIT, $0-48
	SIGNED_TOK4(Q40_CONSTS, Q40_UNPACK, 18, VNNI, Y12)

// func dotQ4_1Tok4AVX512(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotQ4_1Tok4AVX512(SB), NOSPLIT, $0-48
	Q41_TOK4(VNNI)
