package arch

import "fmt"

// bert is the BERT encoder (bge, all-MiniLM, e5 and the rerankers built on
// it), as llama.cpp runs it: token, learned position and token-type (type 0)
// embeddings summed and LayerNormed; blocks of non-causal attention with
// biased projections and a GELU feed-forward network, each added to the
// residual stream and LayerNormed after it (post-norm). There is no output
// head: the result is the last block's hidden states, pooled per text, or
// for rank pooling the classifier head applied to the first token.
var bert = Family{
	Name: "bert",
	Hparams: func(m Meta, p *Params) error {
		p.NonCausal, p.Act = true, GELU
		if _, ok := m.lookup("attention.layer_norm_epsilon"); !ok {
			return fmt.Errorf("%w: missing metadata key %s.attention.layer_norm_epsilon", ErrBadFile, m.Arch)
		}
		var err error
		if p.Eps, err = m.Float("attention.layer_norm_epsilon", 0); err != nil {
			return err
		}
		if !(p.Eps >= 0 && p.Eps < 1) {
			return fmt.Errorf("%w: metadata key %s.attention.layer_norm_epsilon = %v", ErrBadFile, m.Arch, p.Eps)
		}
		if v, ok := m.lookup("attention.causal"); ok {
			causal, err := v.Bool()
			if err != nil {
				return fmt.Errorf("%w: metadata key %s.attention.causal: %v", ErrBadFile, m.Arch, err)
			}
			if causal {
				return fmt.Errorf("%w: %s with causal attention", ErrUnsupported, m.Arch)
			}
		}
		return nil
	},
	Model: []Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: TokenTypes, Name: "token_types.weight", Cols: Dim, Rows: Any, Optional: true, Lookup: true},
		{Role: PosEmbd, Name: "position_embd.weight", Cols: Dim, Rows: Ctx, Lookup: true},
		{Role: EmbdNorm, Name: "token_embd_norm.weight", Cols: Dim},
		{Role: EmbdNormB, Name: "token_embd_norm.bias", Cols: Dim},
		{Role: Cls, Name: "cls.weight", Cols: Dim, Rows: Dim, Optional: true, Lookup: true},
		{Role: ClsB, Name: "cls.bias", Cols: Dim, Optional: true},
		clsOutHead,
		{Role: ClsOutB, Name: "cls.output.bias", Cols: Labels, Optional: true},
	},
	Layer: []Tensor{
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim},
		{Role: BQ, Name: "attn_q.bias", Cols: QDim, Optional: true},
		{Role: BK, Name: "attn_k.bias", Cols: KVDim, Optional: true},
		{Role: BV, Name: "attn_v.bias", Cols: KVDim, Optional: true},
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: BO, Name: "attn_output.bias", Cols: Dim, Optional: true},
		{Role: AttnOutNorm, Name: "attn_output_norm.weight", Cols: Dim},
		{Role: AttnOutNormB, Name: "attn_output_norm.bias", Cols: Dim},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: BUp, Name: "ffn_up.bias", Cols: FF, Optional: true},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: BDown, Name: "ffn_down.bias", Cols: Dim, Optional: true},
		{Role: LayerOutNorm, Name: "layer_output_norm.weight", Cols: Dim},
		{Role: LayerOutNormB, Name: "layer_output_norm.bias", Cols: Dim},
	},
	Block: []Step{
		Project(X, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		Attend(), // over the whole sequence (NonCausal)
		Project(Att, Proj{W: WO, Bias: BO, Out: O}),
		Residual(O),
		LayerNorm(AttnOutNorm, AttnOutNormB, X, X),
		Project(X, Proj{W: Up, Bias: BUp, Out: U}),
		Act(U),
		Project(U, Proj{W: Down, Bias: BDown, Out: O}),
		Residual(O),
		LayerNorm(LayerOutNorm, LayerOutNormB, X, X),
	},
}

// clsOutHead is a reranker's output head (rank pooling): an encoder's
// last classifier layer, or a decoder reranker's (Qwen3-Reranker) rows of
// its answer tokens.
var clsOutHead = Tensor{Role: ClsOut, Name: "cls.output.weight", Cols: Dim, Rows: Labels, Optional: true, Lookup: true}
