package engine

import (
	"math"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/pool"
)

// The gated DeltaNet layers of a hybrid model (arch.DeltaNet), as
// llama.cpp computes them. Per token, the mixed projection MX (the
// queries, keys and values of every head) goes through a causal
// convolution of width ConvK over the last inputs of each channel (the
// layer's convolution state, then the batch), then silu; queries and keys
// are L2-normed per head; the write strength is sigmoid(beta) and the
// decay exp(softplus(alpha + dt) * a) with a = -exp(A_log). Per value
// head h, with key head sp.KeyHead(h), the state S (State x State) follows
// the delta rule
//
//	S = decay * S;  S += k (beta (v - S^T k))^T;  o = S^T q / sqrt(State)
//
// and o is RMS-normed (ssm_norm) and multiplied by silu(z). The per-token
// part runs split over tokens (deltaNetToken), the recurrence split over
// value heads (runDeltaNet), each head's tokens in order, so a decoded
// token costs the same at any context length.

// splitGate separates a full-attention layer's queries from their output
// gates: qg holds, per head, hd queries then hd gate values.
func splitGate(qg, q, g []float32, hd int) {
	for h := 0; h < len(q)/hd; h++ {
		copy(q[h*hd:(h+1)*hd], qg[2*h*hd:(2*h+1)*hd])
		copy(g[h*hd:(h+1)*hd], qg[(2*h+1)*hd:(2*h+2)*hd])
	}
}

// sigmoidGate multiplies x by sigmoid(g), as ggml (1/(1+exp(-g)) in float32).
func sigmoidGate(x, g []float32) {
	for i, v := range g[:len(x)] {
		x[i] *= sigmoid(v)
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// softplus is ggml's: x above 20, else log(1 + exp(x)) in float32.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + expf(x))))
}

// recOf is the recurrent state of batch token t's sequence and the batch
// index of that sequence's first token: a Batcher's step holds the tokens
// of several sessions, each session's together and in order.
func (s *Session) recOf(t int) (r *recurrent, t0 int) {
	if s.multi != nil {
		return s.multi.seq[t].rec, t - int(s.multi.off[t])
	}
	return s.rec, 0
}

// seqAt is, for the first batch token t0 of a sequence, that sequence's
// recurrent state and its number of tokens in the batch.
func (s *Session) seqAt(t0 int) (r *recurrent, n int) {
	if s.multi != nil {
		return s.multi.seq[t0].rec, int(s.multi.n[t0])
	}
	return s.rec, s.nTok
}

// deltaNetToken is the per-token part of layer il's DeltaNet for batch
// token t: the convolution (reading the state's inputs before its
// sequence's first tokens in the batch), silu, the queries' and keys' L2
// norms and the gates.
func (s *Session) deltaNetToken(L *layer, il, t int) {
	sp := &s.c.SSM
	K, ch := sp.ConvK, sp.ConvDim()
	w := L.vecs[arch.SSMConv]
	r, t0 := s.recOf(t)
	state := r.convState(il)
	mx := s.bufs[arch.MX][t0*ch:] // the sequence's inputs
	out := s.tok(arch.CV, t)
	// Tap i reads the sequence's token t-t0-(K-1)+i, or the state's
	// inputs for a token before the batch. The taps are summed in order
	// from zero for every channel, one tap over all channels at a time.
	clear(out)
	for i := range K {
		j := t - t0 - (K - 1) + i
		if j < 0 {
			for c := range out {
				out[c] += state[c*(K-1)+K-1+j] * w[c*K+i]
			}
			continue
		}
		x := mx[j*ch : (j+1)*ch]
		for c := range out {
			out[c] += x[c] * w[c*K+i]
		}
	}
	if s.dn != nil {
		s.kern.FastSwiGLU(out, out, s.dn.ones[:ch])
	} else {
		siluRow(out)
	}
	S := sp.State
	for h := 0; h < 2*sp.KHeads; h++ {
		l2Norm(out[h*S:(h+1)*S], s.c.Eps)
	}
	bt, al := s.tok(arch.BT, t), s.tok(arch.AL, t)
	dt, a := L.vecs[arch.SSMDt], L.vecs[arch.SSMA]
	for h := range bt {
		bt[h] = sigmoid(bt[h])
		al[h] = softplus(al[h]+dt[h]) * a[h]
	}
}

// l2Norm divides x by its length (at least eps), as llama.cpp's DeltaNet
// graph computes it: an RMS norm with eps/n, then times 1/sqrt(n).
func l2Norm(x []float32, eps float32) {
	n := float32(len(x))
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps/n)))
	inv := 1 / float32(math.Sqrt(float64(n)))
	for i, v := range x {
		x[i] = v * scale * inv
	}
}

// shiftConvState makes layer il's convolution state of every sequence in
// the batch the last ConvK-1 inputs of each channel after the batch, once
// the batch's convolutions are done.
func (s *Session) shiftConvState(il int) {
	ch := s.c.SSM.ConvDim()
	for t0 := 0; t0 < s.nTok; {
		r, n := s.seqAt(t0)
		s.shiftConv(r.convState(il), s.bufs[arch.MX][t0*ch:], n)
		t0 += n
	}
}

// shiftConv makes the convolution state the last ConvK-1 inputs of each
// channel after the n inputs mx (the state's, then mx's).
func (s *Session) shiftConv(state, mx []float32, n int) {
	sp := &s.c.SSM
	K1, ch := sp.ConvK-1, sp.ConvDim()
	for c := range ch {
		row := state[c*K1 : (c+1)*K1]
		// Reads come from later in row than the writes, so ascending
		// order reads each old value before it is replaced.
		for i := range K1 {
			j := n - K1 + i
			if j < 0 {
				row[i] = row[K1+j]
			} else {
				row[i] = mx[j*ch+c]
			}
		}
	}
}

// runDeltaNet is the pool task of the recurrence of layer s.il: thread i
// takes its share of the value heads, each over the batch's tokens in
// order, sequence by sequence (each over its own state). The reference
// numerics modes step token by token in ggml's order (deltaNetHead); the
// default one steps with the fused kernel (deltaNetHeadSteps), or, with
// chunks on, evaluates a sequence of at least deltaChunkMin tokens in
// the batch in chunks (deltaNetHeadChunked): what each sequence's tokens
// would take alone.
func (s *Session) runDeltaNet(i, n int) {
	sp := &s.c.SSM
	S := sp.State
	lo, hi := pool.Split(sp.VHeads, i, n, 1)
	for h := lo; h < hi; h++ {
		for t0 := 0; t0 < s.nTok; {
			r, nt := s.seqAt(t0)
			M := r.ssmState(s.il)[h*S*S : (h+1)*S*S]
			switch {
			case s.dn == nil:
				s.deltaNetHead(h, M, t0, nt)
			case s.dn.chunk > 0 && nt >= deltaChunkMin:
				s.deltaNetHeadChunked(h, M, t0, nt, &s.dn.work[i])
			default:
				s.deltaNetHeadSteps(h, M, t0, nt)
			}
			t0 += nt
		}
	}
}

// deltaNetHead advances value head h's state M over batch tokens t0 to
// t0+nt-1 and writes its gated, normed output for each, in ggml's order.
// The state is stored transposed (row j is column j of S), so each step
// is, per row, one dot product with the key, one update along the key
// and one dot product with the query.
func (s *Session) deltaNetHead(h int, M []float32, t0, nt int) {
	c := s.c
	sp := &c.SSM
	S := sp.State
	kh := sp.KeyHead(h)
	scale := 1 / float32(math.Sqrt(float64(S)))
	for t := t0; t < t0+nt; t++ {
		cv := s.tok(arch.CV, t)
		q := cv[kh*S : (kh+1)*S]
		k := cv[(sp.KHeads+kh)*S : (sp.KHeads+kh+1)*S]
		v := cv[(2*sp.KHeads+h)*S : (2*sp.KHeads+h+1)*S]
		beta := s.tok(arch.BT, t)[h]
		s.kern.Scale(M, expf(s.tok(arch.AL, t)[h]))
		out := s.tok(arch.DN, t)[h*S : (h+1)*S]
		for j := range S {
			row := M[j*S : (j+1)*S]
			d := (v[j] - s.kern.Dot(row, k)) * beta
			s.kern.Axpy(row, d, k)
			out[j] = s.kern.Dot(row, q) * scale
		}
		s.deltaNetGate(h, t, out)
	}
}

// deltaNetGate RMS-norms value head h's output for token t (out) and
// multiplies it by silu(z) (the vector kernel in the default numerics).
func (s *Session) deltaNetGate(h, t int, out []float32) {
	S := s.c.SSM.State
	s.ops.RMSNorm(out, out, s.m.layers[s.il].vecs[arch.SSMNorm], s.c.Eps)
	z := s.tok(arch.Z, t)[h*S : (h+1)*S]
	if s.dn != nil {
		s.kern.FastSwiGLU(out, z, out)
		return
	}
	for j, zv := range z {
		out[j] *= siluAt(zv, j, S)
	}
}

// deltaNetHeadSteps is deltaNetHead on the fused kernel
// (kernels.Set.DeltaStep): one pass over the state per token instead of
// four, the same values up to float32 rounding.
func (s *Session) deltaNetHeadSteps(h int, M []float32, t0, nt int) {
	sp := &s.c.SSM
	S := sp.State
	kh := sp.KeyHead(h)
	scale := 1 / float32(math.Sqrt(float64(S)))
	for t := t0; t < t0+nt; t++ {
		cv := s.tok(arch.CV, t)
		q := cv[kh*S : (kh+1)*S]
		k := cv[(sp.KHeads+kh)*S : (sp.KHeads+kh+1)*S]
		v := cv[(2*sp.KHeads+h)*S : (2*sp.KHeads+h+1)*S]
		out := s.tok(arch.DN, t)[h*S : (h+1)*S]
		s.kern.DeltaStep(M, k, q, v, out, expf(s.tok(arch.AL, t)[h]), s.tok(arch.BT, t)[h])
		s.kern.Scale(out, scale)
		s.deltaNetGate(h, t, out)
	}
}
