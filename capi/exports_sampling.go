package main

/*
#include <stdlib.h>
#include <string.h>
#include "moonlm.h"
*/
import "C"

import (
	"math"
	"unsafe"
)

// The later sampler parameters (typical-p, XTC, mirostat, DRY, logit
// bias), moonlm_sampler_set_model, and log-probabilities for
// moonlm_generate_ex.

// maxBreakerScan bounds how far a DRY breaker's NUL is looked for; the
// sampler uses its first 40 bytes.
const maxBreakerScan = 4096

// samplerParamsExt validates the members of moonlm_sampler_params from
// typical_p on (moonlm.c has filled the defaults for a shorter struct).
func samplerParamsExt(fn string, p *C.moonlm_sampler_params, sp *samplerParams) C.int {
	sp.TypicalP = float32(p.typical_p)
	sp.XTCProbability = float32(p.xtc_probability)
	sp.XTCThreshold = float32(p.xtc_threshold)
	sp.Mirostat = int(p.mirostat)
	sp.MirostatTau = float32(p.mirostat_tau)
	sp.MirostatEta = float32(p.mirostat_eta)
	sp.MirostatM = int(p.mirostat_m)
	sp.DRYMultiplier = float32(p.dry_multiplier)
	sp.DRYBase = float32(p.dry_base)
	sp.DRYAllowedLength = int(p.dry_allowed_length)
	sp.DRYPenaltyLastN = int(p.dry_penalty_last_n)
	for _, f := range [...]struct {
		name string
		v    float32
	}{{"typical_p", sp.TypicalP}, {"xtc_probability", sp.XTCProbability}, {"xtc_threshold", sp.XTCThreshold},
		{"mirostat_tau", sp.MirostatTau}, {"mirostat_eta", sp.MirostatEta}, {"dry_multiplier", sp.DRYMultiplier}, {"dry_base", sp.DRYBase}} {
		if f.v != f.v || f.v > math.MaxFloat32 || f.v < -math.MaxFloat32 {
			return fail(stInvalid, fn, "moonlm_sampler_params.%s is %v; want a finite number", f.name, f.v)
		}
	}
	switch {
	case sp.XTCThreshold < 0:
		return fail(stInvalid, fn, "moonlm_sampler_params.xtc_threshold is %v; want >= 0", sp.XTCThreshold)
	case sp.Mirostat < 0 || sp.Mirostat > 2:
		return fail(stInvalid, fn, "moonlm_sampler_params.mirostat is %d; want 0 (off), 1 or 2", sp.Mirostat)
	case sp.MirostatM < 1:
		return fail(stInvalid, fn, "moonlm_sampler_params.mirostat_m is %d; want >= 1", sp.MirostatM)
	case sp.DRYAllowedLength < 0:
		return fail(stInvalid, fn, "moonlm_sampler_params.dry_allowed_length is %d; want >= 0", sp.DRYAllowedLength)
	case sp.DRYPenaltyLastN < -1 || sp.DRYPenaltyLastN > maxPenaltyLastN:
		return fail(stInvalid, fn, "moonlm_sampler_params.dry_penalty_last_n is %d; want -1 (all tokens) to %d", sp.DRYPenaltyLastN, maxPenaltyLastN)
	}
	// DRY sequence breakers: NULL means the defaults.
	switch {
	case p.dry_sequence_breakers == nil && p.n_dry_sequence_breakers != 0:
		return fail(stInvalid, fn, "moonlm_sampler_params.dry_sequence_breakers is NULL but n_dry_sequence_breakers is %d", uint64(p.n_dry_sequence_breakers))
	case p.dry_sequence_breakers == nil:
		sp.DRYBreakers = []string{"\n", ":", "\"", "*"}
	default:
		n := uint64(p.n_dry_sequence_breakers)
		if n > maxDRYBreakers {
			return fail(stInvalid, fn, "moonlm_sampler_params.n_dry_sequence_breakers is %d; at most %d", n, maxDRYBreakers)
		}
		sp.DRYBreakers = make([]string, 0, n)
		for i, s := range unsafe.Slice(p.dry_sequence_breakers, int(n)) {
			if s == nil {
				return fail(stInvalid, fn, "moonlm_sampler_params.dry_sequence_breakers[%d] is NULL", i)
			}
			b := C.GoStringN(s, C.int(C.strnlen(s, maxBreakerScan)))
			if b == "" {
				return fail(stInvalid, fn, "moonlm_sampler_params.dry_sequence_breakers[%d] is empty", i)
			}
			sp.DRYBreakers = append(sp.DRYBreakers, b)
		}
	}
	// Logit bias: (token, bias) pairs, duplicates summed.
	if n := uint64(p.n_logit_bias); n > 0 {
		if n > C.MOONLM_MAX_LOGIT_BIAS {
			return fail(stInvalid, fn, "moonlm_sampler_params.n_logit_bias is %d; at most %d", n, C.MOONLM_MAX_LOGIT_BIAS)
		}
		if p.logit_bias == nil {
			return fail(stInvalid, fn, "moonlm_sampler_params.logit_bias is NULL but n_logit_bias is %d", n)
		}
		sp.LogitBias = make(map[int32]float32, n)
		for i, lb := range unsafe.Slice(p.logit_bias, int(n)) {
			tok, b := int32(lb.token), float32(lb.bias)
			switch {
			case tok < 0:
				return fail(stInvalid, fn, "moonlm_sampler_params.logit_bias[%d].token is %d; want >= 0", i, tok)
			case b != b || math.IsInf(float64(b), 1):
				return fail(stInvalid, fn, "moonlm_sampler_params.logit_bias[%d].bias is %v; want a number or -INFINITY", i, b)
			}
			sp.LogitBias[tok] += b
		}
	}
	return stOK
}

//export moonlmgo_sampler_set_model
func moonlmgo_sampler_set_model(sh, mh C.uintptr_t) (st C.int) {
	const fn = "moonlm_sampler_set_model"
	defer guard(fn, &st)
	enter(fn)
	o, st := lockSampler(fn, sh)
	if o == nil {
		return st
	}
	defer o.unlock()
	m, st := getModel(fn, mh)
	if m == nil {
		return st
	}
	defer m.release()
	if err := o.s.SetModel(m.m); err != nil {
		return failErr(fn, err)
	}
	return stOK
}

// checkSamplerReady refuses moonlm_sample for a sampler that needs a
// vocabulary it was not given, rather than running DRY without its
// breakers.
func checkSamplerReady(fn string, o *cSampler) C.int {
	if o.s.NeedsModel() {
		return fail(stInvalid, fn, "the sampler's DRY sequence breakers need a vocabulary: call moonlm_sampler_set_model first (or pass no breakers)")
	}
	return stOK
}

// generateRequestExt validates the log-probability members of
// moonlm_generate_params and points the request's callback at the
// caller's buffer.
func generateRequestExt(fn string, p *C.moonlm_generate_params, req *genRequest) C.int {
	nTop := int(p.top_logprobs)
	if nTop < 0 || nTop > maxTopLogprobs {
		return fail(stInvalid, fn, "moonlm_generate_params.top_logprobs is %d; want 0 to %d", nTop, maxTopLogprobs)
	}
	if p.logprobs == nil {
		if nTop != 0 {
			return fail(stInvalid, fn, "moonlm_generate_params.top_logprobs is %d but logprobs is NULL", nTop)
		}
		return stOK
	}
	capacity := uint64(p.logprobs_cap)
	if req.maxTokens < 0 || uint64(req.maxTokens) > capacity {
		return fail(stInvalid, fn, "moonlm_generate_params.logprobs has room for %d tokens but max_tokens is %d; want 0 to logprobs_cap", capacity, req.maxTokens)
	}
	if capacity > maxCount {
		capacity = maxCount
	}
	buf := unsafe.Slice(p.logprobs, int(min(capacity, uint64(req.maxTokens))))
	i := 0
	req.p.TopLogprobs = nTop
	req.p.OnLogprobs = func(tok int32, lp float32, top []tokenLogprob) {
		if i >= len(buf) {
			return // cannot happen: max_tokens <= logprobs_cap
		}
		e := &buf[i]
		i++
		e.token, e.logprob, e.n_top = C.int32_t(tok), C.float(lp), C.int32_t(len(top))
		for j, a := range top {
			e.top[j] = C.moonlm_top_logprob{token: C.int32_t(a.Token), logprob: C.float(a.Logprob)}
		}
	}
	return stOK
}
