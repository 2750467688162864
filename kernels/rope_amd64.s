// RoPE rotation with FMA (see RoPEApply): each output fuses one product
// into the sum with the other, rounded, product, as GCC compiles ggml's
// rotation on FMA machines.

#include "textflag.h"

// Sign flips for the even lanes (0, 2, 4, 6) of a vector.

// The arguments: DI x, R8 the head stride in bytes, R9 the heads, SI the
// cache, R10 = nDims << shift.
#define ROPE_ARGS(shift) \
	MOVQ    x+0(FP), DI \
	MOVQ    headDim+8(FP), R8 \
	SHLQ    $2, R8 \
	MOVQ    nHeads+16(FP), R9 \
	MOVQ    cache+24(FP), SI \
	MOVQ    nDims+32(FP), R10 \
	SHLQ    $shift, R10

// func ropeNormAVX2(x *float32, headDim, nHeads int, cache *float32, nDims int)
// Pairs (2i, 2i+1) of the first nDims (a multiple of 8) values of each head.
TEXT ·ropeNormAVX2(SB), NOSPLIT, $0-40
	ROPE_ARGS(2)
	VMOVUPS ·ropeSign(SB), Y7
	TESTQ   R9, R9
	JZ      ropenormdone

ropenormhead:
	XORQ AX, AX

ropenormloop:
	VMOVUPS     (DI)(AX*1), Y0      // x0 x1 x0' x1' ...
	VMOVUPS     (SI)(AX*1), Y1      // c s c' s' ...
	VMOVSLDUP   Y0, Y2              // x0 x0 ...
	VMOVSHDUP   Y0, Y3              // x1 x1 ...
	VPERMILPS   $0xb1, Y1, Y4       // s c s' c' ...
	VMULPS      Y4, Y3, Y3          // x1*s, x1*c
	VXORPS      Y7, Y3, Y3          // -(x1*s), x1*c
	VFMADD231PS Y1, Y2, Y3          // x0*c - x1*s, x0*s + x1*c
	VMOVUPS     Y3, (DI)(AX*1)
	ADDQ        $32, AX
	CMPQ        AX, R10
	JLT         ropenormloop
	ADDQ        R8, DI
	DECQ        R9
	JNZ         ropenormhead

ropenormdone:
	VZEROUPPER
	RET

// func ropeNeoxAVX2(x *float32, headDim, nHeads int, cache *float32, nDims int)
// Pairs (i, i+nDims/2) of each head; nDims/2 a multiple of 4.
TEXT ·ropeNeoxAVX2(SB), NOSPLIT, $0-40
	ROPE_ARGS(1)                    // R10 = half, in bytes
	VMOVUPS ·ropeSign(SB), X7
	VSHUFPS $0x00, X7, X7, X7       // all four lanes negative zero
	TESTQ   R9, R9
	JZ      ropeneoxdone

ropeneoxhead:
	XORQ AX, AX                     // offset of x0 (bytes)
	XORQ BX, BX                     // offset in the cache (bytes)
	LEAQ (DI)(R10*1), DX            // x1 = x0 + half

ropeneoxloop:
	VMOVUPS     (SI)(BX*1), X1      // c0 s0 c1 s1
	VMOVUPS     16(SI)(BX*1), X2    // c2 s2 c3 s3
	VSHUFPS     $0x88, X2, X1, X3   // c0 c1 c2 c3
	VSHUFPS     $0xdd, X2, X1, X4   // s0 s1 s2 s3
	VMOVUPS     (DI)(AX*1), X0      // x0
	VMOVUPS     (DX)(AX*1), X5      // x1
	VMULPS      X4, X5, X6          // x1*s
	VXORPS      X7, X6, X6          // -(x1*s)
	VFMADD231PS X3, X0, X6          // x0*c - x1*s
	VMULPS      X3, X5, X5          // x1*c
	VFMADD231PS X4, X0, X5          // x0*s + x1*c
	VMOVUPS     X6, (DI)(AX*1)
	VMOVUPS     X5, (DX)(AX*1)
	ADDQ        $16, AX
	ADDQ        $32, BX
	CMPQ        AX, R10
	JLT         ropeneoxloop
	ADDQ        R8, DI
	DECQ        R9
	JNZ         ropeneoxhead

ropeneoxdone:
	VZEROUPPER
	RET
