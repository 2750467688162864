// AVX-512 kernels of AttnDotF16RowsMulti: nx query vectors (float32
// holding f16 values) against 4 rows (f16) at a time. Every (query, row)
// pair has its own 16-lane float32 accumulator and takes the 16-value
// chunks in order, exactly as attnF16AVX2's mode 0 (tinyBLAS) does for one
// query, so the results are bit-identical; what is shared is the
// conversion of each row chunk, done once for all the queries, whose chunks
// are the memory operands of the multiply-adds. A tail of fewer than 16
// values is loaded masked (zeros), as the one-query kernel pads it. Then
// the AVX-512 reduction tree per pair.
//
// Registers: AX chunk offset (bytes; the y pointer while reducing),
// SI BX CX R14 the 4 rows, DI R15 R12 R13 the queries, R10 the bytes of
// whole chunks, DX row stride, R11 rows left, R8 y of the row group,
// R9 y stride, K1 the tail mask, Z0-Z15 accumulators (query g, row k in
// Z(4g+k)), Z16-Z19 the row chunks, Z20-Z23 the query chunks, Z24-Z25
// reduction temporaries, Z26 the reduction's lane order.

#include "textflag.h"

// The transposed reduction of the 16 accumulators Z0-Z15 (query g, row k
// in Z(4g+k)): the same tree as each pair's own (lanes i and i+8, then i
// and i+4, then (0+2)+(1+3)), done for all of them with 15 shuffle pairs
// instead of 16 horizontal sums. Z0 ends with the result of query g, row
// k in lane 4g+k (VPERMPS by the index in Z26).
#define PAIR8(a, b, d) \
	VSHUFF32X4 $0x44, b, a, Z24 \
	VSHUFF32X4 $0xee, b, a, Z25 \
	VADDPS     Z25, Z24, d

#define PAIR4(a, b, d) \
	VSHUFF32X4 $0x88, b, a, Z24 \
	VSHUFF32X4 $0xdd, b, a, Z25 \
	VADDPS     Z25, Z24, d

#define PAIR2(a, b, d) \
	VSHUFPS $0x44, b, a, Z24 \
	VSHUFPS $0xee, b, a, Z25 \
	VADDPS  Z25, Z24, d

#define PAIR1(a, b, d) \
	VSHUFPS $0x88, b, a, Z24 \
	VSHUFPS $0xdd, b, a, Z25 \
	VADDPS  Z25, Z24, d

#define TRANS16 \
	PAIR8(Z0, Z1, Z0) \
	PAIR8(Z2, Z3, Z1) \
	PAIR8(Z4, Z5, Z2) \
	PAIR8(Z6, Z7, Z3) \
	PAIR8(Z8, Z9, Z4) \
	PAIR8(Z10, Z11, Z5) \
	PAIR8(Z12, Z13, Z6) \
	PAIR8(Z14, Z15, Z7) \
	PAIR4(Z0, Z1, Z0) \
	PAIR4(Z2, Z3, Z1) \
	PAIR4(Z4, Z5, Z2) \
	PAIR4(Z6, Z7, Z3) \
	PAIR2(Z0, Z1, Z0) \
	PAIR2(Z2, Z3, Z1) \
	PAIR1(Z0, Z1, Z0) \
	VPERMPS    Z0, Z26, Z0

// Lane 4g+k of the reduced vector takes lane 4k+g.

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

// Query chunk (float32, at twice the rows' byte offset) as the memory
// operand of its 4 row products.
#define FMAX(xq, a0, a1, a2, a3) \
	VFMADD231PS (xq)(AX*2), Z16, a0 \
	VFMADD231PS (xq)(AX*2), Z17, a1 \
	VFMADD231PS (xq)(AX*2), Z18, a2 \
	VFMADD231PS (xq)(AX*2), Z19, a3

#define FMA4(zx, a0, a1, a2, a3) \
	VFMADD231PS Z16, zx, a0 \
	VFMADD231PS Z17, zx, a1 \
	VFMADD231PS Z18, zx, a2 \
	VFMADD231PS Z19, zx, a3

// The queries after the first: their pointer (the one before it plus
// xstride), chunk register, accumulators and lane group of the result.
// The first query (DI, Z20, Z0-Z3, lanes 0-3) is written out in KERNEL.
#define MORE1(M)
#define MORE2(M) M(R15, DI, Z21, Z4, Z5, Z6, Z7, $1)
#define MORE3(M) MORE2(M); M(R12, R15, Z22, Z8, Z9, Z10, Z11, $2)
#define MORE4(M) MORE3(M); M(R13, R12, Z23, Z12, Z13, Z14, Z15, $3)

#define Q_PTR(xq, prev, zx, a0, a1, a2, a3, lane) LEAQ (prev)(R9*1), xq
#define Q_FMAX(xq, prev, zx, a0, a1, a2, a3, lane) FMAX(xq, a0, a1, a2, a3)

#define Q_TAIL(xq, prev, zx, a0, a1, a2, a3, lane) \
	VMOVUPS.Z (xq)(AX*2), K1, zx \
	FMA4(zx, a0, a1, a2, a3)

// Lane group 'lane' of Z0 (query g's 4 rows) to the next y row.
#define Q_STORE(xq, prev, zx, a0, a1, a2, a3, lane) \
	ADDQ R9, AX \
	VEXTRACTF32X4 lane, Z0, X24 \
	VMOVUPS X24, (AX)

#define KERNEL(MORE) \
	MOVQ x+0(FP), DI \
	MOVQ xstride+8(FP), R9 \
	SHLQ $2, R9 \
	MORE(Q_PTR) \
	MOVQ n+16(FP), R10 \
	MOVQ R10, CX \
	ANDQ $15, CX \
	MOVL $1, R14 \
	SHLL CX, R14 \
	DECL R14 \
	KMOVW R14, K1 \
	ANDQ $-16, R10 \
	SHLQ $1, R10 \
	MOVQ rows+24(FP), SI \
	MOVQ stride+32(FP), DX \
	SHLQ $1, DX \
	MOVQ m+40(FP), R11 \
	MOVQ y+48(FP), R8 \
	MOVQ ystride+56(FP), R9 \
	SHLQ $2, R9 \
	VMOVDQU32 ·transpose4x4(SB), Z26 \
group: \
	TESTQ R11, R11 \
	JZ    done \
	LEAQ (SI)(DX*1), BX \
	LEAQ (BX)(DX*1), CX \
	LEAQ (CX)(DX*1), R14 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	XORQ AX, AX \
chunk: \
	CMPQ AX, R10 \
	JGE  tail \
	ROWS \
	FMAX(DI, Z0, Z1, Z2, Z3) \
	MORE(Q_FMAX) \
	ADDQ $32, AX \
	JMP  chunk \
tail: \
	KORTESTW K1, K1 \
	JZ       reduce \
	ROWSM \
	VMOVUPS.Z (DI)(AX*2), K1, Z20 \
	FMA4(Z20, Z0, Z1, Z2, Z3) \
	MORE(Q_TAIL) \
reduce: \
	TRANS16 \
	MOVQ R8, AX \
	VMOVUPS X0, (AX) \
	MORE(Q_STORE) \
	ADDQ $16, R8 \
	LEAQ (R14)(DX*1), SI \
	SUBQ $4, R11 \
	JMP  group \
done: \
	VZEROUPPER \
	RET

// The Q8_0 score kernels (attnScoresQ8KAVX512, K = 1, 2, 4 queries): K
// queries against 4 key rows at a time, a pair of blocks a step, every
// (query, row) with its own accumulator Z(4g+k) reduced by TRANS16. Each
// key pair is loaded, biased to unsigned (k+128) and its scales widened
// once for all the queries; per query the pair, its scales and -128 times
// its sums of 4 quants (the bias's share) are set up once per 4 rows, so a
// (query, row) product is VPDPBUSD, a conversion, the scale product and a
// multiply-add. Per pair, lanes 0-7 hold the first block's sums of 4
// products and lanes 8-15 the second's, as dotQ8_0RowsAVX512 has them.
//
// Registers: DI R15 R12 R13 the queries, SI BX CX R14 the 4 rows, DX the
// row stride, AX the pair's byte offset, R11 rows left, R8 y of the row
// group, R9 scratch, K2 the upper 8 words, Z16-Z19 the query pairs,
// Z20-Z23 their bias terms, Z26-Z29 their scales, Z24 the key pair, Z25
// its scales, Z30 Z31 temporaries.

#define Q8S_ZERO(qp, zq, zc, zs, a0, a1, a2, a3, lane) VPXORD a0, a0, a0; VPXORD a1, a1, a1; VPXORD a2, a2, a2; VPXORD a3, a3, a3

#define Q8S_QSET(qp, zq, zc, zs, a0, a1, a2, a3, lane) \
	VMOVDQU32    2(qp)(AX*1), Y30 \
	VINSERTI64X4 $1, 36(qp)(AX*1), Z30, zq \
	VPBROADCASTD ·q8sBias(SB), Z31 \
	VPXORD       Z30, Z30, Z30 \
	VPDPBUSD     zq, Z31, Z30 \
	VPXORD       zc, zc, zc \
	VPSUBD       Z30, zc, zc \
	VPBROADCASTW (qp)(AX*1), Y31 \
	VPBROADCASTW 34(qp)(AX*1), K2, Y31 \
	VCVTPH2PS    Y31, zs

#define Q8S_KEY(R) \
	VMOVDQU32       2(R)(AX*1), Y24 \
	VINSERTI64X4    $1, 36(R)(AX*1), Z24, Z24 \
	VPXORD.BCST     ·q8sBias(SB), Z24, Z24 \
	VPBROADCASTW    (R)(AX*1), Y25 \
	VPBROADCASTW    34(R)(AX*1), K2, Y25 \
	VCVTPH2PS       Y25, Z25

#define Q8S_DOT(zq, zc, zs, acc) \
	VMOVDQA32   zc, Z30 \
	VPDPBUSD    zq, Z24, Z30 \
	VCVTDQ2PS   Z30, Z30 \
	VMULPS      zs, Z25, Z31 \
	VFMADD231PS Z30, Z31, acc

#define Q8S_DOT0(qp, zq, zc, zs, a0, a1, a2, a3, lane) Q8S_DOT(zq, zc, zs, a0)
#define Q8S_DOT1(qp, zq, zc, zs, a0, a1, a2, a3, lane) Q8S_DOT(zq, zc, zs, a1)
#define Q8S_DOT2(qp, zq, zc, zs, a0, a1, a2, a3, lane) Q8S_DOT(zq, zc, zs, a2)
#define Q8S_DOT3(qp, zq, zc, zs, a0, a1, a2, a3, lane) Q8S_DOT(zq, zc, zs, a3)

// Query g's 4 results (lane group g of Z0) to its y row at AX, then the
// next row.
#define Q8S_STORE(qp, zq, zc, zs, a0, a1, a2, a3, lane) \
	VEXTRACTF32X4 lane, Z0, X24 \
	VMOVUPS       X24, (AX) \
	ADDQ          R9, AX

#define Q8S_Q1(M) M(DI, Z16, Z20, Z26, Z0, Z1, Z2, Z3, $0)
#define Q8S_Q2(M) Q8S_Q1(M); M(R15, Z17, Z21, Z27, Z4, Z5, Z6, Z7, $1)
#define Q8S_Q4(M) Q8S_Q2(M); M(R12, Z18, Z22, Z28, Z8, Z9, Z10, Z11, $2); M(R13, Z19, Z23, Z29, Z12, Z13, Z14, Z15, $3)

#define Q8S_KERNEL(QS) \
	MOVQ  q+0(FP), DI \
	MOVQ  qBytes+8(FP), R9 \
	LEAQ  (DI)(R9*1), R15 \
	LEAQ  (R15)(R9*1), R12 \
	LEAQ  (R12)(R9*1), R13 \
	MOVQ  keys+24(FP), SI \
	MOVQ  stride+32(FP), DX \
	MOVQ  m+40(FP), R11 \
	MOVQ  y+48(FP), R8 \
	MOVL  $0xff00, R9 \
	KMOVW R9, K2 \
q8group: \
	TESTQ R11, R11 \
	JZ    q8done \
	LEAQ  (SI)(DX*1), BX \
	LEAQ  (BX)(DX*1), CX \
	LEAQ  (CX)(DX*1), R14 \
	Q8S_Q4(Q8S_ZERO) \
	XORQ  AX, AX \
q8pair: \
	QS(Q8S_QSET) \
	Q8S_KEY(SI) \
	QS(Q8S_DOT0) \
	Q8S_KEY(BX) \
	QS(Q8S_DOT1) \
	Q8S_KEY(CX) \
	QS(Q8S_DOT2) \
	Q8S_KEY(R14) \
	QS(Q8S_DOT3) \
	ADDQ $68, AX \
	CMPQ AX, headBytes+16(FP) \
	JLT  q8pair \
	VMOVDQU32 ·transpose4x4(SB), Z26 \
	TRANS16 \
	MOVQ ystride+56(FP), R9 \
	SHLQ $2, R9 \
	MOVQ R8, AX \
	QS(Q8S_STORE) \
	ADDQ $16, R8 \
	LEAQ (R14)(DX*1), SI \
	SUBQ $4, R11 \
	JMP  q8group \
q8done: \
	VZEROUPPER \
	RET

// func attnMulti1AVX512(x *float32, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti1AVX512(SB), NOSPLIT, $0-64
	KERNEL(MORE1)

// func attnMulti2AVX512(x *float32, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti2AVX512(SB), NOSPLIT, $0-64
	KERNEL(MORE2)

// func attnMulti3AVX512(x *float32, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti3AVX512(SB), NOSPLIT, $0-64
	KERNEL(MORE3)

// func attnMulti4AVX512(x *float32, xstride int, n int, rows *uint16, stride int, m int, y *float32, ystride int)
TEXT ·attnMulti4AVX512(SB), NOSPLIT, $0-64
	KERNEL(MORE4)

// func roundF16AVX512(dst, src *float32, n int)
// dst[i] = src[i] rounded to f16 (to nearest even) and widened back, for
// i < n, a multiple of 16.
TEXT ·roundF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
rf16loop:
	CMPQ      AX, CX
	JGE       rf16done
	VMOVUPS   (SI)(AX*4), Z0
	VCVTPS2PH $0, Z0, Y1
	VCVTPH2PS Y1, Z0
	VMOVUPS   Z0, (DI)(AX*4)
	ADDQ      $16, AX
	JMP       rf16loop
rf16done:
	VZEROUPPER
	RET

// func attnScoresQ81AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)
TEXT ·attnScoresQ81AVX512(SB), NOSPLIT, $0-64
	Q8S_KERNEL(Q8S_Q1)

// func attnScoresQ82AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)
TEXT ·attnScoresQ82AVX512(SB), NOSPLIT, $0-64
	Q8S_KERNEL(Q8S_Q2)

// func attnScoresQ84AVX512(q *byte, qBytes, headBytes int, keys *byte, stride, m int, y *float32, ystride int)
TEXT ·attnScoresQ84AVX512(SB), NOSPLIT, $0-64
	Q8S_KERNEL(Q8S_Q4)
