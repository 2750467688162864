#include "textflag.h"

DATA q8kc<>+0x00(SB)/4, $0x7fffffff // abs mask
DATA q8kc<>+0x04(SB)/4, $0x4b400000 // 12582912 = 1.5*2^23, nearestInt's offset
DATA q8kc<>+0x08(SB)/4, $0x007fffff // mantissa mask
DATA q8kc<>+0x0c(SB)/4, $0x00400000 // 2^22
DATA q8kc<>+0x10(SB)/4, $127        // clamp
DATA q8kc<>+0x14(SB)/4, $0x01010101 // byte ones
DATA q8kc<>+0x18(SB)/4, $0x00010001 // word ones
DATA q8kc<>+0x1c(SB)/4, $0xc2fe0000 // -127
DATA q8kc<>+0x20(SB)/4, $0x3f800000 // 1
GLOBL q8kc<>(SB), RODATA|NOPTR, $36

// bsum order: after the reduction dword 4j+k holds group 4k+j.

// QUANT turns the 16 floats in r into clamped nearestInt(iscale*x) and
// leaves their low bytes in the low 128 bits of r. The float add and
// mantissa arithmetic are nearestInt's own (not VCVTPS2DQ), so NaN, Inf
// and out-of-range products give the same bytes as the Go code.
#define QUANT(r, x) \
	VMULPS  Z25, r, r  \
	VADDPS  Z18, r, r  \
	VPANDD  Z19, r, r  \
	VPSUBD  Z20, r, r  \
	VPMINSD Z21, r, r  \
	VPMOVDB r, x

// Stores Z's low 128 bits, then x1, x2, x3 (four 16-byte groups of
// quants) as 64 bytes at off(DI), and keeps them in Z.
#define STORE4(Z, x1, x2, x3, off) \
	VINSERTI32X4 $1, x1, Z, Z \
	VINSERTI32X4 $2, x2, Z, Z \
	VINSERTI32X4 $3, x3, Z, Z \
	VMOVDQU32    Z, off(DI)

// func quantizeQ8KAVX512(src *float32, nb int, dst *byte)
// Per 256-value block, as quantizeQ8K: amax = max |x| (NaNs never win),
// max = the first x with |x| == amax, iscale = -127/max, q = min(127,
// nearestInt(iscale*x)), d = 1/iscale, bsums = the sums of each 16 int8 q;
// a block with amax == 0 is all zero bytes.
TEXT ·quantizeQ8KAVX512(SB), NOSPLIT, $0-24
	MOVQ         src+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         dst+16(FP), DI
	VPBROADCASTD q8kc<>+0x00(SB), Z16
	VPBROADCASTD q8kc<>+0x04(SB), Z18
	VPBROADCASTD q8kc<>+0x08(SB), Z19
	VPBROADCASTD q8kc<>+0x0c(SB), Z20
	VPBROADCASTD q8kc<>+0x10(SB), Z21
	VPBROADCASTD q8kc<>+0x14(SB), Z22
	VPBROADCASTD q8kc<>+0x18(SB), Z23
	VMOVDQU32    ·transpose4x4(SB), Z24
	TESTQ        CX, CX
	JZ           q8kdone

q8kblk:
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	VMOVUPS 256(SI), Z4
	VMOVUPS 320(SI), Z5
	VMOVUPS 384(SI), Z6
	VMOVUPS 448(SI), Z7
	VMOVUPS 512(SI), Z8
	VMOVUPS 576(SI), Z9
	VMOVUPS 640(SI), Z10
	VMOVUPS 704(SI), Z11
	VMOVUPS 768(SI), Z12
	VMOVUPS 832(SI), Z13
	VMOVUPS 896(SI), Z14
	VMOVUPS 960(SI), Z15

	// amax: the accumulator is MAXPS's second source, which it returns
	// when either is NaN, so NaN inputs are skipped as the Go loop does.
	VPXORD Z17, Z17, Z17
	VPXORD Z26, Z26, Z26
	VPANDD Z16, Z0, Z28
	VPANDD Z16, Z1, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z2, Z28
	VPANDD Z16, Z3, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z4, Z28
	VPANDD Z16, Z5, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z6, Z28
	VPANDD Z16, Z7, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z8, Z28
	VPANDD Z16, Z9, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z10, Z28
	VPANDD Z16, Z11, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z12, Z28
	VPANDD Z16, Z13, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VPANDD Z16, Z14, Z28
	VPANDD Z16, Z15, Z29
	VMAXPS Z17, Z28, Z17
	VMAXPS Z26, Z29, Z26
	VMAXPS Z26, Z17, Z17
	VEXTRACTF64X4 $1, Z17, Y26
	VMAXPS        Y26, Y17, Y17
	VEXTRACTF32X4 $1, Y17, X26
	VMAXPS        X26, X17, X17
	VPERMILPS     $0x4e, X17, X26
	VMAXPS        X26, X17, X17
	VMOVSHDUP     X17, X26
	VMAXSS        X26, X17, X17 // X17 = amax
	VPXORD        X26, X26, X26
	VUCOMISS      X26, X17
	JEQ           q8kzero
	VBROADCASTSS  X17, Z17

	// max: the first value whose |x| has amax's bits (amax is one of them).
	XORQ BX, BX

q8kfind:
	VPANDD   (SI)(BX*4), Z16, Z28
	VPCMPEQD Z17, Z28, K1
	KMOVW    K1, AX
	TESTL    AX, AX
	JNZ      q8kfound
	ADDQ     $16, BX
	JMP      q8kfind

q8kfound:
	BSFL         AX, AX
	ADDQ         BX, AX
	VMOVSS       (SI)(AX*4), X28            // max
	VMOVSS       q8kc<>+0x1c(SB), X29
	VDIVSS       X28, X29, X29              // iscale = -127/max
	VMOVSS       q8kc<>+0x20(SB), X30
	VDIVSS       X29, X30, X30              // d = 1/iscale
	VMOVSS       X30, (DI)
	VBROADCASTSS X29, Z25

	QUANT(Z0, X0)
	QUANT(Z1, X1)
	QUANT(Z2, X2)
	QUANT(Z3, X3)
	QUANT(Z4, X4)
	QUANT(Z5, X5)
	QUANT(Z6, X6)
	QUANT(Z7, X7)
	QUANT(Z8, X8)
	QUANT(Z9, X9)
	QUANT(Z10, X10)
	QUANT(Z11, X11)
	QUANT(Z12, X12)
	QUANT(Z13, X13)
	QUANT(Z14, X14)
	QUANT(Z15, X15)
	STORE4(Z0, X1, X2, X3, 4)
	STORE4(Z4, X5, X6, X7, 68)
	STORE4(Z8, X9, X10, X11, 132)
	STORE4(Z12, X13, X14, X15, 196)

	// bsums: lane j of register k holds group 4k+j; sum each lane's 16
	// signed bytes to 4 dwords, then transpose-add to one dword per group.
	VPMADDUBSW  Z0, Z22, Z0
	VPMADDUBSW  Z4, Z22, Z4
	VPMADDUBSW  Z8, Z22, Z8
	VPMADDUBSW  Z12, Z22, Z12
	VPMADDWD    Z23, Z0, Z0
	VPMADDWD    Z23, Z4, Z4
	VPMADDWD    Z23, Z8, Z8
	VPMADDWD    Z23, Z12, Z12
	VPUNPCKLDQ  Z4, Z0, Z26
	VPUNPCKHDQ  Z4, Z0, Z27
	VPADDD      Z27, Z26, Z26
	VPUNPCKLDQ  Z12, Z8, Z28
	VPUNPCKHDQ  Z12, Z8, Z29
	VPADDD      Z29, Z28, Z28
	VPUNPCKLQDQ Z28, Z26, Z29
	VPUNPCKHQDQ Z28, Z26, Z30
	VPADDD      Z30, Z29, Z29
	VPERMD      Z29, Z24, Z29
	VPMOVDW     Z29, 260(DI)
	JMP         q8knext

q8kzero:
	VPXORD    Z26, Z26, Z26
	VMOVDQU32 Z26, 0(DI)
	VMOVDQU32 Z26, 64(DI)
	VMOVDQU32 Z26, 128(DI)
	VMOVDQU32 Z26, 192(DI)
	VMOVDQU32 Y26, 256(DI)
	MOVL      $0, 288(DI)

q8knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q8kblk

q8kdone:
	VZEROUPPER
	RET
