// DeltaStep's SIMD kernels: per state row, the products with the key and
// the query in one pass (two accumulators each), reduced together, then
// the row decayed and updated along the key in a second pass. One body
// for both widths: the macros take the vector registers (Z or Y) and the
// byte width W of one register.

#include "textflag.h"

// DS_ARGS loads the arguments and broadcasts the decay into DECAY.
#define DS_ARGS(DECAY) \
	MOVQ         state+0(FP), DI \
	MOVQ         rows+8(FP), R8 \
	MOVQ         n+16(FP), CX \
	MOVQ         k+24(FP), SI \
	MOVQ         q+32(FP), DX \
	MOVQ         v+40(FP), R9 \
	MOVQ         out+48(FP), R10 \
	VMOVSS       decay+56(FP), X8 \
	VMOVSS       beta+60(FP), X10 \
	VMOVSS       kq+64(FP), X11 \
	VBROADCASTSS X8, DECAY

// DS_ZERO clears the four accumulators and the column index.
#define DS_ZERO(A0, A1, A2, A3) \
	VXORPS A0, A0, A0 \
	VXORPS A1, A1, A1 \
	VXORPS A2, A2, A2 \
	VXORPS A3, A3, A3 \
	XORQ   AX, AX

// DS_DOT accumulates two registers of the row against the key (A0, A2)
// and the query (A1, A3).
#define DS_DOT(W, A0, A1, A2, A3, T0, T1) \
	VMOVUPS     (DI)(AX*4), T0 \
	VMOVUPS     W(DI)(AX*4), T1 \
	VFMADD231PS (SI)(AX*4), T0, A0 \
	VFMADD231PS (DX)(AX*4), T0, A1 \
	VFMADD231PS W(SI)(AX*4), T1, A2 \
	VFMADD231PS W(DX)(AX*4), T1, A3

// DS_SCALAR takes a = row.k in X0 and b = row.q in X1: d = beta*(v[j] -
// decay*a), out[j] = decay*b + d*kq, and broadcasts d into D.
#define DS_SCALAR(D) \
	VMOVSS       (R9), X6 \
	VFNMADD231SS X8, X0, X6 \
	VMULSS       X10, X6, X6 \
	VMULSS       X8, X1, X7 \
	VFMADD231SS  X11, X6, X7 \
	VMOVSS       X7, (R10) \
	VBROADCASTSS X6, D \
	XORQ         AX, AX

// DS_UPDATE decays two registers of the row and adds d times the key.
#define DS_UPDATE(W, DECAY, D, T0, T1) \
	VMULPS      (DI)(AX*4), DECAY, T0 \
	VMULPS      W(DI)(AX*4), DECAY, T1 \
	VFMADD231PS (SI)(AX*4), D, T0 \
	VFMADD231PS W(SI)(AX*4), D, T1 \
	VMOVUPS     T0, (DI)(AX*4) \
	VMOVUPS     T1, W(DI)(AX*4)

// DS_NEXTROW moves to the next state row, value and output.
#define DS_NEXTROW \
	LEAQ (DI)(CX*4), DI \
	ADDQ $4, R9 \
	ADDQ $4, R10 \
	DECQ R8

// func deltaStepAVX512(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)
TEXT ·deltaStepAVX512(SB), NOSPLIT, $0-68
	DS_ARGS(Z9)

dsrow512:
	TESTQ R8, R8
	JZ    dsdone512
	DS_ZERO(Z0, Z1, Z2, Z3)

dsdot512:
	DS_DOT(64, Z0, Z1, Z2, Z3, Z4, Z5)
	ADDQ $32, AX
	CMPQ AX, CX
	JLT  dsdot512

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
	DS_SCALAR(Z6)

dsupd512:
	DS_UPDATE(64, Z9, Z6, Z4, Z5)
	ADDQ $32, AX
	CMPQ AX, CX
	JLT  dsupd512
	DS_NEXTROW
	JMP  dsrow512

dsdone512:
	VZEROUPPER
	RET

// func deltaStepAVX2(state *float32, rows, n int, k, q, v, out *float32, decay, beta, kq float32)
TEXT ·deltaStepAVX2(SB), NOSPLIT, $0-68
	DS_ARGS(Y9)

dsrow2:
	TESTQ R8, R8
	JZ    dsdone2
	DS_ZERO(Y0, Y1, Y2, Y3)

dsdot2:
	DS_DOT(32, Y0, Y1, Y2, Y3, Y4, Y5)
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  dsdot2

	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VEXTRACTF128 $1, Y0, X2
	VADDPS       X2, X0, X0
	VEXTRACTF128 $1, Y1, X3
	VADDPS       X3, X1, X1
	VHADDPS      X1, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSHDUP    X0, X1
	DS_SCALAR(Y6)

dsupd2:
	DS_UPDATE(32, Y9, Y6, Y4, Y5)
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  dsupd2
	DS_NEXTROW
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
