package arch

import "fmt"

// qwen3moe is Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B): qwen3's
// attention (per-head Q and K norms, NeoX RoPE) and, instead of the dense
// FFN, a mixture of experts: softmax over the router logits, the top
// expert_used_count experts, their weights renormalized to sum to 1.
var qwen3moe = Family{
	Name: "qwen3moe",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: qwen3moe rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.Neox = true
		return readMoE(m, p, true)
	},
	Model: tiedHead(),
	Layer: join(qkv(), qkNorm(), []Tensor{attnOut, ffnNorm}, moeFFN()),
	Block: append([]Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: Q}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}),
		HeadNorm(Q, QNorm),
		HeadNorm(K, KNorm),
		RoPE(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
	}, moeSteps()...),
}
