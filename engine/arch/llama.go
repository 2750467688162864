package arch

import "fmt"

// llama is Llama 1-3 and the models shaped like it (SmolLM2, TinyLlama,
// stories): RMSNorm, SwiGLU, normal-layout RoPE over the whole head,
// optional llama3 frequency factors and optional Q/K/V biases.
var llama = Family{
	Name: "llama",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: llama rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		return nil
	},
	Model: tiedHead(ropeFreqs),
	Layer: llamaLayer(true),
	Block: llamaBlock(),
}
