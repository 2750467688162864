package engine

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
)

// Quantized synthetic models against llama.cpp itself (engine/testdata/synth,
// see its README).
//
// Where the arithmetic is the same, the logits are the same. Dumping
// llama.cpp's intermediate tensors (its eval callback) showed these
// differences from what we computed, each now reproduced bit for bit and
// tested against glibc or ggml itself in kernels:
//   - RoPE: ggml takes cosf/sinf of glibc (Arm's optimized-routines
//     algorithm, off by an ulp from correctly rounded in ~1% of angles) and
//     GCC fuses one product of each rotated value into an FMA
//     (kernels.SinCosF32, RoPEApply);
//   - softmax: ggml's AVX-512 expf approximation, and the sum taken in
//     16-value float32 chunks by the AVX-512 reduction tree before float64
//     (kernels.ExpGGML, FastSoftmax; SwiGLU uses the same exp);
//   - the f16 attention products: llamafile's tinyBLAS order (16 float32
//     lanes) for batches of several tokens, ggml_vec_dot_f16's order (4 x 16
//     lanes over 64-value steps) for one token (kernels.AttnDotF16Rows,
//     AttnDotF16RowsSingle; ggmlDecodeOrder); with an F32 cache, the same
//     orders with each float32 product fused into its lane, and the scores
//     always in ggml_vec_dot_f32's (AttnDotF32Rows, AttnDotF32RowsSingle).
//
// That alone did not move these files (median 0.03-0.05 before and after):
// a one-ulp difference anywhere is amplified by the random weights, and the
// weight matrix products still sum in other orders. ggml sums a q8_0 row
// product in 8 float32 lanes (lane l: bytes 4l..4l+3 of each block as an
// exact integer, times the block scales, fused into the lane), then a
// fixed tree; our generic kernel sums blocks one after another and the
// SIMD and packed kernels in their own orders. With a q8_0 kernel in ggml's
// order (ggmlOrderQ8 below, a test-only packed layout) every position of
// the four Q8_0 files equals llama.cpp's exactly (0.0000) on every kernel
// set, with the F16 and the F32 KV cache: TestSynthQ8LlamaCppExact. The same holds for the Q4_K_M files
// against llama.cpp without repacking, with q4_K and q6_K products in the
// order of ggml's AVX2 vec_dot kernels (ggmlOrderK; q6_K takes its -32
// offset off through the block sums, in lanes of its own), for prompts of
// up to 7 tokens: TestSynthQ4KLlamaCppNoRepack. From 8 tokens on llama.cpp
// switches to yet another q4_K order, and its default (repacked q4_K_8x8)
// run is a third one: its two runs differ by up to 0.18 between themselves.
//
// With our own kernels the test asks for what the arithmetic allows, which
// still catches any wiring, dequantization, RoPE or norm error (those move
// log-probabilities by whole units):
//   - the first position (BOS; no attention mixing, RoPE is the identity)
//     within 0.005: it is exact to 3 decimals on every file and kernel set;
//   - every prompt and greedy position within 0.25, and the median over all
//     positions of a file within 0.08 (1.5 times llama.cpp's own largest
//     per-file median, 0.054); measured: median 0-0.063, maximum 0.19;
//   - top-1 agreement, and greedy tokens identical, where the reference's
//     top-2 gap exceeds 0.25 (a smaller gap can flip under that noise).
const (
	synthQuantBOSTol    = 0.005
	synthQuantTol       = 0.25
	synthQuantMedianTol = 0.08
	synthQuantGap       = 0.25
)

func TestSynthQuantizedLlamaCppReference(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma3"} {
		for _, q := range []string{"Q8_0", "Q4_K_M"} {
			name := "synth-" + arch + "-" + q
			refs := []string{"testdata/synth/" + name + ".llamacpp.ref.jsonl"}
			if q == "Q4_K_M" {
				refs = append(refs, "testdata/synth/"+name+".llamacpp-norepack.ref.jsonl")
			}
			for _, ref := range refs {
				t.Run(name+map[bool]string{true: "-norepack"}[len(refs) == 2 && ref == refs[1]], func(t *testing.T) {
					var diffs []float64
					runRefFiles(t, refOptions{
						model: shareddata.Path(t, "synth/"+name+".gguf"), refs: ref,
						tol: synthQuantTol, gap: synthQuantGap, prompts: synthPrompts(t), diffs: &diffs,
						tolAt: func(ci, i int) float64 {
							if i == 0 {
								return synthQuantBOSTol
							}
							return synthQuantTol
						},
					})
					slices.Sort(diffs)
					median := diffs[len(diffs)/2]
					t.Logf("%d positions: median %.4f, 90th percentile %.4f, max %.4f", len(diffs), median, diffs[len(diffs)*9/10], diffs[len(diffs)-1])
					assert.LessOrEqual(t, median, synthQuantMedianTol, "median log-probability difference")
				})
			}
		}
	}
}

// ggmlOrderQ8 is a packed layout that changes nothing in the bytes but sums
// q8_0 x q8_0 row products as ggml's CPU backend does (ggml_vec_dot_q8_0_q8_0
// and tinyBLAS alike on AVX2/AVX-512): 8 float32 lanes, lane l taking the
// exact integer sum of bytes 4l..4l+3 of every block, multiplied by the
// float32 product of the two block scales and fused into the lane; then
// (l0+l4)+(l2+l6) + (l1+l5)+(l3+l7).
var ggmlOrderQ8 = kernels.PackedLayout{
	Name: "q8_0.ggml-order.test.v1", Type: gguf.Q8_0, Rows: 16, MaxTok: 8,
	GroupBytes: func(cols int) int { return 16 * cols / 32 * 34 },
	Pack:       func(dst, src []byte, cols int) { copy(dst, src) },
	Dot:        ggmlOrderQ8Dot,
	DotGeneric: ggmlOrderQ8Dot,
}

func ggmlOrderQ8Dot(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	rowBytes := cols / 32 * 34
	f16 := func(b []byte) float32 { return kernels.F16ToF32(binary.LittleEndian.Uint16(b)) }
	for t := range nTok {
		xt := x[t*xStride : t*xStride+rowBytes]
		for r := range 16 {
			w := g[r*rowBytes : (r+1)*rowBytes]
			var acc [8]float32
			for b := 0; b < rowBytes; b += 34 {
				d := f16(w[b:]) * f16(xt[b:])
				for l := range acc {
					var s int32
					for j := b + 2 + 4*l; j < b+6+4*l; j++ {
						s += int32(int8(w[j])) * int32(int8(xt[j]))
					}
					acc[l] = kernels.FMA32(d, float32(s), acc[l])
				}
			}
			y[t*yStride+r] = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
		}
	}
}

// TestSynthQ8LlamaCppExact runs the Q8_0 synthetic models with q8_0 products
// summed in ggml's order (ggmlOrderQ8): then every prompt and greedy
// position must equal llama.cpp's log-probabilities (to 1e-5, the rounding
// of the float64 log-sum-exp), with the F16 KV cache and with the F32 one
// (the .kvf32 references), which holds only if RoPE, softmax, SwiGLU, the
// attention products and every other step round exactly as llama.cpp's do.
func TestSynthQ8LlamaCppExact(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma3"} {
		for _, kvf32 := range []bool{false, true} {
			name := "synth-" + arch + "-Q8_0"
			ref := "testdata/synth/" + name + ".llamacpp.ref.jsonl"
			if kvf32 {
				ref = "testdata/synth/" + name + ".llamacpp.kvf32.ref.jsonl"
			}
			t.Run(name+map[bool]string{true: "-kvf32"}[kvf32], func(t *testing.T) {
				model := shareddata.Path(t, "synth/"+name+".gguf")
				restore := kernels.SetPackedForTest(gguf.Q8_0, &ggmlOrderQ8)
				defer restore()
				var diffs []float64
				runRefFiles(t, refOptions{
					model: model, refs: ref, kvf32: kvf32,
					tol: 1e-5, gap: 0, prompts: synthPrompts(t), diffs: &diffs, pack: PackOn,
				})
				assert.LessOrEqual(t, slices.Max(diffs), 1e-5, "largest log-probability difference")
			})
		}
	}
}

// ggmlOrderK returns a test-only packed layout (bytes unchanged) summing
// q4_K or q6_K x q8_K row products as ggml's AVX2 kernels do: per super-block
// an exact integer per lane l (the values at offsets 4l..4l+3 of every 32,
// times their scales), converted to float32 and fused into lane l with the
// float32 product of the two block scales; q4_K's mins go through 4 lanes of
// their own (sub-block pairs); then the 8-lane tree, plus the 4 min lanes.
func ggmlOrderK(t gguf.Type) *kernels.PackedLayout {
	blockBytes := map[gguf.Type]int{gguf.Q4_K: 144, gguf.Q6_K: 210}[t]
	dot := func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
		rowBytes := cols / 256 * blockBytes
		f16 := func(b []byte) float32 { return kernels.F16ToF32(binary.LittleEndian.Uint16(b)) }
		var q [256]int32
		var scale [256]int32
		for tok := range nTok {
			xt := x[tok*xStride:]
			for r := range 16 {
				w := g[r*rowBytes : (r+1)*rowBytes]
				var acc [8]float32
				var accM [4]float32
				for b := 0; b < cols/256; b++ {
					wb, yb := w[b*blockBytes:(b+1)*blockBytes], xt[b*292:(b+1)*292]
					yd := math.Float32frombits(binary.LittleEndian.Uint32(yb))
					q8 := yb[4:260]
					var d float32
					if t == gguf.Q4_K {
						d = yd * f16(wb[0:])
						dmin := -yd * f16(wb[2:])
						sc := wb[4:16]
						var mins [8]int32
						for j := range 8 {
							var s, m byte
							if j < 4 {
								s, m = sc[j]&63, sc[j+4]&63
							} else {
								s, m = sc[j+4]&0xf|(sc[j-4]>>6)<<4, sc[j+4]>>4|(sc[j]>>6)<<4
							}
							mins[j] = int32(m)
							for e := 32 * j; e < 32*j+32; e++ {
								scale[e] = int32(s)
							}
						}
						for jj := range 4 {
							for e := range 32 {
								v := wb[16+32*jj+e]
								q[64*jj+e], q[64*jj+32+e] = int32(v&0xf), int32(v>>4)
							}
						}
						for k := range 4 {
							var p int32
							for h := range 2 {
								sb := 2*k + h
								bs := int32(int16(binary.LittleEndian.Uint16(yb[260+4*sb:]))) + int32(int16(binary.LittleEndian.Uint16(yb[262+4*sb:])))
								p += mins[sb] * bs
							}
							accM[k] = kernels.FMA32(dmin, float32(p), accM[k])
						}
					} else {
						d = yd * f16(wb[208:])
						ql, qh, sc := wb[0:128], wb[128:192], wb[192:208]
						for j := range 2 {
							for l := range 32 {
								h := qh[32*j+l]
								q[128*j+l] = int32(ql[64*j+l]&0xf | (h&3)<<4)
								q[128*j+l+32] = int32(ql[64*j+l+32]&0xf | (h>>2&3)<<4)
								q[128*j+l+64] = int32(ql[64*j+l]>>4 | (h>>4&3)<<4)
								q[128*j+l+96] = int32(ql[64*j+l+32]>>4 | (h>>6&3)<<4)
							}
						}
						for e := range 256 {
							scale[e] = int32(int8(sc[e/16]))
						}
					}
					var lanes [8]int32
					for e := range 256 {
						lanes[e%32/4] += scale[e] * q[e] * int32(int8(q8[e]))
					}
					if t == gguf.Q6_K {
						// The -32 offset comes off through the block sums:
						// lane l takes 16-value groups 2l and 2l+1.
						for l := range lanes {
							for g := 2 * l; g < 2*l+2; g++ {
								bs := int32(int16(binary.LittleEndian.Uint16(yb[260+2*g:])))
								lanes[l] -= 32 * bs * int32(int8(wb[192+g]))
							}
						}
					}
					for l := range acc {
						acc[l] = kernels.FMA32(d, float32(lanes[l]), acc[l])
					}
				}
				s := ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
				y[tok*yStride+r] = s + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
			}
		}
	}
	return &kernels.PackedLayout{
		Name: t.String() + ".ggml-order.test.v1", Type: t, Rows: 16, MaxTok: 8,
		GroupBytes: func(cols int) int { return 16 * cols / 256 * blockBytes },
		Pack:       func(dst, src []byte, cols int) { copy(dst, src) },
		Dot:        dot, DotGeneric: dot,
	}
}

// TestSynthQ4KLlamaCppNoRepack is TestSynthQ8LlamaCppExact for the Q4_K_M
// files against llama.cpp without its repacked layouts, with q4_K and q6_K
// products in the order of ggml's AVX2 vec_dot kernels (ggmlOrderK). It
// holds for the prompts of fewer than 8 tokens (and their greedy
// continuations): from a batch of 8 tokens on, llama.cpp sums q4_K row
// products in yet another order (the same token's Q projection differs in
// 209 of 256 values between a 7- and an 8-token batch, by an ulp or so),
// which this test does not reproduce.
func TestSynthQ4KLlamaCppNoRepack(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "gemma3"} {
		name := "synth-" + arch + "-Q4_K_M"
		t.Run(name, func(t *testing.T) {
			model := shareddata.Path(t, "synth/"+name+".gguf")
			defer kernels.SetPackedForTest(gguf.Q4_K, ggmlOrderK(gguf.Q4_K))()
			defer kernels.SetPackedForTest(gguf.Q6_K, ggmlOrderK(gguf.Q6_K))()
			defer kernels.SetPackedForTest(gguf.Q8_0, &ggmlOrderQ8)()
			var diffs []float64
			runRefFiles(t, refOptions{
				model: model, refs: "testdata/synth/" + name + ".llamacpp-norepack.ref.jsonl",
				tol: 1e-5, gap: 0, diffs: &diffs, pack: PackOn,
				skip: func(rc refCase) bool { return len(rc.Tokens) >= 8 },
			})
			assert.NotEmpty(t, diffs)
			assert.LessOrEqual(t, slices.Max(diffs), 1e-5, "largest log-probability difference")
		})
	}
}
