package arch

import "fmt"

// jinaBertV2 is jina-embeddings-v2 (small, base; en, de, es, code) and
// the jina-reranker-v1 models built on it, as llama.cpp runs them: the
// BERT encoder's post-norm blocks and embedding LayerNorm, no learned
// positions but ALiBi (each head's attention scores minus its slope times
// the distance between query and key, the slopes from a maximum bias of
// 8), and a GeGLU feed-forward network, GELU(gate)·up through ffn_down.
//
// Current conversions fuse the gate into ffn_up (the gate's rows, then the
// up's, with one bias over both when present); older ones wrote ffn_gate
// (no bias) and an ffn_up of the feed-forward length, told apart by
// ffn_up's rows. Optional per layer, as llama.cpp reads them: LayerNorms
// (with biases) of the queries and of the keys, each over all heads at
// once, after their projections; and a second attention norm
// (attn_norm_2, jina-embeddings-v2-base-code's), which re-adds the
// layer's input to the first one's output and norms the sum.
//
// A reranker (jina-reranker-v1-turbo-en, -tiny-en) adds a classifier of
// one output, cls (no cls.output): rank pooling scores a text
// tanh(cls · h + cls.bias) on its first token's state h.
//
// A block whose ffn_up has the feed-forward length without an ffn_gate
// (a plain GELU network, which llama.cpp would run) is refused
// (ErrUnsupported): no published conversion has one.
var jinaBertV2 = Family{
	Name: "jina-bert-v2",
	Hparams: func(m Meta, p *Params) error {
		if err := bert.Hparams(m, p); err != nil {
			return err
		}
		up, ok := m.F.Tensor("blk.0.ffn_up.weight")
		if _, gate := m.F.Tensor("blk.0.ffn_gate.weight"); ok && !gate && len(up.Shape) == 2 && up.Shape[1] == int64(p.FF) {
			return fmt.Errorf("%w: %s with an ungated feed-forward network (ffn_up of %d rows, no ffn_gate)", ErrUnsupported, m.Arch, p.FF)
		}
		p.AlibiMaxBias = 8
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: TokenTypes, Name: "token_types.weight", Cols: Dim, Rows: Any, Lookup: true},
		{Role: EmbdNorm, Name: "token_embd_norm.weight", Cols: Dim},
		{Role: EmbdNormB, Name: "token_embd_norm.bias", Cols: Dim},
		{Role: Cls, Name: "cls.weight", Cols: Dim, Rows: One, Optional: true, Lookup: true},
		{Role: ClsB, Name: "cls.bias", Cols: One, Optional: true},
	},
	Layer: join(fusableQKV(), []Tensor{
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: QDim, Optional: true},
		{Role: QNormB, Name: "attn_q_norm.bias", Cols: QDim, Optional: true},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: KVDim, Optional: true},
		{Role: KNormB, Name: "attn_k_norm.bias", Cols: KVDim, Optional: true},
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: BO, Name: "attn_output.bias", Cols: Dim},
		{Role: AttnOutNorm, Name: "attn_output_norm.weight", Cols: Dim},
		{Role: AttnOutNormB, Name: "attn_output_norm.bias", Cols: Dim},
		{Role: AttnNorm2, Name: "attn_norm_2.weight", Cols: Dim, Optional: true},
		{Role: AttnNorm2B, Name: "attn_norm_2.bias", Cols: Dim, Optional: true},
		// Optional each: the block's products need Gate and Up, from
		// the one or the others.
		{Role: GateUp, Name: "ffn_up.weight", Cols: Dim, Rows: FF2, Optional: true, Fused: []Role{Gate, Up}},
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF, Optional: true},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF, Optional: true},
		{Role: BGateUp, Name: "ffn_up.bias", Cols: FF2, Optional: true, Fused: []Role{BGate, BUp}},
		{Role: BGate, Cols: FF, Optional: true},
		{Role: BUp, Name: "ffn_up.bias", Cols: FF, Optional: true},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: BDown, Name: "ffn_down.bias", Cols: Dim},
		{Role: LayerOutNorm, Name: "layer_output_norm.weight", Cols: Dim},
		{Role: LayerOutNormB, Name: "layer_output_norm.bias", Cols: Dim},
	}),
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		LayerNorm(QNorm, QNormB, Q, Q),
		LayerNorm(KNorm, KNormB, K, K),
		Attend(), // over the whole sequence (NonCausal), with ALiBi
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Copy(X, XI).IfHas(AttnNorm2),
		Residual(O),
		LayerNorm(AttnOutNorm, AttnOutNormB, X, X),
		Residual(XI).IfHas(AttnNorm2),
		LayerNorm(AttnNorm2, AttnNorm2B, X, X),
		Project(X, Proj{W: Gate, Bias: BGate, Out: G}, Proj{W: Up, Bias: BUp, Out: U}),
		GLU(), // GELU(gate)·up
		Project(G, Proj{W: Down, Bias: BDown, Out: O}),
		Residual(O),
		LayerNorm(LayerOutNorm, LayerOutNormB, X, X),
	},
}
