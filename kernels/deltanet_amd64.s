// DeltaStep's SIMD kernels: per state row, the products with the key and
// the query in one pass (two accumulators each), reduced together, then
// the row decayed and updated along the key in a second pass.

#include "textflag.h"

// func deltaStepAVX512(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)
TEXT ·deltaStepAVX512(SB), NOSPLIT, $0-68
	MOVQ         state+0(FP), DI
	MOVQ         rows+8(FP), R8
	MOVQ         n+16(FP), CX
	MOVQ         k+24(FP), SI
	MOVQ         q+32(FP), DX
	MOVQ         v+40(FP), R9
	MOVQ         out+48(FP), R10
	VMOVSS       decay+56(FP), X8
	VMOVSS       beta+60(FP), X10
	VMOVSS       kq+64(FP), X11
	VBROADCASTSS X8, Z9

dsrow512:
	TESTQ  R8, R8
	JZ     dsdone512
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ   AX, AX

dsdot512:
	VMOVUPS     (DI)(AX*4), Z4
	VMOVUPS     64(DI)(AX*4), Z5
	VFMADD231PS (SI)(AX*4), Z4, Z0
	VFMADD231PS (DX)(AX*4), Z4, Z1
	VFMADD231PS 64(SI)(AX*4), Z5, Z2
	VFMADD231PS 64(DX)(AX*4), Z5, Z3
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         dsdot512

	// a = sum of Z0+Z2, b = sum of Z1+Z3
	VADDPS        Z2, Z0, Z0
	VADDPS        Z3, Z1, Z1
	VEXTRACTF64X4 $1, Z0, Y2
	VADDPS        Y2, Y0, Y0
	VEXTRACTF64X4 $1, Z1, Y3
	VADDPS        Y3, Y1, Y1
	VEXTRACTF128  $1, Y0, X2
	VADDPS        X2, X0, X0
	VEXTRACTF128  $1, Y1, X3
	VADDPS        X3, X1, X1
	VHADDPS       X1, X0, X0
	VHADDPS       X0, X0, X0 // a, b, a, b
	VMOVSHDUP     X0, X1     // b

	// d = beta*(v[j] - g*a); out[j] = g*b + d*kq
	VMOVSS       (R9), X6
	VFNMADD231SS X8, X0, X6
	VMULSS       X10, X6, X6
	VMULSS       X8, X1, X7
	VFMADD231SS  X11, X6, X7
	VMOVSS       X7, (R10)
	VBROADCASTSS X6, Z6
	XORQ         AX, AX

dsupd512:
	VMULPS      (DI)(AX*4), Z9, Z4
	VMULPS      64(DI)(AX*4), Z9, Z5
	VFMADD231PS (SI)(AX*4), Z6, Z4
	VFMADD231PS 64(SI)(AX*4), Z6, Z5
	VMOVUPS     Z4, (DI)(AX*4)
	VMOVUPS     Z5, 64(DI)(AX*4)
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         dsupd512

	LEAQ (DI)(CX*4), DI
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ R8
	JMP  dsrow512

dsdone512:
	VZEROUPPER
	RET

// func deltaStepAVX2(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)
TEXT ·deltaStepAVX2(SB), NOSPLIT, $0-68
	MOVQ         state+0(FP), DI
	MOVQ         rows+8(FP), R8
	MOVQ         n+16(FP), CX
	MOVQ         k+24(FP), SI
	MOVQ         q+32(FP), DX
	MOVQ         v+40(FP), R9
	MOVQ         out+48(FP), R10
	VMOVSS       decay+56(FP), X8
	VMOVSS       beta+60(FP), X10
	VMOVSS       kq+64(FP), X11
	VBROADCASTSS X8, Y9

dsrow2:
	TESTQ  R8, R8
	JZ     dsdone2
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

dsdot2:
	VMOVUPS     (DI)(AX*4), Y4
	VMOVUPS     32(DI)(AX*4), Y5
	VFMADD231PS (SI)(AX*4), Y4, Y0
	VFMADD231PS (DX)(AX*4), Y4, Y1
	VFMADD231PS 32(SI)(AX*4), Y5, Y2
	VFMADD231PS 32(DX)(AX*4), Y5, Y3
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         dsdot2

	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VEXTRACTF128 $1, Y0, X2
	VADDPS       X2, X0, X0
	VEXTRACTF128 $1, Y1, X3
	VADDPS       X3, X1, X1
	VHADDPS      X1, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSHDUP    X0, X1

	VMOVSS       (R9), X6
	VFNMADD231SS X8, X0, X6
	VMULSS       X10, X6, X6
	VMULSS       X8, X1, X7
	VFMADD231SS  X11, X6, X7
	VMOVSS       X7, (R10)
	VBROADCASTSS X6, Y6
	XORQ         AX, AX

dsupd2:
	VMULPS      (DI)(AX*4), Y9, Y4
	VMULPS      32(DI)(AX*4), Y9, Y5
	VFMADD231PS (SI)(AX*4), Y6, Y4
	VFMADD231PS 32(SI)(AX*4), Y6, Y5
	VMOVUPS     Y4, (DI)(AX*4)
	VMOVUPS     Y5, 32(DI)(AX*4)
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         dsupd2

	LEAQ (DI)(CX*4), DI
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ R8
	JMP  dsrow2

dsdone2:
	VZEROUPPER
	RET

// REDUCE4 sums each of Za..Zd across its lanes into lanes 0..3 of Xa
// (clobbers Y14 and the Y halves of Zb..Zd).
#define REDUCE4(Za, Zb, Zc, Zd, Ya, Yb, Yc, Yd, Xa) \
	VEXTRACTF64X4 $1, Za, Y14 \
	VADDPS        Y14, Ya, Ya \
	VEXTRACTF64X4 $1, Zb, Y14 \
	VADDPS        Y14, Yb, Yb \
	VEXTRACTF64X4 $1, Zc, Y14 \
	VADDPS        Y14, Yc, Yc \
	VEXTRACTF64X4 $1, Zd, Y14 \
	VADDPS        Y14, Yd, Yd \
	VHADDPS       Yb, Ya, Ya \
	VHADDPS       Yd, Yc, Yc \
	VHADDPS       Yc, Ya, Ya \
	VEXTRACTF128  $1, Ya, X14 \
	VADDPS        X14, Xa, Xa

// func dots4AVX512(x *float32, xstride, n int, rows *float32, stride, m int, y *float32, ystride int)
// Two rows at a time against four vectors: eight accumulators, each row
// and vector chunk loaded once per 16 values.
TEXT ·dots4AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ xstride+8(FP), R14
	SHLQ $2, R14
	LEAQ (SI)(R14*1), R9
	LEAQ (R9)(R14*1), R10
	LEAQ (R10)(R14*1), BX
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), DI
	MOVQ stride+32(FP), R14
	SHLQ $2, R14
	LEAQ (DI)(R14*1), DX
	MOVQ m+40(FP), R8
	MOVQ y+48(FP), R11
	MOVQ ystride+56(FP), R12
	SHLQ $2, R12
	LEAQ (R12)(R12*2), R13

d4row:
	CMPQ   R8, $2
	JLT    d4done
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	XORQ   AX, AX

d4k:
	VMOVUPS     (DI)(AX*4), Z8
	VMOVUPS     (DX)(AX*4), Z9
	VMOVUPS     (SI)(AX*4), Z10
	VFMADD231PS Z10, Z8, Z0
	VFMADD231PS Z10, Z9, Z4
	VMOVUPS     (R9)(AX*4), Z11
	VFMADD231PS Z11, Z8, Z1
	VFMADD231PS Z11, Z9, Z5
	VMOVUPS     (R10)(AX*4), Z12
	VFMADD231PS Z12, Z8, Z2
	VFMADD231PS Z12, Z9, Z6
	VMOVUPS     (BX)(AX*4), Z13
	VFMADD231PS Z13, Z8, Z3
	VFMADD231PS Z13, Z9, Z7
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         d4k

	REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0)
	REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4)
	VMOVSS     X0, (R11)
	VEXTRACTPS $1, X0, (R11)(R12*1)
	VEXTRACTPS $2, X0, (R11)(R12*2)
	VEXTRACTPS $3, X0, (R11)(R13*1)
	VMOVSS     X4, 4(R11)
	VEXTRACTPS $1, X4, 4(R11)(R12*1)
	VEXTRACTPS $2, X4, 4(R11)(R12*2)
	VEXTRACTPS $3, X4, 4(R11)(R13*1)

	LEAQ (DI)(R14*2), DI
	LEAQ (DX)(R14*2), DX
	ADDQ $8, R11
	SUBQ $2, R8
	JMP  d4row

d4done:
	VZEROUPPER
	RET
