package engine

import (
	"math"

	"github.com/moonlm/moonlm/engine/arch"
)

// The chunked form of the gated delta rule, for prefill in the default
// numerics. Within a chunk of c tokens with log-decays l_i (AL) and their
// running sums G_i from the chunk's start, the state before the chunk S0
// and the decayed write strengths, every token's update u_i (the row
// added along k_i) and output follow from S0 and the chunk's own keys,
// queries and values:
//
//	u_i = beta_i (v_i - e^G_i S0^T k_i - sum_{l<i} e^(G_i-G_l) (k_i.k_l) u_l)
//	o_i = scale (e^G_i S0^T q_i + sum_{l<=i} e^(G_i-G_l) (q_i.k_l) u_l)
//	S   = e^G_c S0 + sum_l e^(G_c-G_l) k_l u_l^T
//
// The first is a unit lower-triangular system in the u_i, solved by
// forward substitution (one row of dot products per token). The rest are
// small matrix products (kernels.Set.DotsF32): the chunk's keys and
// queries against the state's rows and against the chunk's keys, the
// decayed query-key products against the updates for the outputs, and
// the updates against the decayed keys for the new state. The decays
// only enter as e^(G_i-G_l) with l <= i, at most 1 (the product of the
// decays of tokens l+1 to i), so long chunks of strong decay underflow to
// zero rather than overflow. A chunk reads the state three times (against
// the keys, the queries, and for its update) instead of once per token,
// and every product reads its rows once for four vectors.

// deltaChunk is the chunk length the scratch is sized for; deltaChunkMin
// the shortest batch evaluated in chunks when chunks are on.
//
// Chunks are off by default (deltaNetScratch.chunk 0): on AVX-512 with
// heads of 128 the fused per-token kernel measured about twice as fast
// as this chunked form per layer and batch of 64 tokens (1.0-1.6 ms
// against 1.9-2.5 ms on one thread), since the chunk's products do a
// third more arithmetic than the per-token step (the state's products
// with every key and query, and its update, are the same; the
// triangular products come on top) and DotsF32 is no more efficient per
// product than DeltaStep. The chunked path stays tested against the
// per-token one for when a faster small-matrix kernel makes it pay.
const (
	deltaChunk    = 64
	deltaChunkMin = 4
)

// deltaNetScratch is the default numerics' DeltaNet scratch: the chunk
// length (0, the default: always token by token; tests set the sized
// length or shorter ones) and one work area per worker.
type deltaNetScratch struct {
	chunk int
	work  []deltaWork
	ones  []float32 // [ConvDim] ones: silu(x) as FastSwiGLU(x, x, ones)
}

// deltaWork is one worker's scratch for one value head's chunk of c
// tokens (at most chunk) of a state of S x S; cp is chunk rounded up to
// 16, the row length of the triangular matrices and the transposed ones.
type deltaWork struct {
	g      []float32 // [chunk] running sums of the log-decays
	dec    []float32 // [chunk] the per-token decays e^l_i
	qs, u  []float32 // [chunk][S] S0^T q_i, the updates u_i
	ut, kt []float32 // [S][cp] the updates transposed, the decayed keys transposed
	a, p   []float32 // [chunk][cp] decayed k_i.k_l (l < i) and q_i.k_l (l <= i)
	upd    []float32 // [S][S] the chunk's addition to the state
	y      []float32 // [S] scratch row
}

// newDeltaNetScratch sizes the chunked recurrence's scratch for workers
// workers, a state of S x S and chunks of up to chunk tokens (left off).
func newDeltaNetScratch(workers, S, convDim, chunk int) *deltaNetScratch {
	d := &deltaNetScratch{work: make([]deltaWork, workers), ones: make([]float32, convDim)}
	for i := range d.ones {
		d.ones[i] = 1
	}
	cp := (chunk + 15) &^ 15
	for i := range d.work {
		d.work[i] = deltaWork{
			g: make([]float32, chunk), dec: make([]float32, chunk),
			qs: make([]float32, chunk*S), u: make([]float32, chunk*S),
			ut: make([]float32, S*cp), kt: make([]float32, S*cp),
			a: make([]float32, chunk*cp), p: make([]float32, chunk*cp),
			upd: make([]float32, S*S), y: make([]float32, S),
		}
	}
	return d
}

// deltaNetHeadChunked advances value head h's state M over batch tokens
// first to first+nt-1 in chunks of s.dn.chunk tokens and writes their
// gated, normed outputs.
func (s *Session) deltaNetHeadChunked(h int, M []float32, first, nt int, w *deltaWork) {
	for t0 := 0; t0 < nt; t0 += s.dn.chunk {
		s.deltaNetChunk(h, M, first+t0, min(s.dn.chunk, nt-t0), w)
	}
}

// deltaNetChunk is one chunk: batch tokens t0 to t0+c-1 of value head h,
// whose state is M.
func (s *Session) deltaNetChunk(h int, M []float32, t0, c int, w *deltaWork) {
	sp := &s.c.SSM
	S := sp.State
	kh := sp.KeyHead(h)
	scale := 1 / float32(math.Sqrt(float64(S)))
	cp := (s.dn.chunk + 15) &^ 15
	n := (c + 15) &^ 15 // the chunk's products rounded up to whole vectors
	kern := s.kern

	// The chunk's keys and queries as rows of the CV buffer: key l at
	// keys[l*cw:], query l at queries[l*cw:].
	cw := s.pl.width[arch.CV]
	kOff, qOff, vOff := (sp.KHeads+kh)*S, kh*S, (2*sp.KHeads+h)*S
	keys := s.bufs[arch.CV][t0*cw+kOff:]
	queries := s.bufs[arch.CV][t0*cw+qOff:]

	var G float32
	for i := range c {
		l := s.tok(arch.AL, t0+i)[h]
		G += l
		w.g[i] = G
		w.dec[i] = expf(l)
	}
	// S0^T k_i (into u) and S0^T q_i: the state's rows against every key
	// and query; then every query and key against the chunk's keys.
	// The key-key and query-key products only up to the diagonal, four
	// tokens at a time.
	kern.DotsF32(keys, c, cw, S, M, S, S, w.u, S)
	kern.DotsF32(queries, c, cw, S, M, S, S, w.qs, S)
	for g := 0; g < c; g += 4 {
		nx := min(4, c-g)
		kern.DotsF32(keys[g*cw:], nx, cw, S, keys, cw, g+nx, w.a[g*cp:], cp)
		kern.DotsF32(queries[g*cw:], nx, cw, S, keys, cw, g+nx, w.p[g*cp:], cp)
	}
	for i := range c {
		v := s.tok(arch.CV, t0+i)[vOff : vOff+S]
		beta := s.tok(arch.BT, t0+i)[h]
		eg := expf(w.g[i])
		u := w.u[i*S : (i+1)*S]
		for j, y := range u {
			u[j] = beta * (v[j] - eg*y)
		}
		// Decay the products with earlier keys by e^(G_i-G_l), the
		// product of the decays of tokens l+1 to i, and zero the later
		// ones, so that rounding lengths up to 16 adds nothing.
		a, p := w.a[i*cp:(i+1)*cp], w.p[i*cp:(i+1)*cp]
		d := float32(1)
		for l := i - 1; l >= 0; l-- {
			d *= w.dec[l+1]
			a[l] *= d
			p[l] *= d
		}
		clear(a[i:])
		clear(p[i+1:])
	}
	// Forward substitution: u_i -= beta_i sum_{l<i} a_il u_l, the
	// updates kept transposed (zeros from column i on).
	clear(w.ut)
	for i := range c {
		u := w.u[i*S : (i+1)*S]
		if i > 0 {
			beta := s.tok(arch.BT, t0+i)[h]
			kern.AttnDotF32Rows(w.a[i*cp:i*cp+(i+15)&^15], w.ut, cp, w.y)
			for j, y := range w.y {
				u[j] -= beta * y
			}
		}
		for j, x := range u {
			w.ut[j*cp+i] = x
		}
	}
	// o_i = scale (e^G_i S0^T q_i + sum_{l<=i} p_il u_l) for every token.
	// Four tokens at a time, over the updates up to the last of them.
	dw := s.pl.width[arch.DN]
	outs := s.bufs[arch.DN][t0*dw+h*S:]
	for g := 0; g < c; g += 4 {
		nx := min(4, c-g)
		kern.DotsF32(w.p[g*cp:], nx, cp, (g+nx+15)&^15, w.ut, cp, S, outs[g*dw:], dw)
	}
	for i := range c {
		out := s.tok(arch.DN, t0+i)[h*S : (h+1)*S]
		eg := expf(w.g[i])
		for j, x := range w.qs[i*S : (i+1)*S] {
			out[j] = scale * (eg*x + out[j])
		}
		s.deltaNetGate(h, t0+i, out)
	}
	// S = e^G_c S0 + sum_l e^(G_c-G_l) k_l u_l^T, row j (column j of S)
	// being row j of the updates against the decayed keys transposed.
	clear(w.kt)
	d := float32(1)
	for l := c - 1; l >= 0; l-- {
		if l < c-1 {
			d *= w.dec[l+1]
		}
		for r, x := range keys[l*cw : l*cw+S] {
			w.kt[r*cp+l] = d * x
		}
	}
	kern.DotsF32(w.ut, S, cp, n, w.kt, cp, S, w.upd, S)
	eg := expf(w.g[c-1])
	for i, y := range w.upd {
		M[i] = eg*M[i] + y
	}
}
