package arch

import "fmt"

// exaone4 is LG's EXAONE 4.0: OLMo 2's block (no input norms, norms on the
// attention and FFN outputs) with per-head Q/K norms, NeoX RoPE with
// llama3 frequency factors when the file has them, and attention scores
// scaled by 1/sqrt(head size). As in llama.cpp, only the 64-layer (32B)
// model has sliding-window attention: three layers of four slide (window
// attention.sliding_window, default 4096; pattern key, default 4) and
// rotate, and the fourth attends globally without RoPE.
var exaone4 = Family{
	Name: "exaone4",
	Hparams: func(m Meta, p *Params) error {
		if _, ok := m.lookup("attention.layer_norm_rms_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_rms_epsilon", ErrBadFile, m.Arch)
		}
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: exaone4 rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.Neox = true
		window, err := m.Uint("attention.sliding_window", 4096, false)
		if err != nil {
			return err
		}
		if p.Layers != 64 {
			return nil
		}
		p.SWAWindow = window
		if p.SWAPattern, err = m.Uint("attention.sliding_window_pattern", 4, false); err != nil {
			return err
		}
		if p.SWAPattern < 1 {
			return fmt.Errorf("%w: %s.attention.sliding_window_pattern = %d", ErrUnsupported, m.Arch, p.SWAPattern)
		}
		// The global layers (every pattern-th) skip RoPE; the sliding ones
		// rotate as a model without a window does (RopeSWA stays 0): the
		// base, scale and frequency factors of the whole model.
		p.NoRopeStep = p.SWAPattern
		return nil
	},
	Model: tiedHead(ropeFreqs),
	Layer: join(fusableQKV(), []Tensor{
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: PostAttnNorm, Name: "post_attention_norm.weight", Cols: Dim},
	}, qkNorm(), gluFFN(), []Tensor{
		{Role: PostFFNNorm, Name: "post_ffw_norm.weight", Cols: Dim},
	}),
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		HeadNorm(Q, QNorm),
		HeadNorm(K, KNorm),
		RoPE(), // skipped on the 32B's global layers (Params.Rotates)
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Norm(PostAttnNorm, O, O),
		Residual(O),
		Project(X, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Norm(PostFFNNorm, O, O),
		Residual(O),
	},
}
