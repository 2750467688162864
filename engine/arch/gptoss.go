package arch

import (
	"fmt"
	"math"
)

// gptOSS is OpenAI's gpt-oss (gpt-oss-20b, gpt-oss-120b), llama.cpp's
// "gpt-oss": biased Q, K, V and output projections, NeoX RoPE with YaRN
// (the shared rope.scaling keys), attention whose softmax includes one
// learned sink logit per head (attn_sinks), layers alternating between a
// sliding window (even layers, attention.sliding_window) and full
// attention, and a mixture of experts after post_attention_norm: a biased
// router whose top expert_used_count logits are chosen and weighted by
// their own softmax, experts with biases on all three products and the
// clamped SwiGLU (alpha 1.702, limit 7). Its experts are usually MXFP4.
var gptOSS = Family{
	Name: "gpt-oss",
	Hparams: func(m Meta, p *Params) error {
		if _, ok := m.lookup("attention.layer_norm_rms_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_rms_epsilon", ErrBadFile, m.Arch)
		}
		p.Neox = true
		p.AttnSinks = true
		// llama.cpp scales the scores by 1/sqrt(n_rot).
		p.KQScale = float32(1 / math.Sqrt(float64(p.Rot)))
		if err := readMoE(m, p, false); err != nil {
			return err
		}
		p.MoE.WeightSoftmax = true
		p.MoE.Act = SwiGLUOAI
		var err error
		if p.SWAWindow, err = m.Uint("attention.sliding_window", 0, true); err != nil {
			return err
		}
		if p.SWAWindow <= 0 {
			return fmt.Errorf("%w: metadata key %s.attention.sliding_window = %d", ErrBadFile, m.Arch, p.SWAWindow)
		}
		if p.SWAPattern, err = m.Uint("attention.sliding_window_pattern", 2, false); err != nil {
			return err
		}
		if p.SWAPattern < 1 {
			return fmt.Errorf("%w: %s.attention.sliding_window_pattern = %d", ErrUnsupported, m.Arch, p.SWAPattern)
		}
		base, err := m.Float("rope.freq_base_swa", p.RopeBase)
		if err != nil {
			return err
		}
		if base != p.RopeBase {
			if p.YarnExt != 0 {
				// The sliding layers' RoPE table has no YaRN of its own.
				return fmt.Errorf("%w: %s.rope.freq_base_swa %v with YaRN", ErrUnsupported, m.Arch, base)
			}
			p.RopeSWA, p.RopeScaleSWA = base, p.RopeScale
		}
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: Output, Name: "output.weight", Cols: Dim, Rows: Vocab},
		{Role: OutputNorm, Name: "output_norm.weight", Cols: Dim},
	},
	Layer: join([]Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
	}, fusableQKV(), []Tensor{
		attnOut,
		{Role: BO, Name: "attn_output.bias", Cols: Dim},
		{Role: Sinks, Name: "attn_sinks.weight", Cols: NHeads},
		// The norm before the experts has Gemma's post-attention name.
		{Role: FFNNorm, Name: "post_attention_norm.weight", Cols: Dim},
	}, moeFFN(), []Tensor{
		{Role: BGateInp, Name: "ffn_gate_inp.bias", Cols: Experts},
		{Role: BGateExps, Name: "ffn_gate_exps.bias", Cols: ExpFF, PerExpert: true},
		{Role: BUpExps, Name: "ffn_up_exps.bias", Cols: ExpFF, PerExpert: true},
		{Role: BDownExps, Name: "ffn_down_exps.bias", Cols: Dim, PerExpert: true},
	}),
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		Attend(), // with the layer's sinks
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: GateInp, Bias: BGateInp, Out: R}),
		MoE(XN, O), // with the experts' biases
		Residual(O),
	},
}
