#include "textflag.h"

DATA q8c<>+0x00(SB)/4, $0x7fffffff // abs mask
DATA q8c<>+0x04(SB)/4, $0x42fe0000 // 127
GLOBL q8c<>(SB), RODATA|NOPTR, $8

// func quantizeQ8AVX512(src *float32, nb int, dst *byte, blockBytes int, withSum bool)
// Per 32-value block: amax = max |x|, d = amax/127, id = 127/amax (0 when
// amax is 0), q = round-half-even(x*id) as int8 at dst+hdr, d as f16 at
// dst, and with withSum the f16 of d*sum(q) at dst+2 (hdr = 4, else 2).
TEXT ·quantizeQ8AVX512(SB), NOSPLIT, $0-33
	MOVQ         src+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         dst+16(FP), DI
	MOVQ         blockBytes+24(FP), R8
	MOVBLZX      withSum+32(FP), R9
	MOVQ         $2, R10
	TESTQ        R9, R9
	JZ           q8hdr
	MOVQ         $4, R10

q8hdr:
	VBROADCASTSS q8c<>+0x00(SB), Z8
	VMOVSS       q8c<>+0x04(SB), X9
	TESTQ        CX, CX
	JZ           q8done

q8blk:
	VMOVUPS       (SI), Z0
	VMOVUPS       64(SI), Z1
	VANDPS        Z8, Z0, Z2
	VANDPS        Z8, Z1, Z3
	VMAXPS        Z3, Z2, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS        Y3, Y2, Y2
	VEXTRACTF128  $1, Y2, X3
	VMAXPS        X3, X2, X2
	VPERMILPS     $0x4e, X2, X3
	VMAXPS        X3, X2, X2
	VMOVSHDUP     X2, X3
	VMAXSS        X3, X2, X2 // X2 = amax
	VDIVSS        X9, X2, X4 // d = amax / 127
	VXORPS        X5, X5, X5
	VUCOMISS      X5, X2
	JE            q8zero
	VDIVSS        X2, X9, X5 // id = 127 / amax

q8zero:
	VBROADCASTSS  X5, Z5
	VMULPS        Z5, Z0, Z0
	VMULPS        Z5, Z1, Z1
	VCVTPS2DQ     Z0, Z0
	VCVTPS2DQ     Z1, Z1
	VPMOVDB       Z0, X6
	VPMOVDB       Z1, X7
	VMOVDQU       X6, (DI)(R10*1)
	VMOVDQU       X7, 16(DI)(R10*1)
	VCVTPS2PH     $0, X4, X6
	VPEXTRW       $0, X6, AX
	MOVW          AX, (DI)
	TESTQ         R9, R9
	JZ            q8next
	VPADDD        Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD        Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPADDD        X1, X0, X0
	VCVTDQ2PS     X0, X0
	VMULSS        X0, X4, X0
	VCVTPS2PH     $0, X0, X6
	VPEXTRW       $0, X6, AX
	MOVW          AX, 2(DI)

q8next:
	ADDQ          $128, SI
	ADDQ          R8, DI
	DECQ          CX
	JNZ           q8blk

q8done:
	VZEROUPPER
	RET
