package main

import (
	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/sample"
)

// The adapter for the samplers added after the first sampler parameters,
// log-probabilities and the vocabulary samplers need.

// maxDRYBreakers bounds moonlm_sampler_params.n_dry_sequence_breakers.
const maxDRYBreakers = sample.MaxDRYBreakers

// maxTopLogprobs bounds moonlm_generate_params.top_logprobs.
const maxTopLogprobs = sample.MaxTopLogprobs

// extendSamplerParams maps the C conventions of the later sampler members
// (documented in moonlm.h) onto sample.Params: values that mean "off" in C
// become the engine's zero values.
func extendSamplerParams(sp *sample.Params, p samplerParams) {
	if p.TypicalP > 0 && p.TypicalP < 1 {
		sp.TypicalP = p.TypicalP
	}
	if p.XTCProbability > 0 && p.XTCThreshold <= 0.5 {
		sp.XTCProbability, sp.XTCThreshold = min(p.XTCProbability, 1), p.XTCThreshold
	}
	sp.Mirostat, sp.MirostatTau, sp.MirostatEta, sp.MirostatM = p.Mirostat, p.MirostatTau, p.MirostatEta, p.MirostatM
	if p.DRYMultiplier > 0 && p.DRYBase >= 1 && p.DRYPenaltyLastN != 0 {
		sp.DRYMultiplier, sp.DRYBase = p.DRYMultiplier, p.DRYBase
		sp.DRYAllowedLength, sp.DRYPenaltyLastN = p.DRYAllowedLength, p.DRYPenaltyLastN
		sp.DRYSequenceBreakers = p.DRYBreakers
	}
	sp.LogitBias = p.LogitBias
}

// engineSampler is a *sample.Sampler as a backendSampler.
type engineSampler struct{ *sample.Sampler }

func (s engineSampler) SetModel(m backendModel) error {
	em, ok := m.(engineModel)
	if !ok {
		return nil
	}
	return s.SetVocab(em.m.SamplerVocab())
}

func (s engineSampler) NeedsModel() bool { return s.NeedsVocab() }

// extendGenerateParams passes the grammar and the log-probability request
// on.
func extendGenerateParams(gp *engine.GenerateParams, p generateParams) {
	if p.Grammar != nil {
		gp.Constraint = grammarConstraint(p.Grammar)
	}
	if p.OnLogprobs == nil {
		return
	}
	gp.TopLogprobs = p.TopLogprobs
	var top [sample.MaxTopLogprobs]tokenLogprob
	gp.OnLogprobs = func(tok int32, lp float32, alts []sample.TokenLogprob) {
		for i, a := range alts {
			top[i] = tokenLogprob{Token: a.Token, Logprob: a.Logprob}
		}
		p.OnLogprobs(tok, lp, top[:len(alts)])
	}
}
