package arch

import (
	"fmt"
	"math"
)

// cohere2 is Cohere's Command R7B / Command A (text): a parallel block
// (attention and the SwiGLU FFN both read one layer-normed input, without
// bias, and both are added to the residual stream, the FFN's first),
// layer norms instead of RMS norms, normal RoPE only on the sliding-window
// layers (three of four; every fourth attends globally without RoPE), the
// output head tied to the embeddings and the logits multiplied by
// logit_scale.
var cohere2 = Family{
	Name: "cohere2",
	Hparams: func(m Meta, p *Params) error {
		if _, ok := m.lookup("attention.layer_norm_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_epsilon", ErrBadFile, m.Arch)
		}
		var err error
		if p.Eps, err = m.Float("attention.layer_norm_epsilon", 0); err != nil {
			return err
		}
		p.LayerNorm = true
		if p.SWAWindow, err = m.Uint("attention.sliding_window", 0, true); err != nil {
			return err
		}
		if p.SWAPattern, err = m.Uint("attention.sliding_window_pattern", 4, false); err != nil {
			return err
		}
		if p.SWAPattern < 1 {
			return fmt.Errorf("%w: %s.attention.sliding_window_pattern = %d", ErrUnsupported, m.Arch, p.SWAPattern)
		}
		// The global layers (every pattern-th) skip RoPE; the sliding ones
		// rotate with the model's base and scale (RopeSWA stays 0).
		p.NoRopeStep = p.SWAPattern
		if _, ok := m.lookup("logit_scale"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.logit_scale", ErrBadFile, m.Arch)
		}
		if p.LogitScale, err = m.Float("logit_scale", 0); err != nil {
			return err
		}
		if x := float64(p.LogitScale); math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: metadata key %s.logit_scale = %v", ErrBadFile, m.Arch, p.LogitScale)
		}
		if p.LogitScale == 0 {
			p.LogitScale = 1 // llama.cpp skips a scale of 0
		}
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		// llama.cpp always multiplies by the embeddings.
		{Role: Output, Name: "token_embd.weight", Cols: Dim, Rows: Vocab},
		{Role: OutputNorm, Name: "output_norm.weight", Cols: Dim},
	},
	Layer: join([]Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
	}, fusableQKV(), []Tensor{attnOut}, gluFFN()),
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(), // skipped on the global layers (Params.Rotates)
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O2}),
		Residual(O2),
		Residual(O),
	},
}
