// AVX-512 helpers of the softmax and of Scale: a maximum, the per-chunk
// float32 tree sums accumulated in float64 (FastSoftmax's order), and a
// scale, each over a multiple of 16 values.

#include "textflag.h"

// func maxAVX512(x *float32, n int) float32
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Z0
	MOVQ $16, AX
vmaxloop:
	CMPQ AX, CX
	JGE  vmaxred
	VMAXPS (SI)(AX*4), Z0, Z0
	ADDQ $16, AX
	JMP  vmaxloop
vmaxred:
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func chunkSumsAVX512(x *float32, n int) float64
// The sum over 16-value chunks of each chunk's AVX-512 tree sum, added in
// float64 in chunk order.
TEXT ·chunkSumsAVX512(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n+8(FP), CX
	VXORPD X5, X5, X5
	XORQ   AX, AX
vsumloop:
	CMPQ          AX, CX
	JGE           vsumdone
	VMOVUPS       (SI)(AX*4), Z0
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VCVTSS2SD     X0, X0, X0
	VADDSD        X0, X5, X5
	ADDQ          $16, AX
	JMP           vsumloop
vsumdone:
	VMOVSD X5, ret+16(FP)
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, n int, s float32)
TEXT ·scaleAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Z1
	XORQ         AX, AX
vscaleloop:
	CMPQ    AX, CX
	JGE     vscaledone
	VMULPS  (SI)(AX*4), Z1, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     vscaleloop
vscaledone:
	VZEROUPPER
	RET
