package sample

import (
	"math"
	"slices"
)

// logSumExp returns max and ln(sum exp((logit - max)/t)) over c, and sets
// c[i].p to the probabilities at temperature t (t = 1: the untempered
// distribution), all in float64 with expDet and logDet so every platform
// computes the same values.
func logSoftmax(c []cand, t float64) (mx float32, lse float64) {
	mx = maxLogit(c)
	sum := 0.0
	for i := range c {
		e := expDet((float64(c[i].logit) - float64(mx)) / t)
		c[i].p = e
		sum += e
	}
	for i := range c {
		c[i].p /= sum
	}
	return mx, logDet(sum)
}

// typical keeps the locally typical candidates (llama.cpp's typical-p,
// after Meister et al.): ranked by how far each token's surprise -ln p is
// from the distribution's entropy, the closest first, until their
// probability exceeds p (the token that crosses it included). The result
// is in that order, not by logit.
func typical(c []cand, p float64) []cand {
	mx, lse := logSoftmax(c, 1)
	// surprise_i = lse - (l_i - mx), exactly, without a log per token.
	entropy := 0.0
	for i := range c {
		if c[i].p > 0 {
			entropy += c[i].p * (lse - (float64(c[i].logit) - float64(mx)))
		}
	}
	for i := range c {
		c[i].aux = math.Abs(lse - (float64(c[i].logit) - float64(mx)) - entropy)
	}
	slices.SortFunc(c, func(a, b cand) int {
		switch {
		case a.aux < b.aux:
			return -1
		case a.aux > b.aux:
			return 1
		}
		return cmpCand(a, b)
	})
	cum := 0.0
	for i := range c {
		cum += c[i].p
		if cum > p {
			return c[:i+1]
		}
	}
	return c
}

// xtc ("exclude top choices") removes every candidate whose probability
// (over c) is at least threshold except the least likely of them, when
// there are two or more; otherwise c is unchanged.
func xtc(c []cand, threshold float64) []cand {
	logSoftmax(c, 1)
	above := 0
	var last cand // the least likely candidate above the threshold
	for _, x := range c {
		if x.p >= threshold {
			if above == 0 || better(last, x) {
				last = x
			}
			above++
		}
	}
	if above < 2 {
		return c
	}
	out := c[:0]
	for _, x := range c {
		if x.p < threshold || x.id == last.id {
			out = append(out, x)
		}
	}
	return out
}

// mirostatV1 is llama.cpp's mirostat (Basu et al.): from the m most likely
// tokens it estimates the Zipf exponent s of the tempered distribution,
// derives the top-k that gives a surprise of mu bits, draws from that top-k
// and moves mu toward tau by the observed surprise.
func (s *Sampler) mirostatV1(c []cand, t float64, nVocab int) int32 {
	m := min(s.p.MirostatM, len(c))
	selectTop(c, m)
	// b_i = ln(p_i / p_{i+1}) is the difference of the tempered logits.
	sumTB, sumTT := 0.0, 0.0
	for i := 0; i+1 < m; i++ {
		ti := logDet(float64(i+2) / float64(i+1))
		bi := (float64(c[i].logit) - float64(c[i+1].logit)) / t
		sumTB += ti * bi
		sumTT += ti * ti
	}
	sHat := sumTB / sumTT
	eps := sHat - 1
	base := eps * expDet(s.mu*math.Ln2) / (1 - powDet(float64(nVocab), -eps))
	k := 1
	if kf := powDet(base, 1/sHat); base > 0 && kf >= 1 && !math.IsInf(kf, 0) && !math.IsNaN(kf) {
		k = int(min(kf, float64(len(c))))
	}
	selectTop(c, k)
	c = c[:k]
	return s.mirostatDraw(c, t)
}

// mirostatV2 keeps the tokens whose surprise is at most mu bits (at least
// the most likely one), draws from them and updates mu.
func (s *Sampler) mirostatV2(c []cand, t float64) int32 {
	mx, lse := logSoftmax(c, t)
	out := c[:0]
	var top cand
	for i, x := range c {
		if i == 0 || better(x, top) {
			top = x
		}
		surprise := (lse - (float64(x.logit)-float64(mx))/t) / math.Ln2
		if surprise <= s.mu {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		out = append(out, top)
	}
	// Draw in rank order, as over a sorted list (the kept set is small).
	slices.SortFunc(out, cmpCand)
	return s.mirostatDraw(out, t)
}

// mirostatDraw draws from c at temperature t and updates mu with the
// drawn token's surprise over c.
func (s *Sampler) mirostatDraw(c []cand, t float64) int32 {
	i := s.draw(c, t)
	mx, lse := logSoftmax(c, t)
	surprise := (lse - (float64(c[i].logit)-float64(mx))/t) / math.Ln2
	s.mu -= float64(s.p.MirostatEta) * (surprise - float64(s.p.MirostatTau))
	return c[i].id
}
