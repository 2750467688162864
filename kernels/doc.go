// Package kernels holds the numeric kernels of moonlm: the GGUF weight
// formats (dequantization, ggml's reference quantizers), activation
// conversion, row dot products, matrix-vector and matrix-matrix products over
// a row range, and the float helpers a transformer needs (RMSNorm, Softmax,
// SiLU/SwiGLU, GELU, RoPE, f16/bf16 conversion, f16 dots for an f16 KV cache).
//
// The kernels that have SIMD forms are methods of a Set, a kernel set chosen
// once (Detect for the best this CPU runs, New by name) and passed to
// whoever computes. A matrix-vector product converts the activations once,
// then dots every row:
//
//	ks := kernels.Detect()
//	xq := make([]byte, kernels.ActivationBytes(m.Type, m.Cols))
//	kernels.QuantizeRow(kernels.VecDotType(m.Type), x, xq)
//	ks.MatVec(m, xq, y, r0, r1) // y[r] for r in [r0, r1)
//
// The arithmetic follows ggml's CPU backend (see docs/FORMATS.md), so results
// match llama.cpp's: dequantization bit for bit, activation conversion byte
// for byte, dot products to float rounding. Every kernel has a pure-Go
// version, the "generic" set; on amd64 the "avx2" and "avx512" sets replace
// entries with SIMD kernels. Kernels work on caller-owned buffers and do not
// allocate.
package kernels
