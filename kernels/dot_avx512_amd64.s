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
