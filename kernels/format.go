package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// format is what the kernels know of one GGUF type, beside its block
// geometry, which is gguf's (Type.BlockSize, Type.BlockBytes): adding a
// type is one entry here plus its kernels (a generic row dot, and the SIMD
// ones it names per instruction-set level).
type format struct {
	// vecDot is the activation type ggml pairs with the type in a dot
	// product (0: F32).
	vecDot gguf.Type
	// dequant expands whole blocks (len(dst) values).
	dequant func(src []byte, dst []float32)
	// quantize converts whole blocks: ggml's activation quantizer for the
	// activation types, its reference quantizer for weight types.
	quantize func(src []float32, dst []byte)
	// quantizeWeight, when set, is the reference quantizer model files are
	// written with where it differs from quantize (q8_0).
	quantizeWeight func(src []float32, dst []byte)
	// dot is the pure-Go row dot (the generic set's kernel).
	dot RowDotFunc
	// tokens, when set, is the pure-Go multi-token kernel, each token
	// computed exactly as dot does (the generic set's; a SIMD level that
	// replaces the row kernel replaces it too).
	tokens TokensDotFunc
	// tile is the pure-Go tile kernel (the generic set's; nil: MatMul's
	// loops over dot), the twin of the SIMD sets' tile kernels.
	tile TileDotFunc
	// exact, exact8x8 and ik are the llama.cpp-order layouts (PackedExact:
	// vec_dot order; exact8x8 the repacked q4_K_8x8 order, for matrices of
	// a multiple of 8 rows) and the ik_llama.cpp-order one (PackedIk).
	exact, exact8x8, ik *PackedLayout
	// amx is the layout of an encoder's products on a CPU with AMX-BF16
	// (Set.EncoderPacked; nil: none).
	amx *PackedLayout
	// simd are the type's kernels and packed layouts in the SIMD sets, by
	// instruction-set level: a set takes every level up to its own, each
	// over the one below (the avx512 set has the avx2 kernels with the avx512 ones over
	// them; the q4_1 and K-quant row kernels stay avx2 there: their
	// pairing of rows, or per-sub-block scales on VPMADDUBSW/VPMADDWD,
	// measured faster, and decode is memory bound).
	simd [numISA]simdKernels
}

// formats is the table of the types the kernels handle, by gguf.Type.
var formats = [numTypes]format{
	gguf.F32: {dequant: dequantF32, quantize: quantizeF32, dot: dotF32Row,
		simd: [numISA]simdKernels{isaAVX2: {rows: asmF32RowsAVX2}}},
	gguf.F16: {vecDot: gguf.F16, dequant: F16RowToF32, quantize: F32RowToF16, dot: dotF16Row, tile: dotF16Tile, amx: &amxF16,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmF16RowsAVX2, tok4: asmF16Tok4AVX2, tile: asmF16Tile3x4AVX2},
			isaAVX512: {tok4: asmF16Tok4AVX512, tile: asmF16Tile3x4AVX512}}},
	gguf.BF16: {vecDot: gguf.BF16, dequant: BF16RowToF32, quantize: F32RowToBF16, dot: dotBF16Row},
	gguf.Q4_0: {vecDot: gguf.Q8_0, dequant: dequantQ4_0, quantize: quantizeQ4_0, dot: dotQ4_0Generic,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ4_0RowsAVX2, tok4: asmQ4_0Tok4AVX2},
			isaAVX512: {rows: asmQ4_0RowsAVX512}}},
	gguf.Q4_1: {vecDot: gguf.Q8_1, dequant: dequantQ4_1, quantize: quantizeQ4_1, dot: dotQ4_1Generic, exact: &ggmlQ41VecDot,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ4_1RowsAVX2, tok4: asmQ4_1Tok4AVX2},
			isaAVX512: {packed: asmPackedQ4_1AVX512, packedGFNI: asmPackedQ4_1GFNI}}},
	gguf.Q5_0: {vecDot: gguf.Q8_0, dequant: dequantQ5_0, quantize: quantizeQ5_0, dot: dotQ5_0Generic, exact: &ggmlQ50VecDot,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ5_0RowsAVX2},
			isaAVX512: {rows: asmQ5_0RowsAVX512, packed: asmPackedQ5_0AVX512}}},
	gguf.Q5_1: {vecDot: gguf.Q8_1, dequant: dequantQ5_1, quantize: quantizeQ5_1, dot: dotQ5_1Generic},
	gguf.Q8_0: {vecDot: gguf.Q8_0, dequant: dequantQ8_0, quantize: quantizeQ8_0, quantizeWeight: quantizeQ8_0Ref, dot: dotQ8_0Generic, exact: &ggmlQ80VecDot, ik: &ikQ80,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ8_0RowsAVX2, tok4: asmQ8_0Tok4AVX2},
			isaAVX512: {rows: asmQ8_0RowsAVX512, packed: asmPackedQ8_0AVX512}}},
	gguf.Q8_1: {dequant: dequantQ8_1, quantize: quantizeQ8_1},
	gguf.Q2_K: {vecDot: gguf.Q8_K, dequant: dequantQ2K, quantize: quantizeQ2K, dot: dotQ2KGeneric},
	gguf.Q3_K: {vecDot: gguf.Q8_K, dequant: dequantQ3K, quantize: quantizeQ3K, dot: dotQ3KGeneric},
	gguf.Q4_K: {vecDot: gguf.Q8_K, dequant: dequantQ4K, quantize: quantizeQ4K, dot: dotQ4KGeneric, exact: &ggmlQ4KVecDot, exact8x8: &ggmlQ4K8x8, ik: &ikQ4K,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ4_KRowsAVX2, tok4: asmQ4_KTok4AVX2},
			isaAVX512: {packed: asmPackedQ4_KAVX512, packedGFNI: asmPackedQ4_KGFNI}}},
	gguf.Q5_K: {vecDot: gguf.Q8_K, dequant: dequantQ5K, quantize: quantizeQ5K, dot: dotQ5KGeneric},
	gguf.Q6_K: {vecDot: gguf.Q8_K, dequant: dequantQ6K, quantize: quantizeQ6K, dot: dotQ6KGeneric, exact: &ggmlQ6KVecDot, ik: &ikQ6K,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmQ6_KRowsAVX2, tok4: asmQ6_KTok4AVX2},
			isaAVX512: {packed: asmPackedQ6_KAVX512}}},
	gguf.Q8_K:   {dequant: dequantQ8K, quantize: quantizeQ8K},
	gguf.IQ4_NL: {vecDot: gguf.Q8_0, dequant: dequantIQ4NL, quantize: quantizeIQ4NL, dot: dotIQ4NLGeneric},
	gguf.IQ4_XS: {vecDot: gguf.Q8_K, dequant: dequantIQ4XS, quantize: quantizeIQ4XS, dot: dotIQ4XSGeneric},
	gguf.MXFP4: {vecDot: gguf.Q8_0, dequant: dequantMXFP4, quantize: quantizeMXFP4, dot: dotMXFP4Generic, tokens: dotMXFP4TokensGeneric, exact: &ggmlMXFP4Dot,
		simd: [numISA]simdKernels{
			isaAVX2:   {rows: asmMXFP4RowsAVX2, tok4: asmMXFP4Tok4AVX2},
			isaAVX512: {rows: asmMXFP4RowsAVX512, tok4: asmMXFP4Tok4AVX512}}},
}

// formatOf returns t's entry, or nil for a type the kernels do not know.
func formatOf(t gguf.Type) *format {
	if t >= numTypes {
		return nil
	}
	return &formats[t]
}

// RowBytes returns the bytes of n values of type t (n a multiple of the
// block size), from gguf's table of block sizes; 0 for a type gguf does not
// know.
func RowBytes(t gguf.Type, n int) int {
	bs := t.BlockSize()
	if bs == 0 {
		return 0
	}
	return n / bs * t.BlockBytes()
}

// Supported reports whether DequantizeRow and DotRow handle t.
func Supported(t gguf.Type) bool {
	f := formatOf(t)
	return f != nil && f.dot != nil
}

// VecDotType is the activation type ggml pairs with weight type t in a dot
// product: the activations are converted to it once per row of input.
func VecDotType(t gguf.Type) gguf.Type {
	if f := formatOf(t); f != nil && f.vecDot != 0 {
		return f.vecDot
	}
	return gguf.F32
}

// checkRow panics with context when a row length does not fit the format;
// callers (the engine) validate shapes at load time, so this is a bug.
func checkRow(t gguf.Type, n int) {
	if blk := t.BlockSize(); blk == 0 || n%blk != 0 {
		panic(fmt.Sprintf("kernels: row of %d values is not a multiple of the %v block size %d", n, t, blk))
	}
}

// DequantizeRow expands one row of weights of type t into dst (len(dst)
// values). The arithmetic is ggml's, in ggml's order, so results match its
// dequantizers bit for bit.
func DequantizeRow(t gguf.Type, src []byte, dst []float32) {
	f := formatOf(t)
	if f == nil || f.dequant == nil {
		panic(fmt.Sprintf("kernels: DequantizeRow: unsupported type %v", t))
	}
	checkRow(t, len(dst))
	f.dequant(src, dst)
}

// QuantizeRow converts one row of float32 values into type t (len(src)
// values; dst must hold their bytes). For the activation types it matches
// what ggml's x86 CPU backend stores byte for byte: F16 via F16C rounding,
// BF16 with ggml's rounding, Q8_0/Q8_1 as its AVX2 quantizers (scale
// 127/amax, round half to even, Q8_1 sum = d * sum of quants) and Q8_K as
// its reference quantizer. Weight types use ggml's reference quantizers.
func QuantizeRow(t gguf.Type, src []float32, dst []byte) {
	f := formatOf(t)
	if f == nil || f.quantize == nil {
		panic(fmt.Sprintf("kernels: QuantizeRow: unsupported type %v", t))
	}
	checkRow(t, len(src))
	f.quantize(src, dst)
}

// QuantizeWeightRow quantizes one row of weights with ggml's reference
// quantizers. It equals QuantizeRow except for Q8_0, where QuantizeRow is
// the activation path (ggml's AVX2 rounding) and this is quantize_row_q8_0_ref
// (scale 1/d, round half away from zero), what ggml writes into model files.
func QuantizeWeightRow(t gguf.Type, src []float32, dst []byte) {
	if f := formatOf(t); f != nil && f.quantizeWeight != nil {
		checkRow(t, len(src))
		f.quantizeWeight(src, dst)
		return
	}
	QuantizeRow(t, src, dst)
}

// PackedExact returns the ggml-order layout for a rows-row matrix of weight
// type t under order o, or nil when there is none for t (q8_0, q4_1, q5_0,
// q4_K and q6_K have one). The layouts take one row per group, so every row of a matrix
// is served by them, and up to 512 tokens per Dot call (ggmlMaxTok), which
// is what they know of the batch: llama.cpp multiplies a batch of 8 tokens
// or more with its tiled K-quant kernel and a smaller one with vec_dot, so
// the layouts are exact for batches of up to 512 tokens, llama.cpp's
// default micro-batch.
func PackedExact(t gguf.Type, rows int, o GGMLOrder) *PackedLayout {
	f := formatOf(t)
	if f == nil {
		return nil
	}
	if f.exact8x8 != nil && o == GGMLRepack && rows%8 == 0 {
		return f.exact8x8
	}
	return f.exact
}

// PackedIk returns the ik_llama.cpp-order layout for weight type t, or nil
// when there is none (q8_0, q4_K and q6_K have one). Their rows must be a
// multiple of 256 values for q4_K and q6_K, 32 for q8_0, as the types
// already require.
func PackedIk(t gguf.Type) *PackedLayout {
	if f := formatOf(t); f != nil {
		return f.ik
	}
	return nil
}

func dequantF32(src []byte, dst []float32) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantizeF32(src []float32, dst []byte) {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantizeIQ4NL(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		b := dst[i*gguf.BytesIQ4_NL : (i+1)*gguf.BytesIQ4_NL]
		quantizeIQ4(src[i*qk32:(i+1)*qk32], b[0:2], b[2:18], nil, nil)
	}
}

func quantizeIQ4XS(src []float32, dst []byte) {
	for i := 0; i < len(src)/qkK; i++ {
		b := dst[i*gguf.BytesIQ4_XS : (i+1)*gguf.BytesIQ4_XS]
		quantizeIQ4(src[i*qkK:(i+1)*qkK], b[0:2], b[8:136], b[2:4], b[4:8])
	}
}
