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
		{Role: BQ, Name: "attn_q.bias", Cols: QDim, Optional: true},
		{Role: BK, Name: "attn_k.bias", Cols: KVDim, Optional: true},
		{Role: BV, Name: "attn_v.bias", Cols: KVDim, Optional: true},
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim},
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
		{Role: FFNNorm, Name: "ffn_norm.weight", Cols: Dim},
	},
	Block: []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(), // skipped on the NoPE layers (Params.Rotates)
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
