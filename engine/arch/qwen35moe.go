package arch

// qwen35moe is Qwen3.5-MoE (Qwen3.5-35B-A3B and larger): qwen35's hybrid
// of DeltaNet and gated attention layers with a mixture of experts as
// every block's FFN: softmax over the router logits, the top
// expert_used_count experts with their weights renormalized to sum to 1,
// plus a shared expert of expert_shared_feed_forward_length (default
// feed_forward_length) whose output is scaled by
// sigmoid(ffn_gate_inp_shexp . x). The experts' gate and up matrices are
// apart or, in newer conversions, fused (ffn_gate_up_exps).
var qwen35moe = Family{
	Name: "qwen35moe",
	Hparams: func(m Meta, p *Params) error {
		if err := qwen35Hparams(m, p); err != nil {
			return err
		}
		if err := readMoE(m, p, true); err != nil {
			return err
		}
		p.MoE.SharedSigmoid = true
		return readSharedFF(m, p)
	},
	Model: tiedHead(),
	Layer: qwen35Layer(join(fusableMoEFFN(), sharedExpert())),
	Block: qwen35Block(
		// The router and the shared expert's gate and up in one dispatch.
		Project(XN, Proj{W: GateInp, Out: R}, Proj{W: GateShexp, Out: G}, Proj{W: UpShexp, Out: U}),
		GLU(),
		Project(G, Proj{W: DownShexp, Out: SH}),
		MoE(XN, O),
		SharedGate(XN, GateInpShexp, O),
	),
}
