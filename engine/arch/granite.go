package arch

import (
	"fmt"
	"math"
)

// granite is IBM Granite 3.x (dense): the llama block with four
// multipliers its models carry in metadata: the embeddings times
// embedding_scale, attention scores times attention.scale (instead of
// 1/sqrt(head size)), each residual branch times residual_scale before it
// is added, and the logits divided by logit_scale. Biases on every
// projection are optional, as llama.cpp loads them.
var granite = Family{
	Name: "granite",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: granite rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		experts, err := m.Uint("expert_count", 0, false)
		if err != nil {
			return err
		}
		if experts > 0 {
			return fmt.Errorf("%w: granite with %d experts (mixture of experts)", ErrUnsupported, experts)
		}
		// Each multiplier must be finite and positive; for all but
		// logit_scale, absent or 0 means none, as in llama.cpp.
		read := func(key string, required bool) (float32, error) {
			if _, ok := m.lookup(key); !ok && required {
				return 0, fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.Arch, key)
			}
			x, err := m.Float(key, 0)
			if err != nil {
				return 0, err
			}
			if x < 0 || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) || (required && x == 0) {
				return 0, fmt.Errorf("%w: metadata key %s.%s = %v; want a finite multiplier > 0", ErrBadFile, m.Arch, key, x)
			}
			return x, nil
		}
		logit, err := read("logit_scale", true)
		if err != nil {
			return err
		}
		p.LogitScale = 1 / logit
		if x, err := read("residual_scale", false); err != nil {
			return err
		} else if x != 0 {
			p.ResScale = x
		}
		if x, err := read("embedding_scale", false); err != nil {
			return err
		} else if x != 0 {
			p.EmbScale = x
		}
		if x, err := read("attention.scale", false); err != nil {
			return err
		} else if x != 0 {
			p.KQScale = x
		}
		// rope.scaling.finetuned = false turns RoPE off on every layer.
		if v, ok := m.lookup("rope.scaling.finetuned"); ok {
			on, err := v.Bool()
			if err != nil {
				return fmt.Errorf("%w: metadata key %s.rope.scaling.finetuned: %v", ErrBadFile, m.Arch, err)
			}
			if !on {
				p.NoRopeStep = 1
			}
		}
		return nil
	},
	Model: tiedHead(ropeFreqs),
	Layer: join(qkv(), qkvBias(true), []Tensor{attnOut,
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
		Attend(),
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O), // times residual_scale
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Bias: BGate, Out: G}, Proj{W: Up, Bias: BUp, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Bias: BDown, Out: O}),
		Residual(O), // times residual_scale
	},
}
