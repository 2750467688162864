package arch

import "fmt"

// The tensors and steps most families share. Each helper returns a fresh
// slice, so a family can append its own without touching another's.

// tiedHead is the token embedding, the output head (the embedding itself
// when the file has none) and the final norm, followed by extra.
func tiedHead(extra ...Tensor) []Tensor {
	return append([]Tensor{
		{Role: TokenEmbd, Name: "token_embd.weight", Cols: Dim, Rows: Any},
		{Role: Output, Name: "output.weight", Cols: Dim, Rows: Vocab, Optional: true, TiedTo: TokenEmbd},
		{Role: OutputNorm, Name: "output_norm.weight", Cols: Dim},
	}, extra...)
}

// ropeFreqs is llama3's optional table of RoPE frequency factors.
var ropeFreqs = Tensor{Role: RopeFreqs, Name: "rope_freqs.weight", Cols: RotHalf, Optional: true}

// qkv is the attention's input norm and its Q, K and V projections.
func qkv() []Tensor {
	return []Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim},
	}
}

// fusableQKV is Q, K and V as llama.cpp's create_tensor_qkv loads them:
// either one fused attn_qkv matrix or three, each with an optional bias
// (fused or not).
func fusableQKV() []Tensor {
	return []Tensor{
		{Role: WQKV, Name: "attn_qkv.weight", Cols: Dim, Rows: QKVDim, Optional: true, Fused: []Role{WQ, WK, WV}},
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim, Optional: true},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim, Optional: true},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim, Optional: true},
		{Role: BQKV, Name: "attn_qkv.bias", Cols: QKVDim, Optional: true, Fused: []Role{BQ, BK, BV}},
		{Role: BQ, Name: "attn_q.bias", Cols: QDim, Optional: true},
		{Role: BK, Name: "attn_k.bias", Cols: KVDim, Optional: true},
		{Role: BV, Name: "attn_v.bias", Cols: KVDim, Optional: true},
	}
}

// qkvBias is the biases of Q, K and V, required or optional.
func qkvBias(optional bool) []Tensor {
	return []Tensor{
		{Role: BQ, Name: "attn_q.bias", Cols: QDim, Optional: optional},
		{Role: BK, Name: "attn_k.bias", Cols: KVDim, Optional: optional},
		{Role: BV, Name: "attn_v.bias", Cols: KVDim, Optional: optional},
	}
}

// qkNorm is the per-head RMSNorm weights of Q and K.
func qkNorm() []Tensor {
	return []Tensor{
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: HeadDim},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: HeadDim},
	}
}

var (
	attnOut = Tensor{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim}
	ffnNorm = Tensor{Role: FFNNorm, Name: "ffn_norm.weight", Cols: Dim}
)

// gluFFN is the gated feed-forward network's three matrices.
func gluFFN() []Tensor {
	return []Tensor{
		{Role: Gate, Name: "ffn_gate.weight", Cols: Dim, Rows: FF},
		{Role: Up, Name: "ffn_up.weight", Cols: Dim, Rows: FF},
		{Role: Down, Name: "ffn_down.weight", Cols: FF, Rows: Dim},
	}
}

// join concatenates lists (of tensors or steps) into a new slice.
func join[T any](parts ...[]T) []T {
	var out []T
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// llamaBlock is the pre-norm block of llama and the families shaped like it:
// attention over biased (where the file has biases) Q, K, V with RoPE, then
// a SwiGLU feed-forward network, each added to the residual stream.
func llamaBlock() []Step {
	return []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Bias: BQ, Out: Q}, Proj{W: WK, Bias: BK, Out: K}, Proj{W: WV, Bias: BV, Out: V}),
		RoPE(),
		Attend(),
		Project(Att, Proj{W: WO, Out: O}),
		Residual(O),
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Residual(O),
	}
}

// llamaLayer is llamaBlock's tensors, with Q/K/V biases required or optional.
func llamaLayer(optionalBias bool) []Tensor {
	return join(qkv(), qkvBias(optionalBias), []Tensor{attnOut}, gluFFN(), []Tensor{ffnNorm})
}

// requireKey is ErrBadFile when the family's key (after "ARCH.") is absent:
// a key llama.cpp requires though it has a default elsewhere.
func requireKey(m Meta, key string) error {
	if _, ok := m.lookup(key); !ok {
		return fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.Arch, key)
	}
	return nil
}

// refuseExperts is ErrUnsupported for a file of a dense family that
// declares experts (a mixture-of-experts variant the family does not run).
func refuseExperts(m Meta) error {
	experts, err := m.Uint("expert_count", 0, false)
	if err != nil {
		return err
	}
	if experts > 0 {
		return fmt.Errorf("%w: %s with %d experts (mixture of experts)", ErrUnsupported, m.Arch, experts)
	}
	return nil
}

// postNormAttnOut is the attention's output projection, normed before it
// joins the residual stream (Gemma's post_attention_norm).
func postNormAttnOut() []Step {
	return []Step{
		Project(Att, Proj{W: WO, Out: O}),
		Norm(PostAttnNorm, O, O),
		Residual(O),
	}
}

// postNormGLU is the pre-normed gated FFN whose output is normed before it
// joins the residual stream (Gemma's post_ffw_norm).
func postNormGLU() []Step {
	return []Step{
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
		Norm(PostFFNNorm, O, O),
		Residual(O),
	}
}
