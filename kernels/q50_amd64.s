// AVX-512 VNNI kernels for Q5_0 weights against Q8_0 activations. A Q5_0
// block is 22 bytes: f16 d, a u32 qh holding the fifth bit of each of the
// 32 quants, and 16 bytes of nibbles (value j low, value j+16 high). The
// nibbles are unpacked as for q4_0, and the fifth bits are added as 0x10
// through a mask register loaded straight from qh (bit j is byte j), which
// gives the unsigned quants q in 0..31; VPDPBUSD then sums q*x and 16*x,
// whose difference is the exact integer dot of (q-16) with x.

#include "textflag.h"
#include "dot_amd64.h"

// Shared by the rows of a group, for the two blocks of activations at BX
// (34 bytes apart): Z5 = their quants, Z8 = 16*sum(x) per lane (the bias
// of the weights' q-16), Z9 = their scales (lanes 0-7 block 0, 8-15 block
// 1), looked up in the f16 table at R13. Needs Z13 = 0x10 bytes.
#define Q50_XPAIR \
	VMOVDQU      2(BX), Y5 \
	VINSERTI64X4 $1, 36(BX), Z5, Z5 \
	VPXORD       Z8, Z8, Z8 \
	VPDPBUSD     Z5, Z13, Z8 \
	MOVWLZX      (BX), R12 \
	VBROADCASTSS (R13)(R12*4), Y9 \
	MOVWLZX      34(BX), R12 \
	VBROADCASTSS (R13)(R12*4), Y10 \
	VINSERTF64X4 $1, Y10, Z9, Z9

// One row's two blocks at W (a base operand such as (AX) or (AX)(R8*1),
// blocks 22 bytes apart) against Q50_XPAIR's activations, into ACC: the
// nibbles are unpacked in value order (Z14 = 0x0f bytes), the fifth bits
// of both blocks form one 64-bit mask that adds 0x10 to their bytes.
#define Q50_WPAIR(W, ACC) \
	MOVWLZX      W, DX \
	VBROADCASTSS (R13)(DX*4), Y2 \
	MOVWLZX      22 W, DX \
	VBROADCASTSS (R13)(DX*4), Y3 \
	VINSERTF64X4 $1, Y3, Z2, Z2 \
	VMULPS       Z9, Z2, Z2 \
	VMOVDQU      6 W, X4 \
	VINSERTI128  $1, 28 W, Y4, Y4 \
	VPSRLW       $4, Y4, Y6 \
	VINSERTI64X4 $1, Y6, Z4, Z4 \
	VSHUFI64X2   $0xd8, Z4, Z4, Z4 \
	VPANDD       Z14, Z4, Z4 \
	KMOVD        2 W, K1 \
	KMOVD        24 W, K2 \
	KUNPCKDQ     K1, K2, K1 \
	VPADDB       Z13, Z4, K1, Z4 \
	VPXORD       Z7, Z7, Z7 \
	VPDPBUSD     Z5, Z4, Z7 \
	VPSUBD       Z8, Z7, Z7 \
	VCVTDQ2PS    Z7, Z7 \
	VFMADD231PS  Z7, Z2, ACC

// Q50_XPAIR for the one block of activations at BX (ymm halves).
#define Q50_XONE \
	VMOVDQU      2(BX), Y5 \
	VPXORD       Y8, Y8, Y8 \
	VPDPBUSD     Y5, Y13, Y8 \
	MOVWLZX      (BX), R12 \
	VBROADCASTSS (R13)(R12*4), Y9

// Q50_WPAIR for the one block at W, into the 8 lanes of ACC.
#define Q50_WONE(W, ACC) \
	MOVWLZX      W, DX \
	VBROADCASTSS (R13)(DX*4), Y2 \
	VMULPS       Y9, Y2, Y2 \
	VMOVDQU      6 W, X4 \
	VPSRLW       $4, X4, X6 \
	VINSERTI128  $1, X6, Y4, Y4 \
	VPANDD       Y14, Y4, Y4 \
	KMOVD        2 W, K1 \
	VPADDB       Y13, Y4, K1, Y4 \
	VPXORD       Y7, Y7, Y7 \
	VPDPBUSD     Y5, Y4, Y7 \
	VPSUBD       Y8, Y7, Y7 \
	VCVTDQ2PS    Y7, Y7 \
	VFMADD231PS  Y7, Y2, ACC

// Adds the upper 8 lanes of ZACC to its lower 8 (YACC); clobbers Y15.
#define Q50_FOLD(ZACC, YACC) \
	VEXTRACTF64X4 $1, ZACC, Y15 \
	VADDPS        Y15, YACC, YACC

// Stores the sum of the 8 lanes of YACC (XACC its low half) at OFF(R11).
#define Q50_STORE(YACC, XACC, OFF) \
	VEXTRACTF32X4 $1, YACC, X1 \
	VADDPS        X1, XACC, X0 \
	VPERMILPS     $0x4e, X0, X1 \
	VADDPS        X1, X0, X0 \
	VMOVSHDUP     X0, X1 \
	VADDSS        X1, X0, X0 \
	VMOVSS        X0, OFF(R11)

// Y4 = the unsigned quants of the one block at AX (clobbers Y5, K1).
#define Q50_QUANTS1 \
	NIBBLES32(6(AX), Y14) \
	KMOVD       2(AX), K1 \
	VPADDB      Y13, Y4, K1, Y4

// func dotQ5_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// Rows in groups of four share each pair of activation blocks' loads,
// bias and scales; the rest go one by one through the same macros, so a
// row's result does not depend on its group.
TEXT ·dotQ5_0RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         f16+48(FP), R13
	MOVQ         w+0(FP), SI
	MOVQ         stride+8(FP), R8
	LEAQ         (R8)(R8*2), R10
	MOVQ         nrows+16(FP), R9
	MOVQ         y+40(FP), R11
	MOVL         $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z14
	MOVL         $0x10101010, DX
	VPBROADCASTD DX, Z13
	CMPQ         R9, $4
	JLT          q50single

q50grp:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	CMPQ   CX, $2
	JLT    q50gfold

q50gpair:
	// 8 KiB ahead of each row measured best (1 KiB: 25% under the
	// one-row loop from memory; the four streams defeat the hardware
	// prefetcher's lead).
	PREFETCHT0 8192(AX)
	PREFETCHT0 8192(AX)(R8*1)
	PREFETCHT0 8192(AX)(R8*2)
	PREFETCHT0 8192(AX)(R10*1)
	Q50_XPAIR
	Q50_WPAIR((AX), Z16)
	Q50_WPAIR((AX)(R8*1), Z17)
	Q50_WPAIR((AX)(R8*2), Z18)
	Q50_WPAIR((AX)(R10*1), Z19)
	ADDQ $44, AX
	ADDQ $68, BX
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  q50gpair

q50gfold:
	Q50_FOLD(Z16, Y16)
	Q50_FOLD(Z17, Y17)
	Q50_FOLD(Z18, Y18)
	Q50_FOLD(Z19, Y19)
	TESTQ CX, CX
	JZ    q50gsum
	Q50_XONE
	Q50_WONE((AX), Y16)
	Q50_WONE((AX)(R8*1), Y17)
	Q50_WONE((AX)(R8*2), Y18)
	Q50_WONE((AX)(R10*1), Y19)

q50gsum:
	Q50_STORE(Y16, X16, 0)
	Q50_STORE(Y17, X17, 4)
	Q50_STORE(Y18, X18, 8)
	Q50_STORE(Y19, X19, 12)
	ADDQ $16, R11
	LEAQ (SI)(R8*4), SI
	SUBQ $4, R9
	CMPQ R9, $4
	JGE  q50grp

q50single:
	TESTQ R9, R9
	JLE   q50done

q50row:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VPXORD Z16, Z16, Z16
	CMPQ   CX, $2
	JLT    q50fold

q50pair:
	PREFETCHT0 1024(AX)
	Q50_XPAIR
	Q50_WPAIR((AX), Z16)
	ADDQ       $44, AX
	ADDQ       $68, BX
	SUBQ       $2, CX
	CMPQ       CX, $2
	JGE        q50pair

q50fold:
	Q50_FOLD(Z16, Y16)
	TESTQ CX, CX
	JZ    q50sum
	Q50_XONE
	Q50_WONE((AX), Y16)

q50sum:
	Q50_STORE(Y16, X16, 0)
	ADDQ $4, R11
	ADDQ R8, SI
	DECQ R9
	JNZ  q50row

q50done:
	VZEROUPPER
	RET
