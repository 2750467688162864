package arch

import "fmt"

// llama is Llama 1-3 and the models shaped like it (SmolLM2, TinyLlama,
// stories): RMSNorm, SwiGLU, normal-layout RoPE over the whole head,
// optional llama3 frequency factors and optional Q/K/V biases. A file
// with a nonzero expert_count is Mixtral (llamaMoE).
var llama = Family{
	Name: "llama",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: llama rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		experts, err := m.Uint("expert_count", 0, false)
		if err != nil {
			return err
		}
		if experts == 0 {
			return nil
		}
		if err := readMoE(m, p, true); err != nil {
			return err
		}
		p.MoE.FF = p.FF // Mixtral's experts are feed_forward_length wide
		return nil
	},
	Variant: func(p *Params) *Family {
		if p.MoE.Experts > 0 {
			return &llamaMoE
		}
		return nil
	},
	Model: tiedHead(ropeFreqs),
	Layer: llamaLayer(true),
	Block: llamaBlock(),
}

// llamaMoE is llama with a mixture of experts in place of the FFN
// (Mixtral): softmax over the router logits, the top expert_used_count
// experts, their weights renormalized to sum to 1, as llama.cpp's llama
// graph with n_expert > 0. It is not in the registry: llama's Variant
// picks it.
var llamaMoE = Family{
	Name:  "llama",
	Model: tiedHead(ropeFreqs),
	Layer: join(qkv(), qkvBias(true), []Tensor{attnOut, ffnNorm}, moeFFN()),
	Block: append(llamaBlock()[:6:6], moeSteps()...),
}
