package arch

import "math"

// phi3 is Phi-3, Phi-3.5 and Phi-4-mini: the llama block with Q, K and V
// in one fused matrix (attn_qkv; separate ones are accepted too), the
// gate and up projections in one (ffn_up, the gate's rows first), NeoX
// RoPE over part of each head (Phi-4-mini rotates 3/4), LongRoPE's
// per-pair frequency divisors (rope_factors_short within the original
// training context, rope_factors_long beyond it) with the cosines and
// sines scaled by rope.scaling.attn_factor, and Q scaled by 1/sqrt(head
// size) before attention.
//
// The models declare a sliding window (attention.sliding_window), which
// llama.cpp reads and then turns off for phi3 (its conversions do not say
// which layers slide); the window is read and not applied, so the logits
// are llama.cpp's.
var phi3 = Family{
	Name: "phi3",
	Hparams: func(m Meta, p *Params) error {
		if err := requireKey(m, "attention.layer_norm_rms_epsilon"); err != nil {
			return err
		}
		if err := refuseExperts(m); err != nil {
			return err
		}
		if _, err := m.Uint("attention.sliding_window", 0, false); err != nil {
			return err
		}
		p.Neox = true
		p.QScale = float32(1 / math.Sqrt(float64(p.HeadDim)))
		p.KQScale = 1
		return nil
	},
	Model: tiedHead(
		Tensor{Role: RopeLong, Name: "rope_factors_long.weight", Cols: RotHalf, Optional: true},
		Tensor{Role: RopeShort, Name: "rope_factors_short.weight", Cols: RotHalf, Optional: true},
	),
	Layer: join([]Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
	}, fusableQKV(), []Tensor{
		attnOut,
		ffnNorm,
		{Role: GateUp, Name: "ffn_up.weight", Cols: Dim, Rows: FF2, Fused: []Role{Gate, Up}},
		{Role: Gate, Cols: Dim, Rows: FF, Optional: true},
		{Role: Up, Cols: Dim, Rows: FF, Optional: true},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
	}),
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		ScaleQ(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Residual(O),
	},
}
