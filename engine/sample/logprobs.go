package sample

import "math"

// MaxTopLogprobs bounds the alternatives reported per token.
const MaxTopLogprobs = 20

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// LogSoftmaxTop returns the log-probability of tok under softmax(logits)
// (natural log; NaN counts as -Inf) and writes the len(top) most likely
// tokens, best first (ties to the lower id), to top, returning how many it
// wrote: fewer when fewer tokens are possible (finite). It does not
// allocate. The sum runs in float64 with expDet and logDet, so the values
// are the same on every platform.
func LogSoftmaxTop(logits []float32, tok int32, top []TokenLogprob) (float32, int) {
	mx := float32(math.Inf(-1))
	for _, l := range logits {
		if l > mx {
			mx = l
		}
	}
	if math.IsInf(float64(mx), -1) {
		return float32(math.Inf(-1)), 0
	}
	if mx > math.MaxFloat32 { // +Inf: that token is certain
		mx = math.MaxFloat32
	}
	sum := 0.0
	for _, l := range logits {
		if l == l && !math.IsInf(float64(l), -1) {
			sum += expDet(float64(min(l, math.MaxFloat32)) - float64(mx))
		}
	}
	lse := float64(mx) + logDet(sum)
	lp := func(l float32) float32 {
		if l != l {
			return float32(math.Inf(-1))
		}
		return float32(float64(min(l, math.MaxFloat32)) - lse)
	}
	n := 0
	if len(top) > 0 {
		// Insertion into a short sorted list: O(vocab * len(top)) worst
		// case, about one comparison per token in practice.
		for i, l := range logits {
			if l != l || math.IsInf(float64(l), -1) {
				continue
			}
			if n == len(top) && l <= top[n-1].Logprob {
				continue
			}
			j := min(n, len(top)-1)
			for j > 0 && top[j-1].Logprob < l {
				if j < len(top) {
					top[j] = top[j-1]
				}
				j--
			}
			top[j] = TokenLogprob{Token: int32(i), Logprob: l}
			if n < len(top) {
				n++
			}
		}
		// Logprob held the raw logit while ranking.
		for i := range top[:n] {
			top[i].Logprob = lp(top[i].Logprob)
		}
	}
	if tok < 0 || int(tok) >= len(logits) {
		return float32(math.Inf(-1)), n
	}
	return lp(logits[tok]), n
}

// Logprobs reports log-probabilities for the last Sample call, as
// LogSoftmaxTop over the logits that call saw after the logit bias, the
// repetition penalties and DRY (so a banned token has -Inf), before any
// truncation (top-k, typical-p, top-p, min-p, XTC, mirostat) and before the
// temperature: the model's distribution as adjusted for this token, which is
// what OpenAI's logprobs report. After no Sample, or an empty one, it
// returns -Inf and 0.
func (s *Sampler) Logprobs(tok int32, top []TokenLogprob) (float32, int) {
	if s.lastN == 0 {
		return float32(math.Inf(-1)), 0
	}
	return LogSoftmaxTop(s.work[:s.lastN], tok, top)
}

// Possible reports whether tok had a finite logit in the last Sample call
// after the logit bias, penalties and DRY: false for a banned token, which
// Sample returns only when every token is banned.
func (s *Sampler) Possible(tok int32) bool {
	return tok >= 0 && int(tok) < s.lastN && !math.IsInf(float64(s.work[tok]), -1)
}
