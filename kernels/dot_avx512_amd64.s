// AVX-512 (F, BW, VL) + VNNI row-dot kernels: two 32-value blocks per
// 512-bit register, integer dot products with VPDPBUSD (unsigned x signed
// bytes, four products summed into an int32 lane, no saturation). Same row
// loop and float accumulation scheme as the AVX2 kernels.

#include "textflag.h"

// Z0's 16 lanes folded into Y0 (EVEX, so the upper half is not assumed
// zero), then into X0 lane 0 (clobbers Y1).
#define HSUM_Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS        Y1, Y0, Y0 \
	VEXTRACTF128  $1, Y0, X1 \
	VADDPS        X1, X0, X0 \
	VPERMILPS     $0x4e, X0, X1 \
	VADDPS        X1, X0, X0 \
	VMOVSHDUP     X0, X1 \
	VADDSS        X1, X0, X0

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

// X9 += product of the f16 at woff(AX) and xoff(BX) (Q4_1 min times q8_1 sum).
#define MINTERM(woff, xoff) \
	MOVWLZX     woff(AX), DX \
	MOVWLZX     xoff(BX), R12 \
	VMOVSS      (R13)(DX*4), X3 \
	VFMADD231SS (R13)(R12*4), X3, X9

// func dotQ8_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
TEXT ·dotQ8_0RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         f16+48(FP), R13
	MOVQ   w+0(FP), SI
	MOVQ   nrows+16(FP), R9
	MOVQ   y+40(FP), R11
	VPXORD Z31, Z31, Z31
	TESTQ  R9, R9
	JLE    q80done

q80row:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VPXORD Z0, Z0, Z0
	CMPQ   CX, $2
	JLT    q80fold

q80pair:
	SCALES2(0, 34, 0, 34)
	VMOVDQU      2(AX), Y4
	VINSERTI64X4 $1, 36(AX), Z4, Z4
	VMOVDQU      2(BX), Y5
	VINSERTI64X4 $1, 36(BX), Z5, Z5
	VPABSB       Z4, Z6
	VPMOVB2M     Z4, K1
	VPSUBB       Z5, Z31, K1, Z5 // x * sign(w)
	VPXORD       Z7, Z7, Z7
	VPDPBUSD     Z5, Z6, Z7
	VCVTDQ2PS    Z7, Z7
	VFMADD231PS  Z7, Z2, Z0
	ADDQ         $68, AX
	ADDQ         $68, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          q80pair

q80fold:
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	TESTQ         CX, CX
	JZ            q80sum
	SCALES1(0, 0)
	VMOVDQU       2(AX), Y4
	VMOVDQU       2(BX), Y5
	VPABSB        Y4, Y6
	VPMOVB2M      Y4, K1
	VPSUBB        Y5, Y31, K1, Y5
	VPXORD        Y7, Y7, Y7
	VPDPBUSD      Y5, Y6, Y7
	VCVTDQ2PS     Y7, Y7
	VFMADD231PS   Y7, Y2, Y0

q80sum:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, (R11)
	ADDQ         $4, R11
	ADDQ         stride+8(FP), SI
	DECQ         R9
	JNZ          q80row

q80done:
	VZEROUPPER
	RET

// Two Q4_0/Q4_1 blocks' nibbles (16 bytes at off and off+bstride) into Z4,
// laid out like two consecutive q8 blocks: [b0 lo | b0 hi | b1 lo | b1 hi]
// (needs Z14 = 0x0f bytes).
#define NIBBLES2(off, bstride) \
	VMOVDQU      off(AX), X4 \
	VINSERTI128  $1, (off+bstride)(AX), Y4, Y4 \
	VPSRLW       $4, Y4, Y5 \
	VINSERTI64X4 $1, Y5, Z4, Z4 \
	VSHUFI64X2   $0xd8, Z4, Z4, Z4 \
	VPANDD       Z14, Z4, Z4

// func dotQ4_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// Quants q-8 with q in 0..15: dot = sum(q*x) - sum(8*x), both by VPDPBUSD.
TEXT ·dotQ4_0RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         f16+48(FP), R13
	MOVQ         w+0(FP), SI
	MOVQ         nrows+16(FP), R9
	MOVQ         y+40(FP), R11
	MOVL         $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z14
	MOVL         $0x08080808, DX
	VPBROADCASTD DX, Z13
	TESTQ        R9, R9
	JLE          q40done

q40row:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VPXORD Z0, Z0, Z0
	CMPQ   CX, $2
	JLT    q40fold

q40pair:
	SCALES2(0, 18, 0, 34)
	NIBBLES2(2, 18)
	VMOVDQU      2(BX), Y5
	VINSERTI64X4 $1, 36(BX), Z5, Z5
	VPXORD       Z7, Z7, Z7
	VPDPBUSD     Z5, Z4, Z7
	VPXORD       Z8, Z8, Z8
	VPDPBUSD     Z5, Z13, Z8
	VPSUBD       Z8, Z7, Z7
	VCVTDQ2PS    Z7, Z7
	VFMADD231PS  Z7, Z2, Z0
	ADDQ         $36, AX
	ADDQ         $68, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          q40pair

q40fold:
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	TESTQ         CX, CX
	JZ            q40sum
	SCALES1(0, 0)
	VMOVDQU       2(AX), X4
	VPSRLW        $4, X4, X5
	VINSERTI128   $1, X5, Y4, Y4
	VPANDD        Y14, Y4, Y4
	VMOVDQU       2(BX), Y5
	VPXORD        Y7, Y7, Y7
	VPDPBUSD      Y5, Y4, Y7
	VPXORD        Y8, Y8, Y8
	VPDPBUSD      Y5, Y13, Y8
	VPSUBD        Y8, Y7, Y7
	VCVTDQ2PS     Y7, Y7
	VFMADD231PS   Y7, Y2, Y0

q40sum:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, (R11)
	ADDQ         $4, R11
	ADDQ         stride+8(FP), SI
	DECQ         R9
	JNZ          q40row

q40done:
	VZEROUPPER
	RET

// func dotQ4_1RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
// x is q8_1; the min terms m*s accumulate in X9.
TEXT ·dotQ4_1RowsAVX512(SB), NOSPLIT, $0-56
	MOVQ         f16+48(FP), R13
	MOVQ         w+0(FP), SI
	MOVQ         nrows+16(FP), R9
	MOVQ         y+40(FP), R11
	MOVL         $0x0f0f0f0f, DX
	VPBROADCASTD DX, Z14
	TESTQ        R9, R9
	JLE          q41done

q41row:
	MOVQ   SI, AX
	MOVQ   x+24(FP), BX
	MOVQ   nb+32(FP), CX
	VPXORD Z0, Z0, Z0
	VXORPS X9, X9, X9
	CMPQ   CX, $2
	JLT    q41fold

q41pair:
	SCALES2(0, 20, 0, 36)
	MINTERM(2, 2)
	MINTERM(22, 38)
	NIBBLES2(4, 20)
	VMOVDQU      4(BX), Y5
	VINSERTI64X4 $1, 40(BX), Z5, Z5
	VPXORD       Z7, Z7, Z7
	VPDPBUSD     Z5, Z4, Z7
	VCVTDQ2PS    Z7, Z7
	VFMADD231PS  Z7, Z2, Z0
	ADDQ         $40, AX
	ADDQ         $72, BX
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          q41pair

q41fold:
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	TESTQ         CX, CX
	JZ            q41sum
	SCALES1(0, 0)
	MINTERM(2, 2)
	VMOVDQU       4(AX), X4
	VPSRLW        $4, X4, X5
	VINSERTI128   $1, X5, Y4, Y4
	VPANDD        Y14, Y4, Y4
	VMOVDQU       4(BX), Y5
	VPXORD        Y7, Y7, Y7
	VPDPBUSD      Y5, Y4, Y7
	VCVTDQ2PS     Y7, Y7
	VFMADD231PS   Y7, Y2, Y0

q41sum:
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VPERMILPS    $0x4e, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VADDSS       X9, X0, X0
	VMOVSS       X0, (R11)
	ADDQ         $4, R11
	ADDQ         stride+8(FP), SI
	DECQ         R9
	JNZ          q41row

q41done:
	VZEROUPPER
	RET
