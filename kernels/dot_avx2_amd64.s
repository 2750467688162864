// AVX2 + FMA + F16C row-dot kernels. Every kernel loops over nrows weight
// rows (stride bytes apart) against one activation vector and stores one
// float32 per row, so a whole row range costs one call.
//
// The row kernels prefetch the weights 2 KiB ahead: measured on the
// development machine, a single thread then streams a matrix from memory
// about 30% faster than on the hardware prefetchers alone.
//
// The f16 block scales of the 32-value formats are looked up in a 64K-entry
// float32 table (f16, passed by the caller): a broadcast load instead of
// F16C conversions, which compete for the shuffle port.
//
// Integer parts are exact: products are formed with VPMADDUBSW (unsigned x
// signed bytes, pairs summed to int16, which cannot saturate for the value
// ranges of these formats) and widened with VPMADDWD. Each block's integer
// sum is scaled in float32 and accumulated in 8 lanes, so only the float
// summation order differs from the pure-Go kernels.

#include "textflag.h"

#include "dot_amd64.h"

// The four-token q4_K kernel's accumulators and end (defined before every
// TEXT so that vet reads their stack slots as the frame of the kernel
// that uses them).

// The accumulators: Y0-Y3 the scale parts, 0..127(SP) the min parts.
#define Q4K_ZERO4 \
	ZERO4 \
	VMOVUPS Y0, 0(SP) \
	VMOVUPS Y0, 32(SP) \
	VMOVUPS Y0, 64(SP) \
	VMOVUPS Y0, 96(SP)

// Scale part minus min part, then the sums (as dotQ4_KRowsAVX2 ends a row).
#define Q4K_STORE4 \
	VSUBPS 0(SP), Y0, Y0 \
	VSUBPS 32(SP), Y1, Y1 \
	VSUBPS 64(SP), Y2, Y2 \
	VSUBPS 96(SP), Y3, Y3 \
	STORE4

// The four-token q4_1 kernel, one token of the block whose nibbles are Y4
// (Y12 = the weight scale, X13 = its m): as Q41_BLOCK, scale product
// weight times activation, ACC += float(dot) * it, and the m*s term into
// the token's scalar accumulator at MS(SP) (no register is left for the
// eight of them). D, S and Q address the token's d, s and quants.
#define Q41_TOK(D, S, Q, ACC, MS) \
	MOVWLZX      D, DX \
	VBROADCASTSS (R13)(DX*4), Y6 \
	VMULPS       Y6, Y12, Y6 \
	MOVWLZX      S, DX \
	VMOVSS       MS(SP), X7 \
	VFMADD231SS  (R13)(DX*4), X13, X7 \
	VMOVSS       X7, MS(SP) \
	VPMADDUBSW   Q, Y4, Y7 \
	VPMADDWD     Y15, Y7, Y7 \
	VCVTDQ2PS    Y7, Y7 \
	VFMADD231PS  Y7, Y6, ACC

// One q4_1 block at wo(AX) for the four tokens' q8_1 blocks at xo into
// A0..A3, their m*s terms at M, M+4, M+8, M+12 (SP).
#define Q41_BLK4(wo, xo, A0, A1, A2, A3, M) \
	MOVWLZX      wo(AX), DX \
	VBROADCASTSS (R13)(DX*4), Y12 \
	MOVWLZX      (wo+2)(AX), DX \
	VMOVSS       (R13)(DX*4), X13 \
	NIBBLES32((wo+4)(AX), Y14) \
	Q41_TOK(xo(BX), (xo+2)(BX), (xo+4)(BX), A0, (M+0)) \
	Q41_TOK(xo(BX)(R8*1), (xo+2)(BX)(R8*1), (xo+4)(BX)(R8*1), A1, (M+4)) \
	Q41_TOK(xo(BX)(R8*2), (xo+2)(BX)(R8*2), (xo+4)(BX)(R8*2), A2, (M+8)) \
	Q41_TOK(xo(BX)(R9*1), (xo+2)(BX)(R9*1), (xo+4)(BX)(R9*1), A3, (M+12))

// The end of the four-token q4_1 kernel for token t: its even and odd
// vector sums added, summed across (X), then its even and odd m*s terms
// (at MS and MS+16) added, then the two, as dotQ4_1RowsAVX2 ends a row.
#define Q41_END(Y, YODD, X, MS) \
	VADDPS YODD, Y, Y \
	HSUM(Y, X, X4) \
	VMOVSS MS(SP), X5 \
	VADDSS (MS+16)(SP), X5, X5 \
	VADDSS X5, X, X

// Horizontal sum of the 8 float32 lanes of Y0 into X0 (clobbers X1).
#define HSUM_Y0 HSUM(Y0, X0, X1)

// One block of each 32-value format against its q8 block, at byte offsets
// wo (weights, AX) and xo (activations, BX), accumulated into ACC (and the
// q4_1 minimum term into MACC). The row loops run two blocks per step into
// two accumulators: one FMA chain alone (4 cycles per link) would bound a
// row at one block per 4 cycles.
// Y2 = the product of the weight and activation block scales.
#define BLKSCALE(wo, xo) \
	MOVWLZX      wo(AX), DX \
	MOVWLZX      xo(BX), R12 \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VBROADCASTSS (R13)(R12*4), Y3 \
	VMULPS       Y3, Y2, Y2

// A block of signed weight quants (Y4, from UNPACK(wo)) against its q8_0
// block (SIGNED_DOT).
#define SIGNED_BLOCK(wo, xo, ACC, UNPACK) \
	BLKSCALE(wo, xo) \
	UNPACK(wo) \
	SIGNED_DOT(xo, ACC)

#define Q80_W(wo) VMOVDQU (wo+2)(AX), Y4
#define Q40_W(wo) \
	NIBBLES32((wo+2)(AX), Y14) \
	VPSUBB       Y13, Y4, Y4

#define Q80_BLOCK(wo, xo, ACC) SIGNED_BLOCK(wo, xo, ACC, Q80_W)
#define Q40_BLOCK(wo, xo, ACC) SIGNED_BLOCK(wo, xo, ACC, Q40_W)

#define Q41_BLOCK(wo, xo, ACC, MACC) \
	BLKSCALE(wo, xo) \
	MOVWLZX      (wo+2)(AX), DX \
	MOVWLZX      (xo+2)(BX), R12 \
	VMOVSS       (R13)(DX*4), X3 \
	VFMADD231SS  (R13)(R12*4), X3, MACC \
	NIBBLES32((wo+4)(AX), Y14) \
	VPMADDUBSW   (xo+4)(BX), Y4, Y6 \
	VPMADDWD     Y15, Y6, Y6 \
	VCVTDQ2PS    Y6, Y6 \
	VFMADD231PS  Y6, Y2, ACC

// Row loop prologue shared by the 32-value kernels.
#define ROWS_ARGS \
	MOVQ f16+48(FP), R13 \
	MOVQ w+0(FP), SI \
	MOVQ nrows+16(FP), R9 \
	MOVQ y+40(FP), R11

// The q8_0 and q4_0 row kernels: CONSTS, then per row two blocks (of wb
// bytes) a step, each BLOCK(wo, xo, ACC), with the prefetch PF.
#define SIGNED_ROWS(CONSTS, BLOCK, wb, PF) \
	ROWS_ARGS \
	ONES16_Y15 \
	CONSTS \
	TESTQ R9, R9 \
	JLE   done \
row: \
	MOVQ   SI, AX \
	MOVQ   x+24(FP), BX \
	MOVQ   nb+32(FP), CX \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	CMPQ   CX, $2 \
	JLT    one \
blk: \
	PF \
	BLOCK(0, 0, Y0) \
	BLOCK(wb, 34, Y1) \
	ADDQ       $(2*wb), AX \
	ADDQ       $68, BX \
	SUBQ       $2, CX \
	CMPQ       CX, $2 \
	JGE        blk \
one: \
	TESTQ CX, CX \
	JZ    sum \
	BLOCK(0, 0, Y0) \
sum: \
	VADDPS Y1, Y0, Y0 \
	HSUM_Y0 \
	ROWNEXT(row) \
done: \
	VZEROUPPER \
	RET

#define Q80_PF \
	PREFETCHT0 2048(AX) \
	PREFETCHT0 2112(AX)
#define Q40_PF PREFETCHT0 2048(AX)

// func dotQ8_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotQ8_0RowsAVX2(SB), NOSPLIT, $0-56
	SIGNED_ROWS(Q80_CONSTS, Q80_BLOCK, 34, Q80_PF)

// func dotQ4_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// Y13 = 0x08 in every byte (0x0f &^ 0x07), subtracted from the nibbles.
TEXT ·dotQ4_0RowsAVX2(SB), NOSPLIT, $0-56
	SIGNED_ROWS(Q40_CONSTS, Q40_BLOCK, 18, Q40_PF)

// 16-bit ones in memory, for the paired-row q4_1 loop that needs every
// register.
DATA ones16<>+0x00(SB)/8, $0x0001000100010001
DATA ones16<>+0x08(SB)/8, $0x0001000100010001
DATA ones16<>+0x10(SB)/8, $0x0001000100010001
DATA ones16<>+0x18(SB)/8, $0x0001000100010001
GLOBL ones16<>(SB), RODATA|NOPTR, $32

// Shared activation block at xo(BX): Y3 = its scale, X9 = its sum term,
// Y10 = its quants.
#define Q41_XBLOCK(xo) \
	MOVWLZX      xo(BX), R12 \
	VBROADCASTSS (R13)(R12*4), Y3 \
	MOVWLZX      (xo+2)(BX), R12 \
	VMOVSS       (R13)(R12*4), X9 \
	VMOVDQU      (xo+4)(BX), Y10

// Q4_1 block at wo(P) against the shared activation block; the same
// arithmetic, in the same order, as Q41_BLOCK, so paired and single rows
// give identical results.
#define Q41_ROWBLOCK(P, wo, ACC, MACC) \
	MOVWLZX      wo(P), DX \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VMULPS       Y3, Y2, Y2 \
	MOVWLZX      (wo+2)(P), DX \
	VFMADD231SS  (R13)(DX*4), X9, MACC \
	NIBBLES32((wo+4)(P), Y14) \
	VPMADDUBSW   Y10, Y4, Y6 \
	VPMADDWD     ones16<>(SB), Y6, Y6 \
	VCVTDQ2PS    Y6, Y6 \
	VFMADD231PS  Y6, Y2, ACC

// func dotQ4_1RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// x is q8_1: per block d (f16), s = d*sum(qs) (f16), 32 int8. Rows go in
// pairs sharing each activation block's loads and scale lookups; an odd
// last row takes the single-row loop. Both keep even and odd blocks in
// separate accumulators, combined in the same order. Two rows advancing
// side by side are two streams a row apart, so the paired loop prefetches
// four rows ahead (the rows two pairs on) rather than a fixed 2 KiB, which
// would land in the partner row.
TEXT ·dotQ4_1RowsAVX2(SB), NOSPLIT, $0-56
	ROWS_ARGS
	ONES16_Y15
	LOWNIB_Y14
	MOVQ stride+8(FP), R8
	LEAQ (R8*4), DI // prefetch distance of the paired loop: four rows
	CMPQ R9, $2
	JLT  q41row

q41pair:
	MOVQ   SI, AX
	LEAQ   (SI)(R8*1), R10
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0   // row 0, even blocks
	VXORPS Y1, Y1, Y1   // row 0, odd blocks
	VXORPS Y11, Y11, Y11 // row 1, even blocks
	VXORPS Y12, Y12, Y12 // row 1, odd blocks
	VXORPS Y7, Y7, Y7   // m*s: row 0 even, odd; row 1 even, odd
	VXORPS Y8, Y8, Y8
	VXORPS Y13, Y13, Y13
	VXORPS Y15, Y15, Y15
	CMPQ   CX, $2
	JLT    q41pairone

q41pairblk:
	PREFETCHT0 (AX)(DI*1)
	PREFETCHT0 (R10)(DI*1)
	Q41_XBLOCK(0)
	Q41_ROWBLOCK(AX, 0, Y0, X7)
	Q41_ROWBLOCK(R10, 0, Y11, X13)
	Q41_XBLOCK(36)
	Q41_ROWBLOCK(AX, 20, Y1, X8)
	Q41_ROWBLOCK(R10, 20, Y12, X15)
	ADDQ       $40, AX
	ADDQ       $40, R10
	ADDQ       $72, BX
	SUBQ       $2, CX
	CMPQ       CX, $2
	JGE        q41pairblk

q41pairone:
	TESTQ CX, CX
	JZ    q41pairsum
	Q41_XBLOCK(0)
	Q41_ROWBLOCK(AX, 0, Y0, X7)
	Q41_ROWBLOCK(R10, 0, Y11, X13)

q41pairsum:
	VADDPS       Y12, Y11, Y11
	VEXTRACTF128 $1, Y11, X12
	VADDPS       X12, X11, X11
	VPERMILPS    $0x4e, X11, X12
	VADDPS       X12, X11, X11
	VMOVSHDUP    X11, X12
	VADDSS       X12, X11, X11
	VADDSS       X15, X13, X13
	VADDSS       X13, X11, X11
	VADDPS       Y1, Y0, Y0
	HSUM_Y0
	VADDSS       X8, X7, X7
	VADDSS       X7, X0, X0
	VMOVSS       X0, (R11)
	VMOVSS       X11, 4(R11)
	ADDQ         $8, R11
	LEAQ         (SI)(R8*2), SI
	SUBQ         $2, R9
	CMPQ         R9, $2
	JGE          q41pair
	TESTQ        R9, R9
	JLE          q41done
	VPCMPEQW     Y15, Y15, Y15 // restore the ones for the single-row loop
	VPSRLW       $15, Y15, Y15

q41row:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y7, Y7, Y7 // m*s, even blocks
	VXORPS Y8, Y8, Y8 // m*s, odd blocks
	CMPQ   CX, $2
	JLT    q41one

q41blk:
	PREFETCHT0 2048(AX)
	Q41_BLOCK(0, 0, Y0, X7)
	Q41_BLOCK(20, 36, Y1, X8)
	ADDQ       $40, AX
	ADDQ       $72, BX
	SUBQ       $2, CX
	CMPQ       CX, $2
	JGE        q41blk

q41one:
	TESTQ CX, CX
	JZ    q41sum
	Q41_BLOCK(0, 0, Y0, X7)

q41sum:
	VADDPS Y1, Y0, Y0
	HSUM_Y0
	VADDSS X8, X7, X7
	VADDSS X7, X0, X0
	VMOVSS X0, (R11)
	ADDQ   $4, R11
	ADDQ   R8, SI
	DECQ   R9
	JNZ    q41row

q41done:
	VZEROUPPER
	RET

// Q4_K: for sub-block k (0..7), VPSHUFB mask k broadcasts int16 word k of a
// 128-bit lane to all eight words.

// Q4_K sub-block pair j: 32 bytes of nibbles at qs+32j; low nibbles are
// sub-block 2j (x at 64j), high nibbles sub-block 2j+1 (x at 64j+32).
// Y11 holds the eight scales as int16 in both lanes; Y12 accumulates.
#define Q4K_PAIR(qoff, xoff, m0, m1) \
	VMOVDQU    qoff(AX), Y4 \
	VPSRLW     $4, Y4, Y5 \
	VPAND      Y14, Y4, Y4 \
	VPAND      Y14, Y5, Y5 \
	VPMADDUBSW xoff(BX), Y4, Y4 \
	VPMADDUBSW (xoff+32)(BX), Y5, Y5 \
	VPSHUFB    m0, Y11, Y6 \
	VPMADDWD   Y6, Y4, Y4 \
	VPSHUFB    m1, Y11, Y7 \
	VPMADDWD   Y7, Y5, Y5 \
	VPADDD     Y4, Y12, Y12 \
	VPADDD     Y5, Y12, Y12

// func dotQ4_KRowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)
// Block: d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 bytes of
// nibbles. x is q8_K: d (f32), 256 int8, 16 int16 sums of 16.
TEXT ·dotQ4_KRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nrows+16(FP), R9
	MOVQ y+40(FP), R11
	LOWNIB_Y14
	TESTQ R9, R9
	JLE   q4kdone

q4krow:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0 // scale part
	VXORPS Y1, Y1, Y1 // min part
	TESTQ  CX, CX
	JLE    q4ksum

q4kblk:
	PREFETCHT0 2048(AX)
	PREFETCHT0 2112(AX)
	PREFETCHT0 2176(AX)
	Q4K_SCALES(R10)
	VPMOVZXBW    X8, Y8           // words: sc0..7 | m0..7
	VINSERTI128  $1, X8, Y8, Y11  // sc0..7 | sc0..7
	VEXTRACTI128 $1, Y8, X8       // m0..7
	VPUNPCKLWD   X8, X8, X6
	VPUNPCKHWD   X8, X8, X7
	VINSERTI128  $1, X7, Y6, Y6   // m0,m0,m1,m1,...,m7,m7
	VPMADDWD     260(BX), Y6, Y6  // m[i]*(bsums[2i]+bsums[2i+1])
	VCVTDQ2PS    Y6, Y6

	// d*dx and dmin*dx
	VMOVD        (AX), X2
	VCVTPH2PS    X2, X2
	VBROADCASTSS (BX), X3
	VMULPS       X3, X2, X2
	VMOVSHDUP    X2, X3
	VBROADCASTSS X2, Y2
	VBROADCASTSS X3, Y3
	VFMADD231PS  Y6, Y3, Y1

	VPXOR Y12, Y12, Y12
	Q4K_PAIR(16, 4, ·q4kMask+0x00(SB), ·q4kMask+0x20(SB))
	Q4K_PAIR(48, 68, ·q4kMask+0x40(SB), ·q4kMask+0x60(SB))
	Q4K_PAIR(80, 132, ·q4kMask+0x80(SB), ·q4kMask+0xa0(SB))
	Q4K_PAIR(112, 196, ·q4kMask+0xc0(SB), ·q4kMask+0xe0(SB))
	VCVTDQ2PS   Y12, Y12
	VFMADD231PS Y12, Y2, Y0

	ADDQ $144, AX
	ADDQ $292, BX
	DECQ CX
	JNZ  q4kblk

q4ksum:
	VSUBPS Y1, Y0, Y0
	HSUM_Y0
	ROWNEXT(q4krow)

q4kdone:
	VZEROUPPER
	RET

// Q6_K: VPSHUFB mask k broadcasts int16 word 2k of the low lane and word
// 2k+1 of the high lane (the scales of the two 16-value halves of 32 values).
DATA q6kmask<>+0x00(SB)/8, $0x0100010001000100
DATA q6kmask<>+0x08(SB)/8, $0x0100010001000100
DATA q6kmask<>+0x10(SB)/8, $0x0302030203020302
DATA q6kmask<>+0x18(SB)/8, $0x0302030203020302
DATA q6kmask<>+0x20(SB)/8, $0x0504050405040504
DATA q6kmask<>+0x28(SB)/8, $0x0504050405040504
DATA q6kmask<>+0x30(SB)/8, $0x0706070607060706
DATA q6kmask<>+0x38(SB)/8, $0x0706070607060706
DATA q6kmask<>+0x40(SB)/8, $0x0908090809080908
DATA q6kmask<>+0x48(SB)/8, $0x0908090809080908
DATA q6kmask<>+0x50(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6kmask<>+0x58(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA q6kmask<>+0x60(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6kmask<>+0x68(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA q6kmask<>+0x70(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA q6kmask<>+0x78(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL q6kmask<>(SB), RODATA|NOPTR, $128

// 0x30 in every byte: the two high bits of a 6-bit quant, at bits 4-5.
DATA q6khigh<>+0x00(SB)/8, $0x3030303030303030
DATA q6khigh<>+0x08(SB)/8, $0x3030303030303030
DATA q6khigh<>+0x10(SB)/8, $0x3030303030303030
DATA q6khigh<>+0x18(SB)/8, $0x3030303030303030
GLOBL q6khigh<>(SB), RODATA|NOPTR, $32

// One group of 32 quants: Y7 = low 4 bits, Y13 = high 2 bits (at 4-5);
// q (0..63) times x, scaled per 16 by Y10 shuffled with mask m.
#define Q6K_GROUP(xoff, m) \
	VPOR       Y13, Y7, Y7 \
	VPMADDUBSW xoff(BX), Y7, Y7 \
	VPSHUFB    m, Y10, Y13 \
	VPMADDWD   Y13, Y7, Y7 \
	VPADDD     Y7, Y12, Y12

// Half h of a Q6_K block: 64 bytes of ql at 64h, 32 bytes of qh at
// 128+32h, x at 4+128h; Y10 = the half's eight scales in both lanes.
#define Q6K_HALF(qloff, qhoff, xoff) \
	VMOVDQU qloff(AX), Y4 \
	VMOVDQU (qloff+32)(AX), Y5 \
	VMOVDQU qhoff(AX), Y6 \
	VPAND   Y14, Y4, Y7 \
	VPSLLW  $4, Y6, Y13 \
	VPAND   Y11, Y13, Y13 \
	Q6K_GROUP(xoff, q6kmask<>+0x00(SB)) \
	VPAND   Y14, Y5, Y7 \
	VPSLLW  $2, Y6, Y13 \
	VPAND   Y11, Y13, Y13 \
	Q6K_GROUP((xoff+32), q6kmask<>+0x20(SB)) \
	VPSRLW  $4, Y4, Y7 \
	VPAND   Y14, Y7, Y7 \
	VPAND   Y11, Y6, Y13 \
	Q6K_GROUP((xoff+64), q6kmask<>+0x40(SB)) \
	VPSRLW  $4, Y5, Y7 \
	VPAND   Y14, Y7, Y7 \
	VPSRLW  $2, Y6, Y13 \
	VPAND   Y11, Y13, Y13 \
	Q6K_GROUP((xoff+96), q6kmask<>+0x60(SB))

// func dotQ6_KRowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)
// Block: ql (128), qh (64), int8 scales (16), d (f16). Quant q-32 with q in
// 0..63: computed as sum(sc*q*x) - 32*sum(sc*bsum) with q8_K's bsums.
TEXT ·dotQ6_KRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ nrows+16(FP), R9
	MOVQ y+40(FP), R11
	LOWNIB_Y14
	VMOVDQU q6khigh<>(SB), Y11
	TESTQ   R9, R9
	JLE     q6kdone

q6krow:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JLE    q6ksum

q6kblk:
	PREFETCHT0 2048(AX)
	PREFETCHT0 2112(AX)
	PREFETCHT0 2176(AX)
	PREFETCHT0 2240(AX)
	VPBROADCASTW 208(AX), X2
	VCVTPH2PS    X2, Y2
	VBROADCASTSS (BX), Y3
	VMULPS       Y3, Y2, Y2
	VPMOVSXBW    192(AX), Y8     // sc0..15 as int16
	VPMADDWD     260(BX), Y8, Y9 // sc[i]*bsums[i], pairs summed
	VPSLLD       $5, Y9, Y9
	VPXOR        Y12, Y12, Y12
	VPSUBD       Y9, Y12, Y12    // start at -32*sum(sc*bsum)
	VPERMQ       $0x44, Y8, Y10  // sc0..7 | sc0..7
	Q6K_HALF(0, 128, 4)
	VPERMQ       $0xee, Y8, Y10  // sc8..15 | sc8..15
	Q6K_HALF(64, 160, 132)
	VCVTDQ2PS    Y12, Y12
	VFMADD231PS  Y12, Y2, Y0
	ADDQ         $210, AX
	ADDQ         $292, BX
	DECQ         CX
	JNZ          q6kblk

q6ksum:
	HSUM_Y0
	ROWNEXT(q6krow)

q6kdone:
	VZEROUPPER
	RET

// The f16 and f32 row kernels: per row, 32 values a step into Y0..Y3 (with
// PF, the prefetch), then 8 a step into Y0, then the tail one by one into
// X0 after the fold; eb bytes a value. STEP32, STEP8 and STEP1 are the
// steps' loads and multiply-adds at AX (weights) and BX (x).
#define FROWS(PF, STEP32, STEP8, STEP1, eb) \
	MOVQ w+0(FP), SI \
	MOVQ nrows+16(FP), R9 \
	MOVQ y+40(FP), R11 \
	TESTQ R9, R9 \
	JLE   done \
row: \
	MOVQ   SI, AX \
	MOVQ   x+24(FP), BX \
	MOVQ   nb+32(FP), CX \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	CMPQ   CX, $32 \
	JLT    by8 \
by32: \
	PF \
	STEP32 \
	ADDQ        $(32*eb), AX \
	ADDQ        $(32*eb), BX \
	SUBQ        $32, CX \
	CMPQ        CX, $32 \
	JGE         by32 \
by8: \
	CMPQ CX, $8 \
	JLT  fold \
by8loop: \
	STEP8 \
	ADDQ        $(8*eb), AX \
	ADDQ        $(8*eb), BX \
	SUBQ        $8, CX \
	CMPQ        CX, $8 \
	JGE         by8loop \
fold: \
	VADDPS Y1, Y0, Y0 \
	VADDPS Y3, Y2, Y2 \
	VADDPS Y2, Y0, Y0 \
	HSUM_Y0 \
	TESTQ  CX, CX \
	JLE    store \
tail: \
	STEP1 \
	ADDQ        $eb, AX \
	ADDQ        $eb, BX \
	DECQ        CX \
	JNZ         tail \
store: \
	ROWNEXT(row) \
done: \
	VZEROUPPER \
	RET

#define F16PF PREFETCHT0 2048(AX)
#define F16STEP32 \
	VCVTPH2PS   (AX), Y4 \
	VCVTPH2PS   (BX), Y8 \
	VFMADD231PS Y8, Y4, Y0 \
	VCVTPH2PS   16(AX), Y5 \
	VCVTPH2PS   16(BX), Y9 \
	VFMADD231PS Y9, Y5, Y1 \
	VCVTPH2PS   32(AX), Y6 \
	VCVTPH2PS   32(BX), Y10 \
	VFMADD231PS Y10, Y6, Y2 \
	VCVTPH2PS   48(AX), Y7 \
	VCVTPH2PS   48(BX), Y11 \
	VFMADD231PS Y11, Y7, Y3
#define F16STEP8 \
	VCVTPH2PS   (AX), Y4 \
	VCVTPH2PS   (BX), Y8 \
	VFMADD231PS Y8, Y4, Y0
#define F16STEP1 \
	MOVWLZX     (AX), DX \
	VMOVD       DX, X4 \
	VCVTPH2PS   X4, X4 \
	MOVWLZX     (BX), DX \
	VMOVD       DX, X8 \
	VCVTPH2PS   X8, X8 \
	VFMADD231SS X8, X4, X0

// func dotF16RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)
// Both operands f16, widened with F16C; products and sums in float32.
TEXT ·dotF16RowsAVX2(SB), NOSPLIT, $0-48
	FROWS(F16PF, F16STEP32, F16STEP8, F16STEP1, 2)

#define F32PF \
	PREFETCHT0 2048(AX) \
	PREFETCHT0 2112(AX)
#define F32STEP32 \
	VMOVUPS     (AX), Y4 \
	VFMADD231PS (BX), Y4, Y0 \
	VMOVUPS     32(AX), Y5 \
	VFMADD231PS 32(BX), Y5, Y1 \
	VMOVUPS     64(AX), Y6 \
	VFMADD231PS 64(BX), Y6, Y2 \
	VMOVUPS     96(AX), Y7 \
	VFMADD231PS 96(BX), Y7, Y3
#define F32STEP8 \
	VMOVUPS     (AX), Y4 \
	VFMADD231PS (BX), Y4, Y0
#define F32STEP1 \
	VMOVSS      (AX), X4 \
	VFMADD231SS (BX), X4, X0

// func dotF32RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32)
TEXT ·dotF32RowsAVX2(SB), NOSPLIT, $0-48
	FROWS(F32PF, F32STEP32, F32STEP8, F32STEP1, 4)

// func axpyAVX2(y *float32, a float32, x *float32, n int)
// y[i] += a*x[i], fused (one rounding per element).
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	VBROADCASTSS a+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         n+24(FP), CX
	CMPQ         CX, $32
	JLT          axpyby8

axpyby32:
	VMOVUPS     (DI), Y1
	VMOVUPS     32(DI), Y2
	VMOVUPS     64(DI), Y3
	VMOVUPS     96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS     Y1, (DI)
	VMOVUPS     Y2, 32(DI)
	VMOVUPS     Y3, 64(DI)
	VMOVUPS     Y4, 96(DI)
	ADDQ        $128, DI
	ADDQ        $128, SI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JGE         axpyby32

axpyby8:
	CMPQ CX, $8
	JLT  axpytail

axpyby8loop:
	VMOVUPS     (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS     Y1, (DI)
	ADDQ        $32, DI
	ADDQ        $32, SI
	SUBQ        $8, CX
	CMPQ        CX, $8
	JGE         axpyby8loop

axpytail:
	TESTQ CX, CX
	JLE   axpydone

axpytailloop:
	VMOVSS      (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS      X1, (DI)
	ADDQ        $4, DI
	ADDQ        $4, SI
	DECQ        CX
	JNZ         axpytailloop

axpydone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// Multi-token kernels for prefill and batched decode: one weight row
// against four tokens at once. Each weight block is loaded and unpacked
// once and then used for the four activation rows (xstride bytes apart),
// so unpacking and weight loads are shared. The arithmetic per token is
// exactly that of the row kernel (the same lanes, accumulators and
// summation order), so MatMul gives a token the result MatVec gives it.

// func dotQ8_0Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotQ8_0Tok4AVX2(SB), NOSPLIT, $0-48
	SIGNED_TOK4(Q80_CONSTS, Q80_UNPACK, 34, MADD, Y8)

// func dotQ4_0Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
TEXT ·dotQ4_0Tok4AVX2(SB), NOSPLIT, $0-48
	SIGNED_TOK4(Q40_CONSTS, Q40_UNPACK, 18, MADD, Y8)

// func dotQ4_1Tok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32, f16 *float32)
// Per token as dotQ4_1RowsAVX2: even blocks into Y0..Y3, odd ones into
// Y8..Y11, the m*s terms into 0..15(SP) (even) and 16..31(SP) (odd).
TEXT ·dotQ4_1Tok4AVX2(SB), NOSPLIT, $32-48
	TOK4_ARGS(f16+40(FP))
	ONES16_Y15
	LOWNIB_Y14
	ZERO4
	VXORPS  Y8, Y8, Y8
	VXORPS  Y9, Y9, Y9
	VXORPS  Y10, Y10, Y10
	VXORPS  Y11, Y11, Y11
	VMOVUPS Y0, 0(SP)
	CMPQ    CX, $2
	JLT     q41t4one

q41t4blk:
	Q41_BLK4(0, 0, Y0, Y1, Y2, Y3, 0)
	Q41_BLK4(20, 36, Y8, Y9, Y10, Y11, 16)
	ADDQ $40, AX
	ADDQ $72, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q41t4blk

q41t4one:
	TESTQ CX, CX
	JZ    q41t4store
	Q41_BLK4(0, 0, Y0, Y1, Y2, Y3, 0)

q41t4store:
	Q41_END(Y0, Y8, X0, 0)
	Q41_END(Y1, Y9, X1, 4)
	Q41_END(Y2, Y10, X2, 8)
	Q41_END(Y3, Y11, X3, 12)
	MOVSS4
	VZEROUPPER
	RET

// Q4_K, one sub-block pair for one token at base B: Y4/Y5 = low/high
// nibbles, Y6/Y7 = their scales as int16 words.
#define Q4K_TOK(B, xoff, IACC) \
	VPMADDUBSW xoff(B), Y4, Y15 \
	VPMADDWD   Y6, Y15, Y15 \
	VPADDD     Y15, IACC, IACC \
	VPMADDUBSW (xoff+32)(B), Y5, Y15 \
	VPMADDWD   Y7, Y15, Y15 \
	VPADDD     Y15, IACC, IACC

#define Q4K_PAIR4(qoff, xoff, m0, m1) \
	VMOVDQU qoff(AX), Y4 \
	VPSRLW  $4, Y4, Y5 \
	VPAND   Y14, Y4, Y4 \
	VPAND   Y14, Y5, Y5 \
	VPSHUFB m0, Y11, Y6 \
	VPSHUFB m1, Y11, Y7 \
	Q4K_TOK(BX, xoff, Y8) \
	Q4K_TOK(SI, xoff, Y9) \
	Q4K_TOK(DI, xoff, Y12) \
	Q4K_TOK(R10, xoff, Y13)

// Q4_K epilogue for one token at B, as dotQ4_KRowsAVX2 does it: ACC +=
// d*dx*IACC and, in the token's own accumulator at M(SP) (no register is
// left for it), += dmin*dx*mins(Y10); the two are subtracted at the end.
// X4 = [d, dmin] of the weight block; Y11 (the scales, rebuilt every
// block) is the temporary.
#define Q4K_END(B, IACC, ACC, M) \
	VBROADCASTSS (B), X5 \
	VMULPS       X4, X5, X5 \
	VBROADCASTSS X5, Y6 \
	VMOVSHDUP    X5, X7 \
	VBROADCASTSS X7, Y7 \
	VCVTDQ2PS    IACC, IACC \
	VFMADD231PS  IACC, Y6, ACC \
	VPMADDWD     260(B), Y10, Y15 \
	VCVTDQ2PS    Y15, Y15 \
	VMOVUPS      M(SP), Y11 \
	VFMADD231PS  Y15, Y7, Y11 \
	VMOVUPS      Y11, M(SP)

// One q4_K block of the four tokens: scales and mins as in
// dotQ4_KRowsAVX2 (Y11 = scales as words in both lanes, Y10 = the mins
// doubled), the four sub-block pairs, the epilogues.
#define Q4K_BLOCK4 \
	Q4K_SCALES(R9) \
	VPMOVZXBW    X8, Y8 \
	VINSERTI128  $1, X8, Y8, Y11 \
	VEXTRACTI128 $1, Y8, X8 \
	VPUNPCKLWD   X8, X8, X6 \
	VPUNPCKHWD   X8, X8, X7 \
	VINSERTI128  $1, X7, Y6, Y10 \
	VPXOR Y8, Y8, Y8 \
	VPXOR Y9, Y9, Y9 \
	VPXOR Y12, Y12, Y12 \
	VPXOR Y13, Y13, Y13 \
	Q4K_PAIR4(16, 4, ·q4kMask+0x00(SB), ·q4kMask+0x20(SB)) \
	Q4K_PAIR4(48, 68, ·q4kMask+0x40(SB), ·q4kMask+0x60(SB)) \
	Q4K_PAIR4(80, 132, ·q4kMask+0x80(SB), ·q4kMask+0xa0(SB)) \
	Q4K_PAIR4(112, 196, ·q4kMask+0xc0(SB), ·q4kMask+0xe0(SB)) \
	VMOVD     (AX), X4 \
	VCVTPH2PS X4, X4 \
	Q4K_END(BX, Y8, Y0, 0) \
	Q4K_END(SI, Y9, Y1, 32) \
	Q4K_END(DI, Y12, Y2, 64) \
	Q4K_END(R10, Y13, Y3, 96)

// func dotQ4_KTok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)
TEXT ·dotQ4_KTok4AVX2(SB), NOSPLIT, $128-40
	KTOK4(LOWNIB_Y14, Q4K_ZERO4, Q4K_BLOCK4, 144, Q4K_STORE4)

// Q6_K, one group of 32 quants (Y7, scales Y13) for one token at B.
#define Q6K_TOK(B, xoff, IACC) \
	VPMADDUBSW xoff(B), Y7, Y15 \
	VPMADDWD   Y13, Y15, Y15 \
	VPADDD     Y15, IACC, IACC

#define Q6K_GROUP4(xoff, m) \
	VPOR    Y15, Y7, Y7 \
	VPSHUFB m, Y10, Y13 \
	Q6K_TOK(BX, xoff, Y8) \
	Q6K_TOK(SI, xoff, Y9) \
	Q6K_TOK(DI, xoff, Y11) \
	Q6K_TOK(R10, xoff, Y12)

#define Q6K_HALF4(qloff, qhoff, xoff) \
	VMOVDQU qloff(AX), Y4 \
	VMOVDQU (qloff+32)(AX), Y5 \
	VMOVDQU qhoff(AX), Y6 \
	VPAND   Y14, Y4, Y7 \
	VPSLLW  $4, Y6, Y15 \
	VPAND   q6khigh<>(SB), Y15, Y15 \
	Q6K_GROUP4(xoff, q6kmask<>+0x00(SB)) \
	VPAND   Y14, Y5, Y7 \
	VPSLLW  $2, Y6, Y15 \
	VPAND   q6khigh<>(SB), Y15, Y15 \
	Q6K_GROUP4((xoff+32), q6kmask<>+0x20(SB)) \
	VPSRLW  $4, Y4, Y7 \
	VPAND   Y14, Y7, Y7 \
	VPAND   q6khigh<>(SB), Y6, Y15 \
	Q6K_GROUP4((xoff+64), q6kmask<>+0x40(SB)) \
	VPSRLW  $4, Y5, Y7 \
	VPAND   Y14, Y7, Y7 \
	VPSRLW  $2, Y6, Y15 \
	VPAND   q6khigh<>(SB), Y15, Y15 \
	Q6K_GROUP4((xoff+96), q6kmask<>+0x60(SB))

// Q6_K epilogue for one token at B (Y10 = the 16 scales as words, Y4 = d
// in every lane).
#define Q6K_END(B, IACC, ACC) Q6K_KEND(B, IACC, ACC, Y10, Y15, Y4, Y5)

// One q6_K block of the four tokens (Y10 = the scales of a half as words
// in both lanes, then all 16).
#define Q6K_BLOCK4 \
	VPXOR     Y8, Y8, Y8 \
	VPXOR     Y9, Y9, Y9 \
	VPXOR     Y11, Y11, Y11 \
	VPXOR     Y12, Y12, Y12 \
	VPMOVSXBW 192(AX), Y10 \
	VPERMQ    $0x44, Y10, Y10 \
	Q6K_HALF4(0, 128, 4) \
	VPMOVSXBW 192(AX), Y10 \
	VPERMQ    $0xee, Y10, Y10 \
	Q6K_HALF4(64, 160, 132) \
	VPMOVSXBW    192(AX), Y10 \
	VPBROADCASTW 208(AX), X4 \
	VCVTPH2PS    X4, Y4 \
	KENDS4(Q6K_END, Y8, Y9, Y11, Y12, Y0, Y1, Y2, Y3)

// func dotQ6_KTok4AVX2(w *byte, x *byte, xstride int, nb int, y *float32)
TEXT ·dotQ6_KTok4AVX2(SB), NOSPLIT, $0-40
	KTOK4(LOWNIB_Y14, ZERO4, Q6K_BLOCK4, 210, STORE4)

// MXFP4 x Q8_0 row-dot kernels (AVX2 here, AVX-512 VNNI in
// dot_avx512_amd64.s), in the frame of
// the q4_0 kernels (dot_avx2_amd64.s, dot_avx512_amd64.s): two blocks a
// step, the nibbles mapped to E2M1 values doubled (small integers, the
// kvaluesMXFP4 table, by VPSHUFB), the weights' signs moved to the
// activations so the products are unsigned x signed bytes, each block's
// exact integer sums in 8 lanes (lane l: values 4l..4l+3) times the
// product of the Q8_0 scale (f16 table at R13) and the halved E8M0 scale
// (e8m0HalfTable at R10), fused into an even-block and an odd-block
// accumulator, which are added and reduced by the 8-lane tree. That is
// ggml_vec_dot_mxfp4_q8_0's order on AVX2 whenever a row has an even
// number of blocks (an odd last block is fused into the lanes here, added
// to the reduced sum there).

// Y14 = 0x0f bytes, Y12 = the value table in both halves, R10 = the scale
// table.
#define MX_CONSTS \
	LOWNIB_Y14 \
	VBROADCASTI128 ·kvaluesMXFP4(SB), Y12 \
	LEAQ           ·e8m0HalfTable(SB), R10

// func dotMXFP4RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotMXFP4RowsAVX2(SB), NOSPLIT, $0-56
	SIGNED_ROWS(MX_CONSTS, MX_BLOCK, 17, MX_PF)
