package arch

// qwen3 is Qwen3 (dense): the llama block with per-head RMSNorm on Q and K
// before NeoX-layout RoPE. Qwen3-Reranker files add a head of their answer
// tokens' rows (cls.output) for rank pooling.
var qwen3 = Family{
	Name: "qwen3",
	Hparams: func(m Meta, p *Params) error {
		p.Neox = true
		p.RankSoftmax = true // Qwen3-Reranker: softmax over its yes/no head
		return nil
	},
	Model: tiedHead(clsOutHead),
	Layer: join(qkv(), qkNorm(), []Tensor{attnOut}, gluFFN(), []Tensor{ffnNorm}),
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
