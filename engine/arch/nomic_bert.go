package arch

// nomicBert is nomic-embed-text (v1, v1.5), as llama.cpp runs it: the
// BERT encoder's post-norm blocks and embedding LayerNorm, with Q, K and V
// in one fused matrix (attn_qkv; separate ones are accepted too), NeoX
// rotary positions in place of learned position embeddings (rope.freq_base
// is 1000 in its files), and a bias-free SwiGLU feed-forward network
// (ffn_gate, ffn_up). Biases of the FFN, which llama.cpp loads and then
// does not apply, are not read.
var nomicBert = Family{
	Name: "nomic-bert",
	Hparams: func(m Meta, p *Params) error {
		if err := bert.Hparams(m, p); err != nil {
			return err
		}
		p.Act, p.Neox = SiLU, true
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: TokenTypes, Name: "token_types.weight", Cols: Dim, Rows: Any, Optional: true, Lookup: true},
		{Role: EmbdNorm, Name: "token_embd_norm.weight", Cols: Dim},
		{Role: EmbdNormB, Name: "token_embd_norm.bias", Cols: Dim},
	},
	Layer: join(fusableQKV(), []Tensor{
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: BO, Name: "attn_output.bias", Cols: Dim, Optional: true},
		{Role: AttnOutNorm, Name: "attn_output_norm.weight", Cols: Dim},
		{Role: AttnOutNormB, Name: "attn_output_norm.bias", Cols: Dim},
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: LayerOutNorm, Name: "layer_output_norm.weight", Cols: Dim},
		{Role: LayerOutNormB, Name: "layer_output_norm.bias", Cols: Dim},
	}),
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		Attend(), // over the whole sequence (NonCausal)
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O),
		LayerNorm(AttnOutNorm, AttnOutNormB, X, X),
		Project(X, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Residual(O),
		LayerNorm(LayerOutNorm, LayerOutNormB, X, X),
	},
}
