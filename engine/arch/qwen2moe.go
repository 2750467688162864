package arch

import "fmt"

// qwen2moe is Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): qwen2's
// attention (optional Q/K/V biases, NeoX RoPE) and a mixture of experts
// whose softmax top-k weights are used as they are (not renormalized),
// plus a shared expert that every token takes: a SwiGLU network of
// expert_shared_feed_forward_length (default feed_forward_length) whose
// output is scaled by sigmoid(ffn_gate_inp_shexp . x) and added to the
// experts'.
var qwen2moe = Family{
	Name: "qwen2moe",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: qwen2moe rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.Neox = true
		if err := readMoE(m, p, false); err != nil {
			return err
		}
		return readSharedFF(m, p)
	},
	Model: tiedHead(),
	Layer: join(qkv(), qkvBias(true), []Tensor{attnOut, ffnNorm}, moeFFN(), sharedExpert()),
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		// The router and the shared expert's gate and up in one dispatch.
		Project(XN, Proj{W: GateInp, Out: R}, Proj{W: GateShexp, Out: G}, Proj{W: UpShexp, Out: U}),
		GLU(),
		Project(G, Proj{W: DownShexp, Out: SH}),
		MoE(XN, O),
		SharedGate(XN, GateInpShexp, O),
		Residual(O),
	},
}
