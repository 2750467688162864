// AVX2 kernels for Q5_0 weights against Q8_0 activations, for CPUs without
// AVX-512. Without mask registers the fifth bits are spread to bytes by
// hand: qh broadcast, VPSHUFB puts byte j/8 of qh in byte j, and a compare
// with the byte's own bit (1 << j%8) gives 0xff where the bit is set. The
// unsigned quants q = nibble | (that & 0x10) meet the signed activations in
// VPMADDUBSW (|q*x| pairs stay below 2^15), minus VPMADDUBSW(16, x).

#include "textflag.h"
#include "dot_amd64.h"

// VPSHUFB indexes: bytes 0-7 <- byte 0, 8-15 <- 1 (low lane), 16-23 <- 2,
// 24-31 <- 3 (high lane; every dword holds qh).
DATA q50shuf<>+0x00(SB)/8, $0x0000000000000000
DATA q50shuf<>+0x08(SB)/8, $0x0101010101010101
DATA q50shuf<>+0x10(SB)/8, $0x0202020202020202
DATA q50shuf<>+0x18(SB)/8, $0x0303030303030303
GLOBL q50shuf<>(SB), RODATA|NOPTR, $32

// Byte j: 1 << (j % 8).
DATA q50bits<>+0x00(SB)/8, $0x8040201008040201
DATA q50bits<>+0x08(SB)/8, $0x8040201008040201
DATA q50bits<>+0x10(SB)/8, $0x8040201008040201
DATA q50bits<>+0x18(SB)/8, $0x8040201008040201
GLOBL q50bits<>(SB), RODATA|NOPTR, $32

// Constants: Y15 = 0x0f bytes, Y14 = 0x10 bytes, Y13 = shuffle indexes,
// Y12 = bit masks, Y11 = 1 words.
#define Q50V_CONSTS \
	MOVL         $0x0f0f0f0f, DX \
	MOVD         DX, X15 \
	VPBROADCASTD X15, Y15 \
	MOVL         $0x10101010, DX \
	MOVD         DX, X14 \
	VPBROADCASTD X14, Y14 \
	VMOVDQU      q50shuf<>(SB), Y13 \
	VMOVDQU      q50bits<>(SB), Y12 \
	VPCMPEQW     Y11, Y11, Y11 \
	VPSRLW       $15, Y11, Y11

// Y4 = the unsigned quants q of the block at AX (clobbers Y5).
#define Q50V_QUANTS \
	NIBBLES32(6(AX), Y15) \
	VPBROADCASTD 2(AX), Y5 \
	VPSHUFB      Y13, Y5, Y5 \
	VPAND        Y12, Y5, Y5 \
	VPCMPEQB     Y12, Y5, Y5 \
	VPAND        Y14, Y5, Y5 \
	VPOR         Y5, Y4, Y4

// Y8 = the 8 int32 lane sums of (q-16)*x for the quants Y4 and the 32
// activation bytes at Q, as floats (clobbers Y9).
#define Q50V_DOT(Q) \
	VPMADDUBSW Q, Y4, Y8 \
	VPMADDUBSW Q, Y14, Y9 \
	VPSUBW     Y9, Y8, Y8 \
	VPMADDWD   Y11, Y8, Y8 \
	VCVTDQ2PS  Y8, Y8

// One block of the row at AX against the activations at BX into ACC.
#define Q50V_BLOCK(ACC) \
	Q50V_QUANTS \
	Q50V_DOT(2(BX)) \
	MOVWLZX      (AX), DX \
	MOVWLZX      (BX), R12 \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VMULSS       (R13)(R12*4), X2, X2 \
	VBROADCASTSS X2, Y2 \
	VFMADD231PS  Y8, Y2, ACC

// func dotQ5_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// One block per step, into two accumulators in turn (one FMA chain would
// bound a row at a block per FMA latency).
TEXT ·dotQ5_0RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ f16+48(FP), R13
	MOVQ w+0(FP), SI
	MOVQ nrows+16(FP), R9
	MOVQ y+40(FP), R11
	Q50V_CONSTS
	TESTQ R9, R9
	JLE   q50vdone

q50vrow:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	CMPQ   CX, $2
	JLT    q50vlast

q50vpair:
	PREFETCHT0   1024(AX)
	Q50V_BLOCK(Y0)
	ADDQ         $22, AX
	ADDQ         $34, BX
	Q50V_BLOCK(Y1)
	ADDQ         $22, AX
	ADDQ         $34, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          q50vpair

q50vlast:
	TESTQ        CX, CX
	JZ           q50vsum
	Q50V_BLOCK(Y0)

q50vsum:
	VADDPS Y1, Y0, Y0
	HSUM(Y0, X0, X1)
	ROWNEXT(q50vrow)

q50vdone:
	VZEROUPPER
	RET
