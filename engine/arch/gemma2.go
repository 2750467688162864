package arch

import (
	"fmt"
	"math"
)

// gemma2 is Gemma 2: Gemma 3's block without the Q/K norms, and with
// soft-capped attention scores (c*tanh(s/c), attn_logit_softcapping,
// default 50) and logits (final_logit_softcapping, default 30). Layers
// alternate between a sliding window (even layers; default 4096) and
// global attention, both with the same RoPE base and scale unless
// rope.freq_base_swa says otherwise.
var gemma2 = Family{
	Name:       "gemma2",
	ChatFormat: "gemma",
	Hparams: func(m Meta, p *Params) error {
		if _, ok := m.lookup("attention.layer_norm_rms_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_rms_epsilon", ErrBadFile, m.Arch)
		}
		p.Neox, p.Act = true, GELU
		p.EmbScale = float32(math.Sqrt(float64(p.Dim)))
		// As llama.cpp: Q scaled by 1/sqrt(key_length), except for the
		// 27B model (46 layers), whose query_pre_attn_scalar is
		// dim/heads; scores then take a scale of 1.
		if p.Layers == 46 {
			p.QScale = float32(1 / math.Sqrt(float64(p.Dim/p.Heads)))
		} else {
			p.QScale = float32(1 / math.Sqrt(float64(p.HeadDim)))
		}
		p.KQScale = 1
		var err error
		if p.SWAWindow, err = m.Uint("attention.sliding_window", 4096, false); err != nil {
			return err
		}
		if p.SWAPattern, err = m.Uint("attention.sliding_window_pattern", 2, false); err != nil {
			return err
		}
		if p.SWAPattern < 1 {
			return fmt.Errorf("%w: %s.attention.sliding_window_pattern = %d", ErrUnsupported, m.Arch, p.SWAPattern)
		}
		if p.RopeSWA, err = m.Float("rope.freq_base_swa", p.RopeBase); err != nil {
			return err
		}
		p.RopeScaleSWA = p.RopeScale
		if p.AttnSoftcap, err = m.Float("attn_logit_softcapping", 50); err != nil {
			return err
		}
		if p.FinalSoftcap, err = m.Float("final_logit_softcapping", 30); err != nil {
			return err
		}
		if p.AttnSoftcap == 0 || p.FinalSoftcap == 0 {
			// llama.cpp divides by both.
			return fmt.Errorf("%w: gemma2 soft-capping of 0 (attention %v, logits %v)", ErrBadFile, p.AttnSoftcap, p.FinalSoftcap)
		}
		return nil
	},
	Model: tiedHead(),
	Layer: join([]Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
	}, fusableQKV(), []Tensor{attnOut,
		{Role: PostAttnNorm, Name: "post_attention_norm.weight", Cols: Dim}},
		gluFFN(), []Tensor{ffnNorm,
			{Role: PostFFNNorm, Name: "post_ffw_norm.weight", Cols: Dim}}),
	Block: join([]Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		ScaleQ(),
		Attend(), // scores soft-capped (Params.AttnSoftcap)
	}, postNormAttnOut(), postNormGLU()),
}
