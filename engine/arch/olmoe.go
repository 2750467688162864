package arch

import "fmt"

// olmoe is OLMoE (OLMoE-1B-7B): RMSNorm over the whole Q and K
// projections (not per head), NeoX RoPE, and a mixture of experts of
// feed_forward_length each: softmax over the router logits, the top
// expert_used_count experts, their probabilities used as they are (not
// renormalized).
var olmoe = Family{
	Name: "olmoe",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: olmoe rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.Neox = true
		if err := readMoE(m, p, false); err != nil {
			return err
		}
		p.MoE.FF = p.FF // OLMoE's experts are feed_forward_length wide
		return nil
	},
	Model: tiedHead(),
	Layer: join(qkv(), []Tensor{
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: QDim},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: KVDim},
		attnOut, ffnNorm}, moeFFN()),
	Block: append([]Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: Q}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}),
		Norm(QNorm, Q, Q),
		Norm(KNorm, K, K),
		RoPE(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
	}, moeSteps()...),
}
