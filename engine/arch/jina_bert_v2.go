package arch

import "fmt"

// jinaBertV2 is jina-embeddings-v2 (small, base; en, de, es, code), as
// llama.cpp runs it: the BERT encoder's post-norm blocks and embedding
// LayerNorm, no learned positions but ALiBi (each head's attention
// scores minus its slope times the distance between query and key, the
// slopes from a maximum bias of 8), and a GeGLU feed-forward network:
// ffn_up holds the gate's rows and then the up's (with one bias over
// both, when present), and GELU(gate)·up goes through ffn_down.
//
// Files of older conversions with a separate ffn_gate, and the optional
// Q/K LayerNorms and second attention norm llama.cpp also reads, are
// refused (ErrUnsupported): none of the published models has them in its
// current conversion.
var jinaBertV2 = Family{
	Name: "jina-bert-v2",
	Hparams: func(m Meta, p *Params) error {
		if err := bert.Hparams(m, p); err != nil {
			return err
		}
		for _, n := range []string{"ffn_gate.weight", "attn_q_norm.weight", "attn_k_norm.weight", "attn_norm_2.weight"} {
			if _, ok := m.F.Tensor("blk.0." + n); ok {
				return fmt.Errorf("%w: %s with %s", ErrUnsupported, m.Arch, n)
			}
		}
		p.AlibiMaxBias = 8
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: TokenTypes, Name: "token_types.weight", Cols: Dim, Rows: Any, Lookup: true},
		{Role: EmbdNorm, Name: "token_embd_norm.weight", Cols: Dim},
		{Role: EmbdNormB, Name: "token_embd_norm.bias", Cols: Dim},
	},
	Layer: join(fusableQKV(), []Tensor{
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: BO, Name: "attn_output.bias", Cols: Dim},
		{Role: AttnOutNorm, Name: "attn_output_norm.weight", Cols: Dim},
		{Role: AttnOutNormB, Name: "attn_output_norm.bias", Cols: Dim},
		{Role: GateUp, Name: "ffn_up.weight", Cols: Dim, Rows: FF2, Fused: []Role{Gate, Up}},
		{Role: Gate, Cols: Dim, Rows: FF},
		{Role: Up, Cols: Dim, Rows: FF},
		{Role: BGateUp, Name: "ffn_up.bias", Cols: FF2, Optional: true, Fused: []Role{BGate, BUp}},
		{Role: BGate, Cols: FF, Optional: true},
		{Role: BUp, Cols: FF, Optional: true},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: BDown, Name: "ffn_down.bias", Cols: Dim},
		{Role: LayerOutNorm, Name: "layer_output_norm.weight", Cols: Dim},
		{Role: LayerOutNormB, Name: "layer_output_norm.bias", Cols: Dim},
	}),
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		Attend(), // over the whole sequence (NonCausal), with ALiBi
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O),
		LayerNorm(AttnOutNorm, AttnOutNormB, X, X),
		Project(X, Proj{W: Gate, Bias: BGate, Out: G}, Proj{W: Up, Bias: BUp, Out: U}),
		GLU(), // GELU(gate)·up
		Project(G, Proj{W: Down, Bias: BDown, Out: O}),
		Residual(O),
		LayerNorm(LayerOutNorm, LayerOutNormB, X, X),
	},
}
