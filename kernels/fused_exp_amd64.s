// Vectorized exp for softmax and SwiGLU (AVX2 + FMA), eight lanes at a time,
// computing exactly what ggml's AVX-512 ggml_v_expf computes (see
// fused_exp.go): n = round(x*log2(e)) by the 1.5*2^23 shift, b = x - n*ln2
// in two FMA steps, j = 1 + c1*b + ... + c5*b^5 in ggml's FMA grouping, and
// j*2^n rounded once (vscalefps), here as (j*2^(n>>1))*2^(n-(n>>1)), whose
// first product is exact. |n| > 192 gives 0 or +Inf as ggml's blend does.

#include "textflag.h"

DATA expc<>+0x00(SB)/4, $0x4b400000 // 1.5*2^23
DATA expc<>+0x04(SB)/4, $0x3fb8aa3b // log2(e)
DATA expc<>+0x08(SB)/4, $0x3f317200 // ln2 high
DATA expc<>+0x0c(SB)/4, $0x35bfbe8e // ln2 low
DATA expc<>+0x10(SB)/4, $0x3c072010 // c5
DATA expc<>+0x14(SB)/4, $0x3d2b9f17 // c4
DATA expc<>+0x18(SB)/4, $0x3e2aaf33 // c3
DATA expc<>+0x1c(SB)/4, $0x3efffedb // c2
DATA expc<>+0x20(SB)/4, $0x3f7ffff6 // c1
DATA expc<>+0x24(SB)/4, $0x3f800000 // 1
DATA expc<>+0x28(SB)/4, $0x0000007f // exponent bias
DATA expc<>+0x2c(SB)/4, $0x7fffffff // abs mask
DATA expc<>+0x30(SB)/4, $0x43400000 // 192
DATA expc<>+0x34(SB)/4, $0x7f800000 // +Inf
GLOBL expc<>(SB), RODATA|NOPTR, $56

// Loads the constants into Y6-Y15 (Y15 shift, Y14 log2e, Y13 ln2hi,
// Y12 ln2lo, Y11-Y7 c5..c1, Y6 one).
#define EXPCONST \
	VBROADCASTSS expc<>+0x00(SB), Y15 \
	VBROADCASTSS expc<>+0x04(SB), Y14 \
	VBROADCASTSS expc<>+0x08(SB), Y13 \
	VBROADCASTSS expc<>+0x0c(SB), Y12 \
	VBROADCASTSS expc<>+0x10(SB), Y11 \
	VBROADCASTSS expc<>+0x14(SB), Y10 \
	VBROADCASTSS expc<>+0x18(SB), Y9 \
	VBROADCASTSS expc<>+0x1c(SB), Y8 \
	VBROADCASTSS expc<>+0x20(SB), Y7 \
	VBROADCASTSS expc<>+0x24(SB), Y6

// Y0 = exp(Y0) as ggml_v_expf. Clobbers Y1-Y5.
#define EXP8 \
	VMOVAPS      Y0, Y1 \
	VFMADD213PS  Y15, Y14, Y1 \
	VSUBPS       Y15, Y1, Y1 \
	VFNMADD231PS Y13, Y1, Y0 \
	VFNMADD231PS Y12, Y1, Y0 \
	VMULPS       Y0, Y0, Y2 \
	VMOVAPS      Y11, Y3 \
	VFMADD213PS  Y10, Y0, Y3 \
	VMOVAPS      Y9, Y4 \
	VFMADD213PS  Y8, Y0, Y4 \
	VFMADD213PS  Y4, Y2, Y3 \
	VMOVAPS      Y7, Y4 \
	VFMADD213PS  Y6, Y0, Y4 \
	VFMADD213PS  Y4, Y2, Y3 \
	VCVTPS2DQ    Y1, Y2 \
	VPSRAD       $1, Y2, Y4 \
	VPSUBD       Y4, Y2, Y2 \
	VPBROADCASTD expc<>+0x28(SB), Y5 \
	VPADDD       Y5, Y4, Y4 \
	VPSLLD       $23, Y4, Y4 \
	VPADDD       Y5, Y2, Y2 \
	VPSLLD       $23, Y2, Y2 \
	VMULPS       Y4, Y3, Y3 \
	VMULPS       Y2, Y3, Y3 \
	VBROADCASTSS expc<>+0x2c(SB), Y4 \
	VANDPS       Y1, Y4, Y4 \
	VBROADCASTSS expc<>+0x30(SB), Y5 \
	VCMPPS       $0x1e, Y5, Y4, Y4 \
	VXORPS       Y5, Y5, Y5 \
	VCMPPS       $0x1e, Y5, Y1, Y2 \
	VBROADCASTSS expc<>+0x34(SB), Y5 \
	VANDPS       Y5, Y2, Y2 \
	VBLENDVPS    Y4, Y2, Y3, Y0

// func expSubAVX2(x *float32, n int, sub float32)
// x[i] = exp(x[i] - sub) for i < n, n a multiple of 8.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	EXPCONST
	SHRQ $3, CX
	JZ   expsubdone

expsubloop:
	VMOVUPS      (SI), Y0
	VBROADCASTSS sub+16(FP), Y1
	VSUBPS       Y1, Y0, Y0
	EXP8
	VMOVUPS      Y0, (SI)
	ADDQ         $32, SI
	DECQ         CX
	JNZ          expsubloop

expsubdone:
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, u *float32, n int)
// dst[i] = gate[i] / (1 + exp(-gate[i])) * u[i] for i < n, n a multiple of 8.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ u+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONST
	SHRQ $3, CX
	JZ   swiglusdone

swigluloop:
	VXORPS  Y0, Y0, Y0
	VSUBPS  (SI), Y0, Y0
	EXP8
	VADDPS  Y6, Y0, Y0
	VMOVUPS (SI), Y1
	VDIVPS  Y0, Y1, Y1
	VMULPS  (DX), Y1, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     swigluloop

swiglusdone:
	VZEROUPPER
	RET

// Accumulates the 16 halves at off(DI)(AX) times those at off(SI)(AX) into
// the lane pair lo, hi (products of halves are exact, so FMA = mul + add).
#define F16CHUNK(off, lo, hi) \
	VCVTPH2PS    off(DI)(AX*1), Y8 \
	VCVTPH2PS    off(SI)(AX*1), Y9 \
	VFMADD231PS  Y9, Y8, lo \
	VCVTPH2PS    off+16(DI)(AX*1), Y10 \
	VCVTPH2PS    off+16(SI)(AX*1), Y11 \
	VFMADD231PS  Y11, Y10, hi

// Fuses the 16 halves at (row)(AX), widened through t0, t1, times the
// query chunk in Y8, Y9 into lo, hi.
#define F16ROW(row, t0, t1, lo, hi) \
	VCVTPH2PS   (row)(AX*1), t0 \
	VCVTPH2PS   16(row)(AX*1), t1 \
	VFMADD231PS t0, Y8, lo \
	VFMADD231PS t1, Y9, hi

// Fuses the masked (Y14, Y15) tail chunk of the row at (row)(AX) times the
// query tail in Y8, Y9 into lo, hi. Clobbers Y10-Y12.
#define F16MASKED(row, lo, hi) \
	VPMASKMOVD   (row)(AX*1), Y14, Y12 \
	VPAND        Y15, Y12, Y12 \
	VCVTPH2PS    X12, Y10 \
	VEXTRACTI128 $1, Y12, X12 \
	VCVTPH2PS    X12, Y11 \
	VFMADD231PS  Y10, Y8, lo \
	VFMADD231PS  Y11, Y9, hi

// 32 set bytes, then 32 clear ones: a load at 32-k gives a k-byte mask.
DATA attnmask<>+0x00(SB)/8, $-1
DATA attnmask<>+0x08(SB)/8, $-1
DATA attnmask<>+0x10(SB)/8, $-1
DATA attnmask<>+0x18(SB)/8, $-1
DATA attnmask<>+0x20(SB)/8, $0
DATA attnmask<>+0x28(SB)/8, $0
DATA attnmask<>+0x30(SB)/8, $0
DATA attnmask<>+0x38(SB)/8, $0
GLOBL attnmask<>(SB), RODATA|NOPTR, $64

// Stores the AVX-512 reduction tree of the 16 lanes lo, hi (Y registers;
// xlo, xhi their X halves) at off(R8). Clobbers lo, hi, X8.
#define F16TREE(lo, hi, xlo, xhi, off) \
	VADDPS       hi, lo, lo \
	VEXTRACTF128 $1, lo, xhi \
	VADDPS       xhi, xlo, xlo \
	VMOVHLPS     xlo, xlo, X8 \
	VADDPS       X8, xlo, xlo \
	VMOVSHDUP    xlo, X8 \
	VADDSS       X8, xlo, xlo \
	VMOVSS       xlo, off(R8)

// The arguments of attnF16AVX2 and attnF32AVX2, values of 1 << shift
// bytes: R13 = the bytes of the whole 16-value chunks (n16).
#define ATTN_ARGS(shift) \
	MOVQ x+0(FP), DI \
	MOVQ n+8(FP), R10 \
	MOVQ rows+16(FP), SI \
	MOVQ stride+24(FP), DX \
	SHLQ $shift, DX \
	MOVQ y+32(FP), R8 \
	MOVQ m+40(FP), R9 \
	MOVQ mode+48(FP), R11 \
	MOVQ scratch+56(FP), R12 \
	MOVQ R10, R13 \
	ANDQ $-16, R13 \
	SHLQ $shift, R13

// The eight lane groups Y0..Y7 (four pairs of 16 float32) = 0.
#define ZEROY8 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

// The whole chunks of one row (R13 = their bytes, cb bytes a chunk),
// CHUNK(off, lo, hi) each: in mode 1 (from m1) chunk j to group j%4, 64
// values a step and then up to three more; in mode 0 (from m0) every
// chunk to group 0. Both go on at tail.
#define ROWCHUNKS(CHUNK, cb) \
m1: \
	LEAQ  (4*cb)(AX), BX \
	CMPQ  BX, R13 \
	JGT   m1rest \
	CHUNK(0, Y0, Y1) \
	CHUNK(cb, Y2, Y3) \
	CHUNK(2*cb, Y4, Y5) \
	CHUNK(3*cb, Y6, Y7) \
	MOVQ  BX, AX \
	JMP   m1 \
m1rest: \
	CMPQ  AX, R13 \
	JGE   tail \
	CHUNK(0, Y0, Y1) \
	ADDQ  $cb, AX \
	CMPQ  AX, R13 \
	JGE   tail \
	CHUNK(0, Y2, Y3) \
	ADDQ  $cb, AX \
	CMPQ  AX, R13 \
	JGE   tail \
	CHUNK(0, Y4, Y5) \
	ADDQ  $cb, AX \
	JMP   tail \
m0: \
	CMPQ  AX, R13 \
	JGE   tail \
	CHUNK(0, Y0, Y1) \
	ADDQ  $cb, AX \
	JMP   m0

// Spill the groups to the scratch at R12 (for the tail, added lane by
// lane) and point BX at the group the tail goes to: mode 1 ?
// ((n16/16)%4)*64 : 0 bytes in, n16/16 being R13 >> shift.
#define SPILLTAIL(shift) \
	VMOVUPS Y0, 0(R12) \
	VMOVUPS Y1, 32(R12) \
	VMOVUPS Y2, 64(R12) \
	VMOVUPS Y3, 96(R12) \
	VMOVUPS Y4, 128(R12) \
	VMOVUPS Y5, 160(R12) \
	VMOVUPS Y6, 192(R12) \
	VMOVUPS Y7, 224(R12) \
	XORQ  BX, BX \
	TESTQ R11, R11 \
	JZ    tailgo \
	MOVQ  R13, BX \
	SHRQ  $shift, BX \
	ANDQ  $3, BX \
	SHLQ  $6, BX \
tailgo: \
	ADDQ R12, BX

#define RELOAD8 \
	VMOVUPS 0(R12), Y0 \
	VMOVUPS 32(R12), Y1 \
	VMOVUPS 64(R12), Y2 \
	VMOVUPS 96(R12), Y3 \
	VMOVUPS 128(R12), Y4 \
	VMOVUPS 160(R12), Y5 \
	VMOVUPS 192(R12), Y6 \
	VMOVUPS 224(R12), Y7

// Lanes 0-7 of the row in Y0 and 8-15 in Y1: (g0+g2)+(g1+g3).
#define COMBINE4 \
	VADDPS Y4, Y0, Y0 \
	VADDPS Y6, Y2, Y2 \
	VADDPS Y2, Y0, Y0 \
	VADDPS Y5, Y1, Y1 \
	VADDPS Y7, Y3, Y3 \
	VADDPS Y3, Y1, Y1

// func attnF16AVX2(x *uint16, n int, rows *uint16, stride int, y *float32, m int, mode int, scratch *float32)
// y[r] = dot(x, rows[r*stride:][:n]) for r < m in ggml's order: four
// groups of 16 float32 lanes, 16-value chunk c going to group 0 (mode 0,
// tinyBLAS) or c%4 (mode 1, ggml_vec_dot_f16 over a zero-padded row); a
// tail of fewer than 16 values goes lane by lane into the next chunk's
// group; then lanes = (g0+g2)+(g1+g3) and the AVX-512 reduction tree.
// scratch holds 64 float32.
TEXT ·attnF16AVX2(SB), NOSPLIT, $0-64
	ATTN_ARGS(1)
	TESTQ R11, R11
	JNZ  attnrows1

attn4:                           // mode 0, four rows at a time
	CMPQ R9, $4
	JLT  attnrows1
	LEAQ (SI)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), R15
	ZEROY8
	XORQ   AX, AX

attn4loop:
	CMPQ        AX, R13
	JGE         attn4tail
	VCVTPH2PS   (DI)(AX*1), Y8
	VCVTPH2PS   16(DI)(AX*1), Y9
	F16ROW(SI, Y10, Y11, Y0, Y1)
	F16ROW(BX, Y12, Y13, Y2, Y3)
	F16ROW(CX, Y10, Y11, Y4, Y5)
	F16ROW(R15, Y12, Y13, Y6, Y7)
	ADDQ        $32, AX
	JMP         attn4loop

attn4tail:                       // fewer than 16 values: one masked chunk
	MOVQ         R13, R14
	SHRQ         $1, R14
	NEGQ         R14
	ADDQ         R10, R14           // R14 = tail values (0..15)
	JZ           attn4reduce
	// Y15: bytes [0, 2*tail) set; Y14: the whole dwords covering them
	// (VPMASKMOVD loads nothing past them, so no read leaves the slices).
	LEAQ         attnmask<>+32(SB), R11
	SUBQ         R14, R11
	SUBQ         R14, R11
	VMOVDQU      (R11), Y15
	INCQ         R14
	ANDQ         $-2, R14
	LEAQ         attnmask<>+32(SB), R11
	SUBQ         R14, R11
	SUBQ         R14, R11
	VMOVDQU      (R11), Y14
	XORQ         R11, R11           // mode 0 again
	VPMASKMOVD   (DI)(AX*1), Y14, Y12
	VPAND        Y15, Y12, Y12
	VCVTPH2PS    X12, Y8
	VEXTRACTI128 $1, Y12, X12
	VCVTPH2PS    X12, Y9
	F16MASKED(SI, Y0, Y1)
	F16MASKED(BX, Y2, Y3)
	F16MASKED(CX, Y4, Y5)
	F16MASKED(R15, Y6, Y7)

attn4reduce:
	F16TREE(Y0, Y1, X0, X1, 0)
	F16TREE(Y2, Y3, X2, X3, 4)
	F16TREE(Y4, Y5, X4, X5, 8)
	F16TREE(Y6, Y7, X6, X7, 12)
	ADDQ $16, R8
	LEAQ (R15)(DX*1), SI
	SUBQ $4, R9
	JMP  attn4

attnrows1:
	TESTQ R9, R9
	JZ   attndone

attnrow:
	ZEROY8
	XORQ   AX, AX
	TESTQ  R11, R11
	JZ     m0
	ROWCHUNKS(F16CHUNK, 32)

tail:
	MOVQ  R13, CX
	SHRQ  $1, CX
	NEGQ  CX
	ADDQ  R10, CX             // CX = n - n16 (R13 is n16 in bytes)
	TESTQ CX, CX
	JZ    attncombine
	SPILLTAIL(5)

attntailloop:
	MOVWLZX   (DI)(AX*1), R14
	VMOVD     R14, X8
	VCVTPH2PS X8, X8
	MOVWLZX   (SI)(AX*1), R14
	VMOVD     R14, X9
	VCVTPH2PS X9, X9
	VMULSS    X9, X8, X8
	VADDSS    (BX), X8, X8
	VMOVSS    X8, (BX)
	ADDQ      $4, BX
	ADDQ      $2, AX
	DECQ      CX
	JNZ       attntailloop
	RELOAD8

attncombine:
	COMBINE4
	VADDPS       Y1, Y0, Y0      // a[i] = v[i] + v[i+8]
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0      // b[i] = a[i] + a[i+4]
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0      // b0+b2, b1+b3
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, (R8)
	ADDQ         $4, R8
	ADDQ         DX, SI
	DECQ         R9
	JNZ          attnrow

attndone:
	VZEROUPPER
	RET

// Fuses the 16 float32 at off(DI)(AX) times those at off(SI)(AX) into the
// lane pair lo, hi.
#define F32CHUNK(off, lo, hi) \
	VMOVUPS      off(DI)(AX*1), Y8 \
	VFMADD231PS  off(SI)(AX*1), Y8, lo \
	VMOVUPS      off+32(DI)(AX*1), Y10 \
	VFMADD231PS  off+32(SI)(AX*1), Y10, hi

// func attnF32AVX2(x *float32, n int, rows *float32, stride int, y *float32, m int, mode int, scratch *float32)
// attnF16AVX2 for float32 vectors: every product is fused into its lane.
TEXT ·attnF32AVX2(SB), NOSPLIT, $0-64
	ATTN_ARGS(2)
	TESTQ R9, R9
	JZ   a32done

a32row:
	ZEROY8
	XORQ   AX, AX
	TESTQ  R11, R11
	JZ     m0
	ROWCHUNKS(F32CHUNK, 64)

tail:
	MOVQ  R13, CX
	SHRQ  $2, CX
	NEGQ  CX
	ADDQ  R10, CX             // CX = n - n16
	TESTQ CX, CX
	JZ    a32combine
	SPILLTAIL(6)

a32tailloop:
	VMOVSS      (DI)(AX*1), X8
	VMOVSS      (SI)(AX*1), X9
	VMOVSS      (BX), X10
	VFMADD231SS X9, X8, X10
	VMOVSS      X10, (BX)
	ADDQ        $4, BX
	ADDQ        $4, AX
	DECQ        CX
	JNZ         a32tailloop
	RELOAD8

a32combine:
	COMBINE4
	F16TREE(Y0, Y1, X0, X1, 0)
	ADDQ   $4, R8
	ADDQ   DX, SI
	DECQ   R9
	JNZ    a32row

a32done:
	VZEROUPPER
	RET
