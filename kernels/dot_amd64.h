// Pieces of the row kernels shared by dot_avx2_amd64.s, dot_avx512_amd64.s,
// q50_amd64.s and q50_avx2_amd64.s: the frame of the four-token kernels
// (one weight row against four tokens xstride bytes apart), the q8_0 and
// q4_0 four-token kernels themselves, and the q4_K scale unpacking. A
// four-token kernel computes each token exactly as the AVX2 row kernel of
// its type does (the same lanes, accumulators and summation order), so
// MatMul's results do not depend on the batch.
//
// Registers: AX weights, BX token 0, R8 xstride, R9 3*xstride, CX blocks
// left, R11 y, R13 the f16 table, Y15 0x0001 words, Y14 0x0f bytes (q4_0),
// Y0-Y3 the tokens' accumulators.

// Y4 = the 32 4-bit values of the 16 bytes at src in GGUF's order (low
// nibbles, then high), through MASK, 0x0f bytes; clobbers X5.
#define NIBBLES32(src, MASK) \
	VMOVDQU     src, X4 \
	VPSRLW      $4, X4, X5 \
	VINSERTI128 $1, X5, Y4, Y4 \
	VPAND       MASK, Y4, Y4

// Horizontal sum of the 8 lanes of Y into lane 0 of X (clobbers T).
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T \
	VADDPS       T, X, X \
	VPERMILPS    $0x4e, X, T \
	VADDPS       T, X, X \
	VMOVSHDUP    X, T \
	VADDSS       T, X, X

// The end of a row of the row kernels: its result X0 to (R11), the next
// row (stride bytes on) while R9 rows are left, from label row.
#define ROWNEXT(row) \
	VMOVSS X0, (R11) \
	ADDQ   $4, R11 \
	ADDQ   stride+8(FP), SI \
	DECQ   R9 \
	JNZ    row

// The arguments (w, x, xstride, nb, y and the f16 table at F16).
#define TOK4_ARGS(F16) \
	MOVQ w+0(FP), AX \
	MOVQ x+8(FP), BX \
	MOVQ xstride+16(FP), R8 \
	MOVQ nb+24(FP), CX \
	MOVQ y+32(FP), R11 \
	MOVQ F16, R13 \
	LEAQ (R8)(R8*2), R9

#define ZERO4 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3

// Y15 = 0x0001 words (VPMADDWD's pair sum), Y14 = 0x0f bytes.
#define ONES16_Y15 \
	VPCMPEQW Y15, Y15, Y15 \
	VPSRLW   $15, Y15, Y15
#define LOWNIB_Y14 \
	VPCMPEQW  Y14, Y14, Y14 \
	VPSRLW    $12, Y14, Y14 \
	VPACKUSWB Y14, Y14, Y14

// Y4 = the 32 nibbles of the 16 bytes at off(AX), low ones first, through
// T; masked by Y14.
#define NIBBLES4(off, T) \
	VMOVDQU     off(AX), X4 \
	VPSRLW      $4, X4, T \
	VINSERTI128 $1, T, Y4, Y4 \
	VPAND       Y14, Y4, Y4

#define HSUM4(T) \
	HSUM(Y0, X0, T) \
	HSUM(Y1, X1, T) \
	HSUM(Y2, X2, T) \
	HSUM(Y3, X3, T)

// The four results X0..X3 at (R11), 4(R11), 8(R11), 12(R11).
#define MOVSS4 \
	VMOVSS X0, (R11) \
	VMOVSS X1, 4(R11) \
	VMOVSS X2, 8(R11) \
	VMOVSS X3, 12(R11)

#define STORE4 \
	HSUM4(X4) \
	MOVSS4

// The integer dot products of the 32 unsigned bytes B with the signed
// bytes A, as 8 int32 lanes of T: VPMADDUBSW, then VPMADDWD by Y15's
// ones (DOT of the four-token kernels).
#define MADD(A, B, T) \
	VPMADDUBSW A, B, T \
	VPMADDWD   Y15, T, T

// One token of a q8_0 block against the signed weight quants Y4 (Y6 =
// |Y4|, Y5 = weight scale): the token's signs go to its quants (VPSIGNB)
// so the product is unsigned times signed. D and Q address the token's
// scale and quants; T is DOT's result register.
#define TOK_SIGNED(D, Q, ACC, DOT, T) \
	MOVWLZX      D, DX \
	VBROADCASTSS (R13)(DX*4), Y7 \
	VMULPS       Y5, Y7, Y7 \
	VMOVDQU      Q, Y8 \
	VPSIGNB      Y4, Y8, Y8 \
	DOT(Y8, Y6, T) \
	VCVTDQ2PS    T, Y8 \
	VFMADD231PS  Y8, Y7, ACC

// One block of wbytes at wo(AX) for the four tokens (their q8_0 blocks at
// xo), into the accumulators A0..A3: UNPACK(wo) (Y4 = the signed weight
// quants), then TOK_SIGNED for each token.
#define SIGNED_BLK4(wo, xo, UNPACK, DOT, T, A0, A1, A2, A3) \
	MOVWLZX      wo(AX), DX \
	VBROADCASTSS (R13)(DX*4), Y5 \
	UNPACK(wo) \
	VPABSB       Y4, Y6 \
	TOK_SIGNED(xo(BX), (xo+2)(BX), A0, DOT, T) \
	TOK_SIGNED(xo(BX)(R8*1), (xo+2)(BX)(R8*1), A1, DOT, T) \
	TOK_SIGNED(xo(BX)(R8*2), (xo+2)(BX)(R8*2), A2, DOT, T) \
	TOK_SIGNED(xo(BX)(R9*1), (xo+2)(BX)(R9*1), A3, DOT, T)

// The four-token q8_0 and q4_0 kernels: CONSTS, then the blocks of wbytes
// in pairs, the even ones into Y0..Y3 and the odd ones into Y9..Y12, a
// last odd-numbered block into Y0..Y3, then each token's two sums added:
// per token exactly the arithmetic of the row kernels (SIGNED_ROWS), so a
// token's result does not depend on its batch.
#define SIGNED_TOK4(CONSTS, UNPACK, wbytes, DOT, T) \
	TOK4_ARGS(f16+40(FP)) \
	ONES16_Y15 \
	CONSTS \
	ZERO4 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11 \
	VXORPS Y12, Y12, Y12 \
	CMPQ   CX, $2 \
	JLT    one \
blk: \
	SIGNED_BLK4(0, 0, UNPACK, DOT, T, Y0, Y1, Y2, Y3) \
	SIGNED_BLK4(wbytes, 34, UNPACK, DOT, T, Y9, Y10, Y11, Y12) \
	ADDQ $(2*wbytes), AX \
	ADDQ $68, BX \
	SUBQ $2, CX \
	CMPQ CX, $2 \
	JGE  blk \
one: \
	TESTQ CX, CX \
	JZ    store \
	SIGNED_BLK4(0, 0, UNPACK, DOT, T, Y0, Y1, Y2, Y3) \
store: \
	VADDPS Y9, Y0, Y0 \
	VADDPS Y10, Y1, Y1 \
	VADDPS Y11, Y2, Y2 \
	VADDPS Y12, Y3, Y3 \
	STORE4 \
	VZEROUPPER \
	RET

// q8_0: the quants as they are.
#define Q80_CONSTS
#define Q80_UNPACK(wo) VMOVDQU (wo+2)(AX), Y4

// q4_0: the nibbles minus 8 (Y13 = 0x08 bytes).
#define Q40_CONSTS \
	LOWNIB_Y14 \
	VPSRLW $1, Y14, Y13 \
	VPANDN Y14, Y13, Y13
#define Q40_UNPACK(wo) \
	NIBBLES4((wo+2), X8) \
	VPSUBB Y13, Y4, Y4

// Unpack the 6-bit scales (sc) and mins (m) of the q4_K block at AX into
// X8 = sc0-3 | sc4-7 | m0-3 | m4-7 (bytes), through DX, R8, R12, R13, T:
// sc0-3 = u0&0x3f.., sc4-7 = (u2&0x0f..) | ((u0>>6)&0x03..)<<4,
// m0-3 = u1&0x3f..,  m4-7 = ((u2>>4)&0x0f..) | ((u1>>6)&0x03..)<<4.
#define Q4K_SCALES(T) \
	MOVL 4(AX), DX \
	MOVL 8(AX), R12 \
	MOVL 12(AX), R13 \
	MOVL DX, R8 \
	SHRL $6, R8 \
	ANDL $0x03030303, R8 \
	SHLL $4, R8 \
	MOVL R13, T \
	ANDL $0x0f0f0f0f, T \
	ORL  T, R8 \
	ANDL $0x3f3f3f3f, DX \
	MOVL R12, T \
	SHRL $6, T \
	ANDL $0x03030303, T \
	SHLL $4, T \
	SHRL $4, R13 \
	ANDL $0x0f0f0f0f, R13 \
	ORL  T, R13 \
	ANDL $0x3f3f3f3f, R12 \
	VMOVD        DX, X8 \
	VPINSRD      $1, R8, X8, X8 \
	VPINSRD      $2, R12, X8, X8 \
	VPINSRD      $3, R13, X8, X8

// The q6_K epilogue of one token at B: subtract 32*sum(sc*bsum) (SC = the
// 16 scales as words), then ACC += d*dx*IACC (D = d in every lane, T a
// temporary; V15 = Y15 or Z15).
#define Q6K_KEND(B, IACC, ACC, SC, V15, D, T) \
	VPMADDWD     260(B), SC, Y15 \
	VPSLLD       $5, Y15, Y15 \
	VPSUBD       V15, IACC, IACC \
	VCVTDQ2PS    IACC, IACC \
	VBROADCASTSS (B), T \
	VMULPS       D, T, T \
	VFMADD231PS  IACC, T, ACC

// END(B, IACC, ACC) for the four tokens, sub-block sums I0..I3 into the
// accumulators A0..A3.
#define KENDS4(END, I0, I1, I2, I3, A0, A1, A2, A3) \
	END(BX, I0, A0) \
	END(SI, I1, A1) \
	END(DI, I2, A2) \
	END(R10, I3, A3)

// The four-token q4_K and q6_K kernels (AVX2 and AVX-512): arguments w, x,
// xstride, nb, y; tokens at BX, SI, DI, R10 (292-byte q8_K blocks);
// CONSTS, ZERO (the accumulators Y0-Y3 or Z0-Z3), BLOCK per weight block
// of wbytes, STORE.
#define KTOK4(CONSTS, ZERO, BLOCK, wbytes, STORE) \
	MOVQ w+0(FP), AX \
	MOVQ x+8(FP), BX \
	MOVQ xstride+16(FP), R8 \
	MOVQ nb+24(FP), CX \
	MOVQ y+32(FP), R11 \
	LEAQ (BX)(R8*1), SI \
	LEAQ (BX)(R8*2), DI \
	LEAQ (SI)(R8*2), R10 \
	CONSTS \
	ZERO \
	TESTQ CX, CX \
	JLE   store \
blk: \
	BLOCK \
	ADDQ $wbytes, AX \
	ADDQ $292, BX \
	ADDQ $292, SI \
	ADDQ $292, DI \
	ADDQ $292, R10 \
	DECQ CX \
	JNZ  blk \
store: \
	STORE \
	VZEROUPPER \
	RET

// Two Q4_0/Q4_1/MXFP4 blocks' nibbles (16 bytes at off and off+bstride) into Z4,
// laid out like two consecutive q8 blocks: [b0 lo | b0 hi | b1 lo | b1 hi]
// (needs Z14 = 0x0f bytes).
#define NIBBLES2(off, bstride) \
	VMOVDQU      off(AX), X4 \
	VINSERTI128  $1, (off+bstride)(AX), Y4, Y4 \
	VPSRLW       $4, Y4, Y5 \
	VINSERTI64X4 $1, Y5, Z4, Z4 \
	VSHUFI64X2   $0xd8, Z4, Z4, Z4 \
	VPANDD       Z14, Z4, Z4

// Y = the scale product of the MXFP4 block at wo(AX) and the q8_0 block
// at xo(BX), broadcast (T clobbered; R10 the E8M0 table, R13 the f16 one).
#define MX_SCALE(wo, xo, Y, T) \
	MOVBLZX      wo(AX), DX \
	MOVWLZX      xo(BX), R12 \
	VBROADCASTSS (R13)(R12*4), Y \
	VBROADCASTSS (R10)(DX*4), T \
	VMULPS       T, Y, Y

// One MXFP4 block at wo(AX) against the q8_0 block at xo(BX) into ACC
// (needs Y12 the value table, Y14 0x0f bytes, Y15 0x0001 words).
#define MX_BLOCK(wo, xo, ACC) \
	MX_SCALE(wo, xo, Y2, Y3) \
	NIBBLES32((wo+1)(AX), Y14) \
	VPSHUFB      Y4, Y12, Y4 \
	SIGNED_DOT(xo, ACC)

#define MX_PF PREFETCHT0 2048(AX)

// A block of signed weight quants (Y4) against the q8_0 block at xo(BX),
// times the scale Y2, into ACC: the weights' signs go to the activations
// (VPSIGNB) so the product is unsigned times signed.
#define SIGNED_DOT(xo, ACC) \
	VMOVDQU      (xo+2)(BX), Y5 \
	VPABSB       Y4, Y6 \
	VPSIGNB      Y4, Y5, Y5 \
	VPMADDUBSW   Y5, Y6, Y6 \
	VPMADDWD     Y15, Y6, Y6 \
	VCVTDQ2PS    Y6, Y6 \
	VFMADD231PS  Y6, Y2, ACC
