package arch

import "fmt"

// MaxExperts bounds expert_count (llama.cpp's limit).
const MaxExperts = 1024

// MoEParams describe a mixture-of-experts feed-forward network.
type MoEParams struct {
	Experts int // expert_count
	Used    int // expert_used_count: the experts each token is routed to
	FF      int // expert_feed_forward_length: one expert's hidden size
	// SharedFF is the shared expert's hidden size
	// (expert_shared_feed_forward_length), 0 without one.
	SharedFF int
	// NormW renormalizes each token's chosen weights to sum to 1 (the
	// sum clamped below at 2^-14, as llama.cpp does).
	NormW bool
	// WScale multiplies the chosen weights after any renormalization;
	// 1 = none.
	WScale float32
	// WeightSoftmax chooses the experts by their raw router logits and
	// weights them by the softmax of the chosen logits alone (llama.cpp's
	// SOFTMAX_WEIGHT gating, gpt-oss's); otherwise the softmax over all
	// experts gives both the choice and the weights.
	WeightSoftmax bool
	// Act is the experts' gated activation: SiLU (SwiGLU) or SwiGLUOAI.
	Act Activation
	// SharedSigmoid computes the shared expert's gate as sigmoid(s), as
	// llama.cpp's qwen35moe and qwen3next graphs do; otherwise silu(s)/s,
	// as its qwen2moe graph does (the same value but for the rounding).
	SharedSigmoid bool
}

// readMoE reads the expert counts shared by the mixture-of-experts
// families: expert_count and expert_used_count are required and bounded,
// expert_feed_forward_length defaults to feed_forward_length / used (as
// llama.cpp's qwen3moe loader does). Gating is softmax, with the chosen
// weights renormalized when normW is set.
func readMoE(m Meta, p *Params, normW bool) error {
	e := &p.MoE
	var err error
	if e.Experts, err = m.Uint("expert_count", 0, true); err != nil {
		return err
	}
	if e.Used, err = m.Uint("expert_used_count", 0, true); err != nil {
		return err
	}
	if e.Experts <= 0 || e.Experts > MaxExperts {
		return fmt.Errorf("%w: metadata key %s.expert_count = %d; want 1 to %d", ErrBadFile, m.Arch, e.Experts, MaxExperts)
	}
	if e.Used <= 0 || e.Used > e.Experts {
		return fmt.Errorf("%w: metadata key %s.expert_used_count = %d for %d experts", ErrBadFile, m.Arch, e.Used, e.Experts)
	}
	if e.FF, err = m.Uint("expert_feed_forward_length", p.FF/e.Used, false); err != nil {
		return err
	}
	if e.FF <= 0 {
		return fmt.Errorf("%w: metadata key %s.expert_feed_forward_length = %d", ErrBadFile, m.Arch, e.FF)
	}
	e.NormW = normW
	e.WScale = 1
	return nil
}

// readSharedFF reads the shared expert's hidden size,
// expert_shared_feed_forward_length (default feed_forward_length).
func readSharedFF(m Meta, p *Params) error {
	sh, err := m.Uint("expert_shared_feed_forward_length", p.FF, false)
	if err != nil {
		return err
	}
	if sh <= 0 {
		return fmt.Errorf("%w: metadata key %s.expert_shared_feed_forward_length = %d", ErrBadFile, m.Arch, sh)
	}
	p.MoE.SharedFF = sh
	return nil
}

// moeFFN is the router and the experts' three matrices of a MoE step.
func moeFFN() []Tensor {
	return []Tensor{
		{Role: GateInp, Name: "ffn_gate_inp.weight", Cols: Dim, Rows: Experts},
		{Role: GateExps, Name: "ffn_gate_exps.weight", Cols: Dim, Rows: ExpFF, PerExpert: true},
		{Role: UpExps, Name: "ffn_up_exps.weight", Cols: Dim, Rows: ExpFF, PerExpert: true},
		{Role: DownExps, Name: "ffn_down_exps.weight", Cols: ExpFF, Rows: Dim, PerExpert: true},
	}
}

// fusableMoEFFN is moeFFN with the experts' gate and up matrices either
// apart or fused in one tensor, ffn_gate_up_exps (each expert's gate rows,
// then its up rows), as llama.cpp's create_tensor_gate_up_exps loads them
// for the families that read the fused one.
func fusableMoEFFN() []Tensor {
	return []Tensor{
		{Role: GateInp, Name: "ffn_gate_inp.weight", Cols: Dim, Rows: Experts},
		{Role: GateUpExps, Name: "ffn_gate_up_exps.weight", Cols: Dim, Rows: ExpFF2, PerExpert: true, Optional: true, Fused: []Role{GateExps, UpExps}},
		{Role: GateExps, Name: "ffn_gate_exps.weight", Cols: Dim, Rows: ExpFF, PerExpert: true, Optional: true},
		{Role: UpExps, Name: "ffn_up_exps.weight", Cols: Dim, Rows: ExpFF, PerExpert: true, Optional: true},
		{Role: DownExps, Name: "ffn_down_exps.weight", Cols: ExpFF, Rows: Dim, PerExpert: true},
	}
}

// sharedExpert is a MoE's shared expert: its sigmoid gate (a vector) and
// its SwiGLU network's three matrices.
func sharedExpert() []Tensor {
	return []Tensor{
		{Role: GateInpShexp, Name: "ffn_gate_inp_shexp.weight", Cols: Dim},
		{Role: GateShexp, Name: "ffn_gate_shexp.weight", Cols: Dim, Rows: ShFF},
		{Role: UpShexp, Name: "ffn_up_shexp.weight", Cols: Dim, Rows: ShFF},
		{Role: DownShexp, Name: "ffn_down_shexp.weight", Cols: ShFF, Rows: Dim},
	}
}

// moeSteps is the FFN half of a pre-norm MoE block: norm, router logits,
// the experts, the residual.
func moeSteps() []Step {
	return []Step{
		Norm(FFNNorm, X, XN),
		Project(XN, Proj{W: GateInp, Out: R}),
		MoE(XN, O),
		Residual(O),
	}
}
