package arch

// qwen3 is Qwen3 (dense): the llama block with per-head RMSNorm on Q and K
// before NeoX-layout RoPE.
var qwen3 = Family{
	Name: "qwen3",
	Hparams: func(m Meta, p *Params) error {
		p.Neox = true
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: Output, Name: "output.weight", Cols: Dim, Rows: Vocab, Optional: true, TiedTo: TokenEmbd},
		{Role: OutputNorm, Name: "output_norm.weight", Cols: Dim},
	},
	Layer: []Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim},
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: HeadDim},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: HeadDim},
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: FFNNorm, Name: "ffn_norm.weight", Cols: Dim},
	},
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: Q}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}),
		HeadNorm(Q, QNorm),
		HeadNorm(K, KNorm),
		RoPE(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Residual(O),
	},
}
