// Pieces shared by the packed q4_1, q5_0 and q8_0 kernels
// (packed_q41_amd64.s, packed_q50_amd64.s, packed_q80_amd64.s): one
// weight row per 32-bit lane of 16, K <= 8 tokens per call. Token t has
// its activations at P (BX R8 R9 R10 R11 R12 DI R14), its integer sum in
// I (Z24+t) and its float sum in FA (Z16+t).

// ALL(REST, M, a) applies M(a, P, I, FA, t) to token 0 and then to the
// REST: REST1, REST2, REST4 or REST8.
#define ALL(REST, M, a) M(a, BX, Z24, Z16, 0); REST(M, a)
#define REST1(M, a)
#define REST2(M, a) M(a, R8, Z25, Z17, 1)
#define REST4(M, a) \
	REST2(M, a); \
	M(a, R9, Z26, Z18, 2); \
	M(a, R10, Z27, Z19, 3)
#define REST8(M, a) \
	REST4(M, a); \
	M(a, R11, Z28, Z20, 4); \
	M(a, R12, Z29, Z21, 5); \
	M(a, DI, Z30, Z22, 6); \
	M(a, R14, Z31, Z23, 7)

// P += a; the next float sum to the next y row (AX = y, DX = ystride in
// bytes).
#define T_NEXT(a, P, I, FA, t) ADDQ $a, P
#define T_STORE(a, P, I, FA, t) ADDQ DX, AX; VMOVUPS FA, (AX)

// The other tokens' activation pointers (AX = xstride).
#define PTRS1
#define PTRS2 LEAQ (BX)(AX*1), R8
#define PTRS4 \
	PTRS2 \
	LEAQ (BX)(AX*2), R9 \
	LEAQ (R8)(AX*2), R10
#define PTRS8 \
	PTRS4 \
	LEAQ (BX)(AX*4), R11 \
	LEAQ (R8)(AX*4), R12 \
	LEAQ (R9)(AX*4), DI \
	LEAQ (R10)(AX*4), R14

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

// The 8 weight registers of a 4-bit block (Z(2c) values 4c.., Z(2c+1)
// values 16+4c..) against the tokens (DP = DP1..DP8), their q8 quants
// starting at byte b of the activation block.
#define NIBCHUNKS(DP, b) \
	DP(b, Z0) \
	DP(b+16, Z1) \
	DP(b+4, Z2) \
	DP(b+20, Z3) \
	DP(b+8, Z4) \
	DP(b+24, Z5) \
	DP(b+12, Z6) \
	DP(b+28, Z7)

// Z11 = the dword sums of Z10's bytes against K (VPDPBUSD), added up within
// each 128-bit lane, through Z12.
#define LANESUMS(K) \
	VPXORD       Z11, Z11, Z11 \
	VPDPBUSD     Z10, K, Z11 \
	VPSHUFD      $0x4e, Z11, Z12 \
	VPADDD       Z12, Z11, Z11 \
	VPSHUFD      $0xb1, Z11, Z12 \
	VPADDD       Z12, Z11, Z11

// The integer sums of K tokens = 0.
#define ZERO1 \
	VPXORD Z24, Z24, Z24

#define ZERO2 \
	ZERO1 \
	VPXORD Z25, Z25, Z25

#define ZERO4 \
	ZERO2 \
	VPXORD Z26, Z26, Z26 \
	VPXORD Z27, Z27, Z27

#define ZERO8 \
	ZERO4 \
	VPXORD Z28, Z28, Z28 \
	VPXORD Z29, Z29, Z29 \
	VPXORD Z30, Z30, Z30 \
	VPXORD Z31, Z31, Z31

// The arguments (w, nb, x, xstride, f16; y and ystride in STOREY).
#define PACKED_ARGS \
	MOVQ         w+0(FP), SI \
	MOVQ         nb+8(FP), CX \
	MOVQ         x+16(FP), BX \
	MOVQ         xstride+24(FP), AX \
	MOVQ         f16+48(FP), R13

// The float sums = 0.
#define ZEROF \
	VPXORD       Z16, Z16, Z16 \
	VPXORD       Z17, Z17, Z17 \
	VPXORD       Z18, Z18, Z18 \
	VPXORD       Z19, Z19, Z19 \
	VPXORD       Z20, Z20, Z20 \
	VPXORD       Z21, Z21, Z21 \
	VPXORD       Z22, Z22, Z22 \
	VPXORD       Z23, Z23, Z23

// AX = y, DX = ystride in bytes.
#define STOREY \
	MOVQ y+32(FP), AX \
	MOVQ ystride+40(FP), DX \
	SHLQ $2, DX
