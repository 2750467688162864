// AVX-512 kernels of AttnDotF16RowsMulti: nx query vectors (f16) against 4
// rows (f16) at a time. Every (query, row) pair has its own 16-lane float32
// accumulator and takes the 16-value chunks in order, exactly as
// attnF16AVX2's mode 0 (tinyBLAS) does for one query, so the results are
// bit-identical; what is shared is the conversion of each row chunk, done
// once for all the queries. A tail of fewer than 16 values is loaded
// masked (zeros), as the one-query kernel pads it. Then the AVX-512
// reduction tree per pair.
//
// Registers: AX chunk offset (bytes; the y pointer while reducing),
// SI BX CX R14 the 4 rows, DI R15 R12 R13 the queries, R10 the bytes of
// whole chunks, DX row stride, R11 rows left, R8 y of the row group,
// R9 y stride, K1 the tail mask, Z0-Z15 accumulators (query g, row k in
// Z(4g+k)), Z16-Z19 the row chunks, Z20-Z23 the query chunks, Z24-Z26
// reduction temporaries.

#include "textflag.h"

#define RED(acc, yacc, xacc, off) \
	VEXTRACTF32X8 $1, acc, Y24 \
	VADDPS        Y24, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, X25 \
	VADDPS        X25, xacc, xacc \
	VMOVHLPS      xacc, xacc, X26 \
	VADDPS        X26, xacc, xacc \
	VMOVSHDUP     xacc, X26 \
	VADDSS        X26, xacc, xacc \
	VMOVSS        xacc, off(AX)

#define ROWS \
	VCVTPH2PS (SI)(AX*1), Z16 \
	VCVTPH2PS (BX)(AX*1), Z17 \
	VCVTPH2PS (CX)(AX*1), Z18 \
	VCVTPH2PS (R14)(AX*1), Z19

#define ROWSM \
	VCVTPH2PS.Z (SI)(AX*1), K1, Z16 \
	VCVTPH2PS.Z (BX)(AX*1), K1, Z17 \
	VCVTPH2PS.Z (CX)(AX*1), K1, Z18 \
	VCVTPH2PS.Z (R14)(AX*1), K1, Z19

#define FMA4(zx, a0, a1, a2, a3) \
	VFMADD231PS Z16, zx, a0 \
	VFMADD231PS Z17, zx, a1 \
	VFMADD231PS Z18, zx, a2 \
	VFMADD231PS Z19, zx, a3

// func attnMulti1AVX512(x *uint16, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti1AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ xstride+8(FP), R9
	SHLQ $1, R9
	MOVQ n+16(FP), R10
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, R14
	SHLL CX, R14
	DECL R14
	KMOVW R14, K1
	ANDQ $-16, R10
	SHLQ $1, R10
	MOVQ rows+24(FP), SI
	MOVQ stride+32(FP), DX
	SHLQ $1, DX
	MOVQ m+40(FP), R11
	MOVQ y+48(FP), R8
	MOVQ ystride+56(FP), R9
	SHLQ $2, R9

am1group:
	TESTQ R11, R11
	JZ    am1done
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
am1chunk:
	CMPQ AX, R10
	JGE  am1tail
	ROWS
	VCVTPH2PS (DI)(AX*1), Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	ADDQ $32, AX
	JMP  am1chunk
am1tail:
	KORTESTW K1, K1
	JZ       am1reduce
	ROWSM
	VCVTPH2PS.Z (DI)(AX*1), K1, Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
am1reduce:
	MOVQ R8, AX
	RED(Z0, Y0, X0, 0)
	RED(Z1, Y1, X1, 4)
	RED(Z2, Y2, X2, 8)
	RED(Z3, Y3, X3, 12)
	ADDQ $16, R8
	LEAQ (R14)(DX*1), SI
	SUBQ $4, R11
	JMP  am1group
am1done:
	VZEROUPPER
	RET

// func attnMulti2AVX512(x *uint16, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti2AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ xstride+8(FP), R9
	SHLQ $1, R9
	LEAQ (DI)(R9*1), R15
	MOVQ n+16(FP), R10
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, R14
	SHLL CX, R14
	DECL R14
	KMOVW R14, K1
	ANDQ $-16, R10
	SHLQ $1, R10
	MOVQ rows+24(FP), SI
	MOVQ stride+32(FP), DX
	SHLQ $1, DX
	MOVQ m+40(FP), R11
	MOVQ y+48(FP), R8
	MOVQ ystride+56(FP), R9
	SHLQ $2, R9

am2group:
	TESTQ R11, R11
	JZ    am2done
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ AX, AX
am2chunk:
	CMPQ AX, R10
	JGE  am2tail
	ROWS
	VCVTPH2PS (DI)(AX*1), Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS (R15)(AX*1), Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
	ADDQ $32, AX
	JMP  am2chunk
am2tail:
	KORTESTW K1, K1
	JZ       am2reduce
	ROWSM
	VCVTPH2PS.Z (DI)(AX*1), K1, Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS.Z (R15)(AX*1), K1, Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
am2reduce:
	MOVQ R8, AX
	RED(Z0, Y0, X0, 0)
	RED(Z1, Y1, X1, 4)
	RED(Z2, Y2, X2, 8)
	RED(Z3, Y3, X3, 12)
	ADDQ R9, AX
	RED(Z4, Y4, X4, 0)
	RED(Z5, Y5, X5, 4)
	RED(Z6, Y6, X6, 8)
	RED(Z7, Y7, X7, 12)
	ADDQ $16, R8
	LEAQ (R14)(DX*1), SI
	SUBQ $4, R11
	JMP  am2group
am2done:
	VZEROUPPER
	RET

// func attnMulti3AVX512(x *uint16, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti3AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ xstride+8(FP), R9
	SHLQ $1, R9
	LEAQ (DI)(R9*1), R15
	LEAQ (R15)(R9*1), R12
	MOVQ n+16(FP), R10
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, R14
	SHLL CX, R14
	DECL R14
	KMOVW R14, K1
	ANDQ $-16, R10
	SHLQ $1, R10
	MOVQ rows+24(FP), SI
	MOVQ stride+32(FP), DX
	SHLQ $1, DX
	MOVQ m+40(FP), R11
	MOVQ y+48(FP), R8
	MOVQ ystride+56(FP), R9
	SHLQ $2, R9

am3group:
	TESTQ R11, R11
	JZ    am3done
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	XORQ AX, AX
am3chunk:
	CMPQ AX, R10
	JGE  am3tail
	ROWS
	VCVTPH2PS (DI)(AX*1), Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS (R15)(AX*1), Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
	VCVTPH2PS (R12)(AX*1), Z22
	FMA4(Z22, Z8, Z9, Z10, Z11)
	ADDQ $32, AX
	JMP  am3chunk
am3tail:
	KORTESTW K1, K1
	JZ       am3reduce
	ROWSM
	VCVTPH2PS.Z (DI)(AX*1), K1, Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS.Z (R15)(AX*1), K1, Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
	VCVTPH2PS.Z (R12)(AX*1), K1, Z22
	FMA4(Z22, Z8, Z9, Z10, Z11)
am3reduce:
	MOVQ R8, AX
	RED(Z0, Y0, X0, 0)
	RED(Z1, Y1, X1, 4)
	RED(Z2, Y2, X2, 8)
	RED(Z3, Y3, X3, 12)
	ADDQ R9, AX
	RED(Z4, Y4, X4, 0)
	RED(Z5, Y5, X5, 4)
	RED(Z6, Y6, X6, 8)
	RED(Z7, Y7, X7, 12)
	ADDQ R9, AX
	RED(Z8, Y8, X8, 0)
	RED(Z9, Y9, X9, 4)
	RED(Z10, Y10, X10, 8)
	RED(Z11, Y11, X11, 12)
	ADDQ $16, R8
	LEAQ (R14)(DX*1), SI
	SUBQ $4, R11
	JMP  am3group
am3done:
	VZEROUPPER
	RET

// func attnMulti4AVX512(x *uint16, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti4AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), DI
	MOVQ xstride+8(FP), R9
	SHLQ $1, R9
	LEAQ (DI)(R9*1), R15
	LEAQ (R15)(R9*1), R12
	LEAQ (R12)(R9*1), R13
	MOVQ n+16(FP), R10
	MOVQ R10, CX
	ANDQ $15, CX
	MOVL $1, R14
	SHLL CX, R14
	DECL R14
	KMOVW R14, K1
	ANDQ $-16, R10
	SHLQ $1, R10
	MOVQ rows+24(FP), SI
	MOVQ stride+32(FP), DX
	SHLQ $1, DX
	MOVQ m+40(FP), R11
	MOVQ y+48(FP), R8
	MOVQ ystride+56(FP), R9
	SHLQ $2, R9

am4group:
	TESTQ R11, R11
	JZ    am4done
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), R14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	XORQ AX, AX
am4chunk:
	CMPQ AX, R10
	JGE  am4tail
	ROWS
	VCVTPH2PS (DI)(AX*1), Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS (R15)(AX*1), Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
	VCVTPH2PS (R12)(AX*1), Z22
	FMA4(Z22, Z8, Z9, Z10, Z11)
	VCVTPH2PS (R13)(AX*1), Z23
	FMA4(Z23, Z12, Z13, Z14, Z15)
	ADDQ $32, AX
	JMP  am4chunk
am4tail:
	KORTESTW K1, K1
	JZ       am4reduce
	ROWSM
	VCVTPH2PS.Z (DI)(AX*1), K1, Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	VCVTPH2PS.Z (R15)(AX*1), K1, Z21
	FMA4(Z21, Z4, Z5, Z6, Z7)
	VCVTPH2PS.Z (R12)(AX*1), K1, Z22
	FMA4(Z22, Z8, Z9, Z10, Z11)
	VCVTPH2PS.Z (R13)(AX*1), K1, Z23
	FMA4(Z23, Z12, Z13, Z14, Z15)
am4reduce:
	MOVQ R8, AX
	RED(Z0, Y0, X0, 0)
	RED(Z1, Y1, X1, 4)
	RED(Z2, Y2, X2, 8)
	RED(Z3, Y3, X3, 12)
	ADDQ R9, AX
	RED(Z4, Y4, X4, 0)
	RED(Z5, Y5, X5, 4)
	RED(Z6, Y6, X6, 8)
	RED(Z7, Y7, X7, 12)
	ADDQ R9, AX
	RED(Z8, Y8, X8, 0)
	RED(Z9, Y9, X9, 4)
	RED(Z10, Y10, X10, 8)
	RED(Z11, Y11, X11, 12)
	ADDQ R9, AX
	RED(Z12, Y12, X12, 0)
	RED(Z13, Y13, X13, 4)
	RED(Z14, Y14, X14, 8)
	RED(Z15, Y15, X15, 12)
	ADDQ $16, R8
	LEAQ (R14)(DX*1), SI
	SUBQ $4, R11
	JMP  am4group
am4done:
	VZEROUPPER
	RET
