package engine

import (
	"math"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// Attention over a Q8_0 KV cache, as llama.cpp's CPU flash attention
// computes it over one (llama.cpp needs flash attention for a quantized V
// cache): each key and value row is stored in Q8_0 by the same quantizer
// ggml's copy into the cache uses, the query is converted to Q8_0 (the
// keys' dot-product type) and each score is ggml's q8_0 x q8_0 dot
// product; the values are expanded to f32 and summed with weights
// exp(score - max), divided by their sum at the end. llama.cpp runs the
// softmax online (rescaling the sum when a larger score appears) where we
// take the maximum first: the same values up to float rounding.
//
// Like llama.cpp (its default "attention rotation" for quantized caches),
// where the head dimension is a multiple of 64 the queries and keys are
// rotated by an orthonormal Walsh-Hadamard matrix before the keys are
// quantized (blocks of the largest power of two that divides the head
// dimension), and the values by one of size 64, the attention output being
// rotated back: the dot products are unchanged, but the rotated vectors
// spread outliers over their block, so Q8_0 loses less of them.

// kvRotation is the rotation sizes of a Q8_0 cache for head dimension hd
// (0: none), as llama.cpp chooses them.
func kvRotation(hd int) (rotK, rotV int) {
	if hd%64 != 0 || testNoKVRotation {
		return 0, 0
	}
	rotK = 64
	for hd%(rotK*2) == 0 {
		rotK *= 2
	}
	return rotK, 64
}

// testNoKVRotation turns the rotation off, for tests against llama.cpp
// run with LLAMA_ATTN_ROT_DISABLE=1.
var testNoKVRotation bool

// hadamard rotates each block of n values of x in place by the orthonormal
// Walsh-Hadamard matrix of size n (Sylvester's order; it is its own
// inverse), with the fast transform.
func hadamard(x []float32, n int) {
	scale := float32(1 / math.Sqrt(float64(n)))
	for b := 0; b+n <= len(x); b += n {
		blk := x[b : b+n]
		for h := 1; h < n; h *= 2 {
			for i := 0; i < n; i += 2 * h {
				for j := i; j < i+h; j++ {
					a, c := blk[j], blk[j+h]
					blk[j], blk[j+h] = a+c, a-c
				}
			}
		}
		for i := range blk {
			blk[i] *= scale
		}
	}
}

// storeKVQ8 writes the keys and values of position pos of layer il.
// k and v are the token's buffers, rotated in place (attention reads the
// cache, not them).
func (s *Session) storeKVQ8(kc *kvCache, il, pos int, k, v []float32) {
	rb := kc.rowQ8
	if kc.rotK > 0 {
		hadamard(k, kc.rotK)
		hadamard(v, kc.rotV)
	}
	s.kern.QuantizeAct(gguf.Q8_0, k, kc.kq8[il][pos*rb:(pos+1)*rb])
	s.kern.QuantizeAct(gguf.Q8_0, v, kc.vq8[il][pos*rb:(pos+1)*rb])
}

// attendHeadQ8 computes head h of token t's attention output over a Q8_0
// cache in the llama.cpp numerics modes (attendQ8Ggml); the fast mode
// takes attendHeadsQ8.
func (s *Session) attendHeadQ8(t, h, worker int) {
	c := s.lc
	hd := c.HeadDim
	g, pos, first, q, out := s.headView(t, h)
	kc := s.kvOf(t)
	rb, hb := kc.rowQ8, hd/32*q8Block
	qq := s.q8q[worker]
	if kc.rotK > 0 {
		hadamard(q, kc.rotK) // in place: nothing reads the query after attention
	}
	s.kern.QuantizeAct(gguf.Q8_0, q, qq)
	K, V := kc.kq8[s.kvl], kc.vq8[s.kvl]
	sink := float32(math.NaN()) // none
	if sinks := s.m.layers[s.il].vecs[arch.Sinks]; sinks != nil {
		sink = sinks[h]
	}
	s.attendQ8Ggml(K[g*hb:], V[g*hb:], rb, hb, first, pos, qq, out, sink, worker)
	if kc.rotV > 0 {
		hadamard(out, kc.rotV)
	}
}

// q8Decode says whether this forward pass's attention goes by decodeQ8:
// one token of one sequence over a Q8_0 cache in the fast mode.
func (s *Session) q8Decode() bool {
	return !testPerKVHead && s.decScores != nil && s.multi == nil && s.nTok == 1 && s.cache.q8 && s.m.numerics == NumericsFast
}

// decodeQ8 is the pool task of a decode step's attention over a Q8_0
// cache: thread i takes a contiguous range of KV heads (the heads of a
// cached row lie side by side, so the threads share few cache lines), its
// scores in its own part of decScores (cache capacity per query head).
func (s *Session) decodeQ8(i, n int) {
	c := s.lc
	g0, g1 := i*c.KVHeads/n, (i+1)*c.KVHeads/n
	if g0 < g1 {
		s.attendHeadsQ8(0, g0, g1, i, s.decScores[g0*(c.Heads/c.KVHeads)*s.cache.cap:])
	}
}

// attendHeadsQ8 computes, in the fast mode, the query heads of KV heads
// g0..g1-1 of token t over a Q8_0 cache, with scores scratch sc (room for
// their query heads' rows): the keys scored for the query heads of a KV
// head from one load of each key row (kernels.AttnScoresQ8Heads), by tiles
// of positions read for all of the KV heads in turn while the tile is in
// the first-level cache; the softmax taken whole (the maximum first, the
// vector exp); the values summed for the query heads of a KV head in one
// pass (kernels.AttnValuesQ8Heads). Each cached row is read from memory
// once per KV head rather than once per query head, and a head's result
// does not depend on which KV heads are computed with it.
func (s *Session) attendHeadsQ8(t, g0, g1, worker int, sc []float32) {
	c := s.lc
	hd, G := c.HeadDim, c.Heads/c.KVHeads
	h0, h1 := g0*G, g1*G
	_, pos, first, _, _ := s.headView(t, h0)
	kc := s.kvOf(t)
	rb, hb := kc.rowQ8, hd/32*q8Block
	m := pos - first + 1
	qDim := c.Heads * hd
	q, out := s.q[t*qDim+h0*hd:t*qDim+h1*hd], s.att[t*qDim+h0*hd:t*qDim+h1*hd]
	qq := s.q8q[worker][:(h1-h0)*hb]
	for j := range h1 - h0 {
		qj := q[j*hd : (j+1)*hd]
		if kc.rotK > 0 {
			hadamard(qj, kc.rotK) // in place: nothing reads the query after attention
		}
		s.kern.QuantizeAct(gguf.Q8_0, qj, qq[j*hb:(j+1)*hb])
	}
	K, V := kc.kq8[s.kvl], kc.vq8[s.kvl]
	sc = sc[:(h1-h0)*m] // head h0+j's scores at j*m
	tile := max(4, (32<<10)/rb&^3)
	for a := first; a <= pos; a += tile {
		k := min(tile, pos+1-a)
		for g := g0; g < g1; g++ {
			s.kern.AttnScoresQ8Heads(qq[(g-g0)*G*hb:], G, hd, K[a*rb+g*hb:], rb, k, sc[(g-g0)*G*m+a-first:], m)
		}
	}
	sinks := s.m.layers[s.il].vecs[arch.Sinks]
	for j := range h1 - h0 {
		row := sc[j*m : (j+1)*m]
		s.kern.Scale(row, s.c.KQScale)
		if sinks != nil {
			s.kern.FastSoftmaxSink(row, sinks[h0+j])
		} else {
			s.kern.FastSoftmax(row)
		}
	}
	for g := g0; g < g1; g++ {
		s.kern.AttnValuesQ8Heads(out[(g-g0)*G*hd:], hd, G, V[first*rb+g*hb:], rb, sc[(g-g0)*G*m:], m, m)
	}
	if kc.rotV > 0 {
		hadamard(out, kc.rotV) // blocks of rotV within each head's output
	}
}

// attendQ8Ggml is attention over one KV head's keys K and values V (rows
// rb bytes apart, hb bytes each) at positions first..pos in the
// arithmetic of llama.cpp's CPU flash attention: the llama.cpp numerics
// modes reproduce it bit for bit. A sink logit (NaN: none) joins the
// softmax after the keys, as llama.cpp adds it.
func (s *Session) attendQ8Ggml(K, V []byte, rb, hb, first, pos int, qq []byte, out []float32, sink float32, worker int) {
	// llama.cpp's online softmax, step for step: a larger score rescales
	// the sum and the accumulated values by exp(old max - new max); its
	// compiler fuses S*ms + vs and the vector multiply-adds.
	clear(out)
	vr := s.vrow[worker]
	m, sum := float32(math.Inf(-1)), float32(0)
	for j := first; j <= pos; j++ {
		off := j * rb
		x := dotQ80Ggml(K[off:off+hb], qq) * s.c.KQScale
		ms, vs := float32(1), float32(1)
		if x > m {
			ms = expf(m - x)
			m = x
			for d := range out {
				out[d] *= ms
			}
		} else {
			vs = expf(x - m)
		}
		dequantQ8(V[off:off+hb], vr)
		for d, y := range vr {
			out[d] = fmaf(y, vs, out[d])
		}
		sum = fmaf(sum, ms, vs)
	}
	if sink == sink { // not NaN
		ms, vs := float32(1), float32(1)
		if sink > m {
			ms = expf(m - sink)
			for d := range out {
				out[d] *= ms
			}
		} else {
			vs = expf(sink - m)
		}
		sum = fmaf(sum, ms, vs)
	}
	inv := float32(0)
	if sum != 0 {
		inv = 1 / sum
	}
	for d := range out {
		out[d] *= inv
	}
}

// dotQ80Ggml is the dot product of two rows of Q8_0 blocks summed as
// ggml_vec_dot_q8_0_q8_0 does on x86: eight float32 lanes, lane l adding
// the exact integer sum of quants 4l..4l+3 of each block times the product
// of the two block scales (fused), then ggml's 8-lane reduction. The
// llama.cpp numerics modes use it; the fast mode takes the kernel set's.
func dotQ80Ggml(a, b []byte) float32 {
	var acc [8]float32
	for o := 0; o+q8Block <= len(a); o += q8Block {
		d := kernels.F16ToF32(uint16(a[o])|uint16(a[o+1])<<8) * kernels.F16ToF32(uint16(b[o])|uint16(b[o+1])<<8)
		qa, qb := a[o+2:o+q8Block], b[o+2:o+q8Block]
		for l := range acc {
			var sum int32
			for i := 4 * l; i < 4*l+4; i++ {
				sum += int32(int8(qa[i])) * int32(int8(qb[i]))
			}
			acc[l] = kernels.FMA32(d, float32(sum), acc[l])
		}
	}
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

// expf is e**x rounded to float32.
func expf(x float32) float32 { return float32(math.Exp(float64(x))) }

// fmaf is x*y+z with one rounding to float32 (the product of two float32
// values is exact in float64, so only the sum rounds twice, which almost
// never changes the result).
func fmaf(x, y, z float32) float32 { return float32(math.FMA(float64(x), float64(y), float64(z))) }

// dequantQ8 expands Q8_0 blocks into dst (len(dst) values, a multiple of 32).
func dequantQ8(src []byte, dst []float32) {
	for b := 0; b*32 < len(dst); b++ {
		blk := src[b*q8Block : (b+1)*q8Block]
		d := kernels.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		for i := range 32 {
			dst[b*32+i] = d * float32(int8(blk[2+i]))
		}
	}
}
