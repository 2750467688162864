package numerics

import (
	"math"

	"github.com/moonlm/moonlm/kernels"
)

// Head is one head of one token's attention over an f16 KV cache.
type Head struct {
	Q   []float32 // the query, head size values
	Out []float32 // the output, head size values
	// K holds the keys: cell j's key at K[j*KStride:].
	K       []uint16
	KStride int
	// V holds the values: dimension d of cell j at V[d*VStride+j].
	V       []uint16
	VStride int
	// First and Pos are the first and last cells the token sees.
	First, Pos int
	// Scale multiplies the scores.
	Scale float32
	// Scores is scratch of at least Ops.AttendScratch values.
	Scores []float32
}

// ikKStep is the key block of ik_llama.cpp's CPU flash attention for a KV
// cache padded to a multiple of 256 cells: keys are taken 128 at a time,
// each block updating the running maximum and sum (online softmax).
const ikKStep = 128

// ikDotF16 is one attention score as ik_llama.cpp's flash attention
// computes it for an f16 K cache (iqk_gemm_default_floats on AVX-512): the
// key row converted to f32, q kept in f32, four accumulators (one per
// 128-bit lane group) each fusing four consecutive products of every
// 16-value step, then (a0+a1)+(a2+a3).
func ikDotF16(q []float32, k []uint16) float32 {
	var acc [4]float32
	for i := 0; i+16 <= len(q); i += 16 {
		for c := 0; c < 4; c++ {
			a := acc[c]
			for e := 0; e < 4; e++ {
				j := i + 4*c + e
				a = kernels.FMA32(kernels.F16ToF32(k[j]), q[j], a)
			}
			acc[c] = a
		}
	}
	return (acc[0] + acc[1]) + (acc[2] + acc[3])
}

// AttendIk computes one head as ik_llama.cpp's CPU flash attention does
// with an f16 cache: f32 scores (ikDotF16) times the scale, per 128-key
// block the block maximum, ggml's vector exp of the shifted scores kept in
// f32 (not rounded to f16 as ggml's non-flash path does), the block's
// weights summed lane-wise over its 16-key vectors and then across lanes,
// and the values accumulated with one fused multiply-add per key in key
// order; the output is the sum times 1/S.
func AttendIk(h Head) {
	hd := len(h.Q)
	q, out := h.Q, h.Out[:hd]
	w := h.Scores[:ikKStep]
	M := float32(math.Inf(-1))
	var S float32
	clear(out)
	for b := h.First / ikKStep * ikKStep; b <= h.Pos; b += ikKStep {
		smax := float32(math.Inf(-1))
		for j := range w {
			cell := b + j
			if cell < h.First || cell > h.Pos {
				w[j] = float32(math.Inf(-1))
				continue
			}
			w[j] = h.Scale * ikDotF16(q, h.K[cell*h.KStride:cell*h.KStride+hd])
			smax = max(smax, w[j])
		}
		if smax == float32(math.Inf(-1)) {
			continue
		}
		if smax > M {
			if !math.IsInf(float64(M), -1) {
				m := float32(math.Exp(float64(M - smax)))
				S *= m
				for d := range out {
					out[d] *= m
				}
			}
			M = smax
		}
		var lanes [16]float32
		for j := range w {
			w[j] = kernels.ExpGGML(w[j] - M)
			lanes[j%16] += w[j]
		}
		S += kernels.Sum16(&lanes)
		for j, wj := range w {
			if wj == 0 {
				continue
			}
			cell := b + j
			for d := range out {
				out[d] = kernels.FMA32(kernels.F16ToF32(h.V[d*h.VStride+cell]), wj, out[d])
			}
		}
	}
	norm := 1 / S
	for d := range out {
		out[d] *= norm
	}
}
