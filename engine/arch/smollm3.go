package arch

import "fmt"

// smollm3 is SmolLM3: the llama block, except that every fourth layer
// (layers 3, 7, 11, ...) skips RoPE ("NoPE"). llama.cpp fixes the interval
// at 4 (no metadata key carries it), as the published models have it.
var smollm3 = Family{
	Name: "smollm3",
	Hparams: func(m Meta, p *Params) error {
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: smollm3 rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.NoRopeStep = 4
		return nil
	},
	Model: tiedHead(),
	Layer: llamaLayer(true),
	Block: llamaBlock(), // RoPE is skipped on the NoPE layers (Params.Rotates)
}
