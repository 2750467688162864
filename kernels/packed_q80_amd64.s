// Packed q8_0 x q8_0 kernels (AVX-512 F/BW/VL + VNNI) over the layout of
// packed_q80.go: one weight row per 32-bit lane, quants stored as q+128.
// Per block the 8 weight registers (16 rows x 4 values each) are loaded
// once for all the call's tokens; each VPDPBUSD takes 4 signed activation
// bytes of one token broadcast from memory, so nothing is summed across
// rows. The bias is removed by starting each token's integer sum at
// -128*sum(x), which one VPDPBUSD of 0x80 bytes against the block's quants
// (two tokens per register) and a short lane reduction give; per block and
// token the float accumulator then gets float(sum) * d_row * d_token.

#include "textflag.h"

// Register use (K = tokens per call, at most 8):
//   SI weights, CX block pairs left, R13 f16 table, DX scale index,
//   BX R8 R9 R10 R11 R12 DI R14 the tokens' activations,
//   Z0-Z7 weights of the block, Z8 row scales, Z9 0x80 bytes, Z14 zero,
//   Z10-Z13 temporaries, Z16-Z23 float sums, Z24-Z31 integer sums.

// IA, IB = -128*sum(x) of the block at xoff of the tokens at PA and PB,
// broadcast to all lanes.
#define INIT2(xoff, PA, PB, IA, IB) \
	VMOVDQU      (xoff+2)(PA), Y10 \
	VINSERTI64X4 $1, (xoff+2)(PB), Z10, Z10 \
	VPXORD       Z11, Z11, Z11 \
	VPDPBUSD     Z10, Z9, Z11 \
	VPSHUFD      $0x4e, Z11, Z12 \
	VPADDD       Z12, Z11, Z11 \
	VPSHUFD      $0xb1, Z11, Z12 \
	VPADDD       Z12, Z11, Z11 \
	VSHUFI32X4   $0xb1, Z11, Z11, Z12 \
	VPSUBD       Z11, Z14, Z11 \
	VPSUBD       Z12, Z11, Z11 \
	VSHUFI32X4   $0x00, Z11, Z11, IA \
	VSHUFI32X4   $0xaa, Z11, Z11, IB

// INIT2 for one token (the upper half of Z10 is zero).
#define INIT1(xoff, PA, IA) \
	VMOVDQU    (xoff+2)(PA), Y10 \
	VPXORD     Z11, Z11, Z11 \
	VPDPBUSD   Z10, Z9, Z11 \
	VPSHUFD    $0x4e, Z11, Z12 \
	VPADDD     Z12, Z11, Z11 \
	VPSHUFD    $0xb1, Z11, Z12 \
	VPADDD     Z12, Z11, Z11 \
	VSHUFI32X4 $0xb1, Z11, Z11, Z12 \
	VPSUBD     Z11, Z14, Z11 \
	VPSUBD     Z12, Z11, Z11 \
	VSHUFI32X4 $0x00, Z11, Z11, IA

// FA += float(IA) * d_rows * d_token (token at P, block at xoff).
#define FIN(xoff, P, IA, FA) \
	MOVWLZX          (xoff)(P), DX \
	VMULPS.BCST      (R13)(DX*4), Z8, Z13 \
	VCVTDQ2PS        IA, IA \
	VFMADD231PS      IA, Z13, FA

// The block's row scales and weights.
#define LOADW(doff, qoff) \
	VCVTPH2PS (doff)(SI), Z8 \
	VMOVDQU64 (qoff)(SI), Z0 \
	VMOVDQU64 (qoff+64)(SI), Z1 \
	VMOVDQU64 (qoff+128)(SI), Z2 \
	VMOVDQU64 (qoff+192)(SI), Z3 \
	VMOVDQU64 (qoff+256)(SI), Z4 \
	VMOVDQU64 (qoff+320)(SI), Z5 \
	VMOVDQU64 (qoff+384)(SI), Z6 \
	VMOVDQU64 (qoff+448)(SI), Z7

// Weight register W against the 4 activation bytes at off of each token.
#define DP1(off, W) \
	VPDPBUSD.BCST (off)(BX), W, Z24

#define DP2(off, W) \
	DP1(off, W) \
	VPDPBUSD.BCST (off)(R8), W, Z25

#define DP4(off, W) \
	DP2(off, W) \
	VPDPBUSD.BCST (off)(R9), W, Z26 \
	VPDPBUSD.BCST (off)(R10), W, Z27

#define DP8(off, W) \
	DP4(off, W) \
	VPDPBUSD.BCST (off)(R11), W, Z28 \
	VPDPBUSD.BCST (off)(R12), W, Z29 \
	VPDPBUSD.BCST (off)(DI), W, Z30 \
	VPDPBUSD.BCST (off)(R14), W, Z31

// All 8 weight registers of a block against the tokens (DP = DP1..DP8).
#define CHUNKS(DP, xoff) \
	DP(xoff+2, Z0) \
	DP(xoff+6, Z1) \
	DP(xoff+10, Z2) \
	DP(xoff+14, Z3) \
	DP(xoff+18, Z4) \
	DP(xoff+22, Z5) \
	DP(xoff+26, Z6) \
	DP(xoff+30, Z7)

#define BLK1(doff, qoff, xoff) \
	LOADW(doff, qoff) \
	INIT1(xoff, BX, Z24) \
	CHUNKS(DP1, xoff) \
	FIN(xoff, BX, Z24, Z16)

#define BLK2(doff, qoff, xoff) \
	LOADW(doff, qoff) \
	INIT2(xoff, BX, R8, Z24, Z25) \
	CHUNKS(DP2, xoff) \
	FIN(xoff, BX, Z24, Z16) \
	FIN(xoff, R8, Z25, Z17)

#define BLK4(doff, qoff, xoff) \
	LOADW(doff, qoff) \
	INIT2(xoff, BX, R8, Z24, Z25) \
	INIT2(xoff, R9, R10, Z26, Z27) \
	CHUNKS(DP4, xoff) \
	FIN(xoff, BX, Z24, Z16) \
	FIN(xoff, R8, Z25, Z17) \
	FIN(xoff, R9, Z26, Z18) \
	FIN(xoff, R10, Z27, Z19)

#define BLK8(doff, qoff, xoff) \
	LOADW(doff, qoff) \
	INIT2(xoff, BX, R8, Z24, Z25) \
	INIT2(xoff, R9, R10, Z26, Z27) \
	INIT2(xoff, R11, R12, Z28, Z29) \
	INIT2(xoff, DI, R14, Z30, Z31) \
	CHUNKS(DP8, xoff) \
	FIN(xoff, BX, Z24, Z16) \
	FIN(xoff, R8, Z25, Z17) \
	FIN(xoff, R9, Z26, Z18) \
	FIN(xoff, R10, Z27, Z19) \
	FIN(xoff, R11, Z28, Z20) \
	FIN(xoff, R12, Z29, Z21) \
	FIN(xoff, DI, Z30, Z22) \
	FIN(xoff, R14, Z31, Z23)

// Common prologue: arguments, constants, zeroed float sums.
#define PROLOGUE \
	MOVQ         w+0(FP), SI \
	MOVQ         nb+8(FP), CX \
	MOVQ         x+16(FP), BX \
	MOVQ         xstride+24(FP), AX \
	MOVQ         f16+48(FP), R13 \
	MOVL         $0x80808080, DX \
	VPBROADCASTD DX, Z9 \
	VPXORD       Z14, Z14, Z14 \
	VPXORD       Z16, Z16, Z16 \
	VPXORD       Z17, Z17, Z17 \
	VPXORD       Z18, Z18, Z18 \
	VPXORD       Z19, Z19, Z19 \
	VPXORD       Z20, Z20, Z20 \
	VPXORD       Z21, Z21, Z21 \
	VPXORD       Z22, Z22, Z22 \
	VPXORD       Z23, Z23, Z23

// y[t*ystride] = Z16+t for t < K (AX = y, DX = ystride in bytes).
#define STOREY \
	MOVQ y+32(FP), AX \
	MOVQ ystride+40(FP), DX \
	SHLQ $2, DX

// func packedQ80Dot8AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot8AVX512(SB), NOSPLIT, $0-56
	PROLOGUE
	LEAQ  (BX)(AX*1), R8
	LEAQ  (BX)(AX*2), R9
	LEAQ  (R8)(AX*2), R10
	LEAQ  (BX)(AX*4), R11
	LEAQ  (R8)(AX*4), R12
	LEAQ  (R9)(AX*4), DI
	LEAQ  (R10)(AX*4), R14
	SHRQ  $1, CX
	JZ    p80k8tail

p80k8pair:
	BLK8(0, 64, 0)
	BLK8(32, 576, 34)
	ADDQ $1088, SI
	ADDQ $68, BX
	ADDQ $68, R8
	ADDQ $68, R9
	ADDQ $68, R10
	ADDQ $68, R11
	ADDQ $68, R12
	ADDQ $68, DI
	ADDQ $68, R14
	DECQ CX
	JNZ  p80k8pair

p80k8tail:
	TESTQ $1, nb+8(FP)
	JZ    p80k8store
	BLK8(0, 32, 0)

p80k8store:
	STOREY
	VMOVUPS Z16, (AX)
	ADDQ    DX, AX
	VMOVUPS Z17, (AX)
	ADDQ    DX, AX
	VMOVUPS Z18, (AX)
	ADDQ    DX, AX
	VMOVUPS Z19, (AX)
	ADDQ    DX, AX
	VMOVUPS Z20, (AX)
	ADDQ    DX, AX
	VMOVUPS Z21, (AX)
	ADDQ    DX, AX
	VMOVUPS Z22, (AX)
	ADDQ    DX, AX
	VMOVUPS Z23, (AX)
	VZEROUPPER
	RET

// func packedQ80Dot4AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot4AVX512(SB), NOSPLIT, $0-56
	PROLOGUE
	LEAQ (BX)(AX*1), R8
	LEAQ (BX)(AX*2), R9
	LEAQ (R8)(AX*2), R10
	SHRQ $1, CX
	JZ   p80k4tail

p80k4pair:
	BLK4(0, 64, 0)
	BLK4(32, 576, 34)
	ADDQ $1088, SI
	ADDQ $68, BX
	ADDQ $68, R8
	ADDQ $68, R9
	ADDQ $68, R10
	DECQ CX
	JNZ  p80k4pair

p80k4tail:
	TESTQ $1, nb+8(FP)
	JZ    p80k4store
	BLK4(0, 32, 0)

p80k4store:
	STOREY
	VMOVUPS Z16, (AX)
	ADDQ    DX, AX
	VMOVUPS Z17, (AX)
	ADDQ    DX, AX
	VMOVUPS Z18, (AX)
	ADDQ    DX, AX
	VMOVUPS Z19, (AX)
	VZEROUPPER
	RET

// func packedQ80Dot2AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot2AVX512(SB), NOSPLIT, $0-56
	PROLOGUE
	LEAQ (BX)(AX*1), R8
	SHRQ $1, CX
	JZ   p80k2tail

p80k2pair:
	BLK2(0, 64, 0)
	BLK2(32, 576, 34)
	ADDQ $1088, SI
	ADDQ $68, BX
	ADDQ $68, R8
	DECQ CX
	JNZ  p80k2pair

p80k2tail:
	TESTQ $1, nb+8(FP)
	JZ    p80k2store
	BLK2(0, 32, 0)

p80k2store:
	STOREY
	VMOVUPS Z16, (AX)
	ADDQ    DX, AX
	VMOVUPS Z17, (AX)
	VZEROUPPER
	RET

// func packedQ80Dot1AVX512(w *byte, nb int, x *byte, xstride int, y *float32, ystride int, f16 *float32)
TEXT ·packedQ80Dot1AVX512(SB), NOSPLIT, $0-56
	PROLOGUE
	SHRQ $1, CX
	JZ   p80k1tail

p80k1pair:
	BLK1(0, 64, 0)
	BLK1(32, 576, 34)
	ADDQ $1088, SI
	ADDQ $68, BX
	DECQ CX
	JNZ  p80k1pair

p80k1tail:
	TESTQ $1, nb+8(FP)
	JZ    p80k1store
	BLK1(0, 32, 0)

p80k1store:
	STOREY
	VMOVUPS Z16, (AX)
	VZEROUPPER
	RET
