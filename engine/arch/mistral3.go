package arch

import "fmt"

// mistral3 is the text model of Mistral's third generation (Ministral 3,
// Mistral Small 3.x / Magistral / Devstral as llama.cpp converts them):
// the llama block with optional attention-output and FFN biases, normal
// RoPE over the whole head with YaRN scaling (rope.scaling.type "yarn",
// its beta_fast, beta_slow and log_multiplier keys), llama3 frequency
// factors when the file has them, and Llama 4's attention temperature:
// with attention.temperature_scale set, the queries at position p are
// multiplied by 1 + scale*ln(floor(p/n)+1), n being the original context
// (rope.scaling.original_context_length).
var mistral3 = Family{
	Name: "mistral3",
	Hparams: func(m Meta, p *Params) error {
		if err := requireKey(m, "attention.layer_norm_rms_epsilon"); err != nil {
			return err
		}
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: mistral3 rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		if err := refuseExperts(m); err != nil {
			return err
		}
		var err error
		if p.AttnTempScale, err = m.Float("attention.temperature_scale", 0); err != nil {
			return err
		}
		if p.AttnTempScale != 0 {
			p.AttnTempFloor = p.CtxOrig
		}
		if p.YarnBetaFast, err = m.Float("rope.scaling.yarn_beta_fast", p.YarnBetaFast); err != nil {
			return err
		}
		if p.YarnBetaSlow, err = m.Float("rope.scaling.yarn_beta_slow", p.YarnBetaSlow); err != nil {
			return err
		}
		if p.YarnLogMul, err = m.Float("rope.scaling.yarn_log_multiplier", 0); err != nil {
			return err
		}
		return nil
	},
	Model: tiedHead(ropeFreqs),
	Layer: join([]Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
	}, fusableQKV(), []Tensor{attnOut,
		{Role: BO, Name: "attn_output.bias", Cols: Dim, Optional: true}},
		gluFFN(), []Tensor{
			{Role: BGate, Name: "ffn_gate.bias", Cols: FF, Optional: true},
			{Role: BUp, Name: "ffn_up.bias", Cols: FF, Optional: true},
			{Role: BDown, Name: "ffn_down.bias", Cols: Dim, Optional: true},
			ffnNorm}),
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		TempQ(),
		Attend(),
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Bias: BGate, Out: G}, Proj{W: Up, Bias: BUp, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Bias: BDown, Out: O}),
		Residual(O),
	},
}
