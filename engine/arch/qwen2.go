package arch

// qwen2 is Qwen2 and Qwen2.5: the llama block with biases on Q, K and V
// and NeoX-layout RoPE.
var qwen2 = Family{
	Name: "qwen2",
	Hparams: func(m Meta, p *Params) error {
		p.Neox = true
		return nil
	},
	Model: tiedHead(),
	Layer: llamaLayer(false),
	Block: llamaBlock(),
}
