package arch

import "fmt"

// olmo2 is OLMo 2 (and OLMo 3, which llama.cpp reads as olmo2): no norm
// before attention or the FFN; instead RMS norms over the whole Q and K
// projections (not per head) before NeoX RoPE, and norms on the attention
// and FFN outputs before each is added to the residual stream; an untied
// output head. A model with attention.sliding_window slides on three
// layers of four (OLMo 3), those layers rotating with the same base but
// without position scaling (llama.cpp reads rope.freq_base_swa for olmo2
// and does not use it).
var olmo2 = Family{
	Name: "olmo2",
	Hparams: func(m Meta, p *Params) error {
		if _, ok := m.lookup("attention.layer_norm_rms_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_rms_epsilon", ErrBadFile, m.Arch)
		}
		if p.Rot != p.HeadDim {
			return fmt.Errorf("%w: olmo2 rope dimension %d differs from head size %d", ErrBadFile, p.Rot, p.HeadDim)
		}
		p.Neox = true
		var err error
		if p.SWAWindow, err = m.Uint("attention.sliding_window", 0, false); err != nil {
			return err
		}
		if p.SWAWindow > 0 {
			if p.SWAPattern, err = m.Uint("attention.sliding_window_pattern", 4, false); err != nil {
				return err
			}
			if p.SWAPattern < 1 {
				return fmt.Errorf("%w: %s.attention.sliding_window_pattern = %d", ErrUnsupported, m.Arch, p.SWAPattern)
			}
			p.RopeSWA, p.RopeScaleSWA, p.AttnFactorSWA = p.RopeBase, 1, 1
		}
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: Output, Name: "output.weight", Cols: Dim, Rows: Vocab},
		{Role: OutputNorm, Name: "output_norm.weight", Cols: Dim},
	},
	Layer: join(fusableQKV(), []Tensor{
		attnOut,
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: QDim},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: KVDim},
		{Role: PostAttnNorm, Name: "post_attention_norm.weight", Cols: Dim},
	}, gluFFN(), []Tensor{
		{Role: PostFFNNorm, Name: "post_ffw_norm.weight", Cols: Dim},
	}),
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		Norm(QNorm, Q, Q),
		Norm(KNorm, K, K),
		RoPE(),
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
