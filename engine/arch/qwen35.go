package arch

import (
	"fmt"
	"slices"

	"github.com/moonlm/moonlm/gguf"
)

// qwen35 is Qwen3.5 (dense), a hybrid: most layers are gated DeltaNet
// linear attention (a causal convolution over the mixed Q, K, V, then a
// recurrent State x State matrix per value head updated by the delta
// rule with a decay gate, its output RMS-normed per head and gated by
// silu(z)); every full_attention_interval-th layer is full attention with
// an output gate (the Q projection holds each head's queries followed by
// its gate; the attention output is multiplied by sigmoid(gate)), per-head
// Q and K norms and NeoX RoPE on rope.dimension_count dimensions. Each
// block ends in a SwiGLU FFN after a post-attention norm.
//
// llama.cpp rotates with Qwen's interleaved multi-section RoPE; for text
// every section's position is the token's, which is NeoX RoPE, so a file
// whose sections would leave some pairs on the fourth (extra) position is
// refused.
var qwen35 = Family{
	Name:    "qwen35",
	Hparams: qwen35Hparams,
	Model:   tiedHead(),
	Layer:   qwen35Layer(gluFFN()),
	Block: qwen35Block(
		Project(XN, Proj{W: Gate, Out: G}, Proj{W: Up, Out: U}),
		GLU(),
		Project(G, Proj{W: Down, Out: O}),
	),
}

// qwen35Layer is the tensors of a Qwen3.5 block whose FFN has ffn.
func qwen35Layer(ffn []Tensor) []Tensor {
	return join(
		gatedAttnLayer(),
		deltaNetLayer(),
		ffn,
	)
}

// qwen35Block is a Qwen3.5 block whose FFN (from the normed XN to O) is
// ffn: the gated attention or the DeltaNet, each layer as its kind, then
// the FFN after the post-attention norm.
func qwen35Block(ffn ...Step) []Step {
	return slices.Concat(gatedAttnSteps(), []Step{
		Project(XN, Proj{W: SSMQKV, Out: MX}, Proj{W: SSMGate, Out: Z}, Proj{W: SSMBeta, Out: BT}, Proj{W: SSMAlpha, Out: AL}).On(RecurrentLayers),
		DeltaNet().On(RecurrentLayers),
		Project(DN, Proj{W: SSMOut, Out: O}).On(RecurrentLayers),
		Residual(O),
		Norm(FFNNorm, X, XN),
	}, ffn, []Step{Residual(O)})
}

// gatedAttnLayer is the norms of a Qwen3.5-style block and the tensors of
// its gated attention layers (the query projection also makes the output
// gate).
func gatedAttnLayer() []Tensor {
	return []Tensor{
		{Role: AttnNorm, Name: "attn_norm.weight", Cols: Dim},
		{Role: FFNNorm, Name: "post_attention_norm.weight", Cols: Dim},
		{Role: WQ, Name: "attn_q.weight", Cols: Dim, Rows: QDim2, Only: AttnLayers},
		{Role: WK, Name: "attn_k.weight", Cols: Dim, Rows: KVDim, Only: AttnLayers},
		{Role: WV, Name: "attn_v.weight", Cols: Dim, Rows: KVDim, Only: AttnLayers},
		{Role: WO, Name: "attn_output.weight", Cols: QDim, Rows: Dim, Only: AttnLayers},
		{Role: QNorm, Name: "attn_q_norm.weight", Cols: HeadDim, Only: AttnLayers},
		{Role: KNorm, Name: "attn_k_norm.weight", Cols: HeadDim, Only: AttnLayers},
	}
}

// gatedAttnSteps is the start of a Qwen3.5-style block: the attention norm
// and, on the attention layers, the gated attention into O.
func gatedAttnSteps() []Step {
	return []Step{
		Norm(AttnNorm, X, XN),
		Project(XN, Proj{W: WQ, Out: QG}, Proj{W: WK, Out: K}, Proj{W: WV, Out: V}).On(AttnLayers),
		SplitGate().On(AttnLayers),
		HeadNorm(Q, QNorm).On(AttnLayers),
		HeadNorm(K, KNorm).On(AttnLayers),
		RoPE().On(AttnLayers),
		Attend().On(AttnLayers),
		OutGate(Att).On(AttnLayers),
		Project(Att, Proj{W: WO, Out: O}).On(AttnLayers),
	}
}

// deltaNetLayer is a gated DeltaNet layer's tensors, as llama.cpp names
// them (ssm_a holds -exp(A_log)).
func deltaNetLayer() []Tensor {
	return []Tensor{
		{Role: SSMQKV, Name: "attn_qkv.weight", Cols: Dim, Rows: ConvDim, Only: RecurrentLayers},
		{Role: SSMGate, Name: "attn_gate.weight", Cols: Dim, Rows: SSMInner, Only: RecurrentLayers},
		{Role: SSMBeta, Name: "ssm_beta.weight", Cols: Dim, Rows: SSMHeads, Only: RecurrentLayers},
		{Role: SSMAlpha, Name: "ssm_alpha.weight", Cols: Dim, Rows: SSMHeads, Only: RecurrentLayers},
		{Role: SSMConv, Name: "ssm_conv1d.weight", Cols: ConvK, Rows: ConvDim, Table: true, Only: RecurrentLayers},
		{Role: SSMDt, Name: "ssm_dt.bias", Cols: SSMHeads, Only: RecurrentLayers},
		{Role: SSMA, Name: "ssm_a", Cols: SSMHeads, Only: RecurrentLayers},
		{Role: SSMNorm, Name: "ssm_norm.weight", Cols: SSMState, Only: RecurrentLayers},
		{Role: SSMOut, Name: "ssm_out.weight", Cols: SSMInner, Rows: Dim, Only: RecurrentLayers},
	}
}

// Bounds of the DeltaNet hyperparameters (far above published models:
// Qwen3.5 has a kernel of 4, heads of 128, 16 to 64 value heads).
const (
	maxConvK    = 64
	maxSSMState = 1024
	maxSSMHeads = 1024
)

func qwen35Hparams(m Meta, p *Params) error {
	p.Neox = true
	if err := readSSM(m, p); err != nil {
		return err
	}
	return checkRopeSections(m, p)
}

// readSSM reads the gated DeltaNet keys and which layers are recurrent:
// attention.recurrent_layers (one flag per layer) when present, else every
// layer but each full_attention_interval-th (default 4), as llama.cpp.
func readSSM(m Meta, p *Params) error {
	s := &p.SSM
	var err error
	for _, k := range []struct {
		key string
		v   *int
		max int
	}{
		{"ssm.conv_kernel", &s.ConvK, maxConvK},
		{"ssm.inner_size", &s.Inner, maxSSMState * maxSSMHeads},
		{"ssm.state_size", &s.State, maxSSMState},
		{"ssm.time_step_rank", &s.VHeads, maxSSMHeads},
		{"ssm.group_count", &s.KHeads, maxSSMHeads},
	} {
		if *k.v, err = m.Uint(k.key, 0, true); err != nil {
			return err
		}
		if *k.v <= 0 || *k.v > k.max {
			return fmt.Errorf("%w: metadata key %s.%s = %d; want 1 to %d", ErrBadFile, m.Arch, k.key, *k.v, k.max)
		}
	}
	if s.ConvK < 2 {
		return fmt.Errorf("%w: metadata key %s.ssm.conv_kernel = %d; want at least 2", ErrBadFile, m.Arch, s.ConvK)
	}
	if s.VHeads%s.KHeads != 0 {
		return fmt.Errorf("%w: %s.ssm.time_step_rank %d value heads is not a multiple of %s.ssm.group_count %d", ErrBadFile, m.Arch, s.VHeads, m.Arch, s.KHeads)
	}
	if s.Inner != s.VHeads*s.State {
		return fmt.Errorf("%w: %s.ssm.inner_size %d is not %d value heads x state size %d", ErrUnsupported, m.Arch, s.Inner, s.VHeads, s.State)
	}
	s.Recurrent = make([]bool, p.Layers)
	if v, ok := m.lookup("attention.recurrent_layers"); ok {
		a, err := v.Array()
		if err != nil || a.Len() < p.Layers {
			return fmt.Errorf("%w: metadata key %s.attention.recurrent_layers is not one flag per layer (%d)", ErrBadFile, m.Arch, p.Layers)
		}
		for i := range p.Layers {
			if s.Recurrent[i], err = flag(a, i); err != nil {
				return fmt.Errorf("%w: metadata key %s.attention.recurrent_layers[%d]: %v", ErrBadFile, m.Arch, i, err)
			}
		}
	} else {
		every, err := m.Uint("full_attention_interval", 4, false)
		if err != nil {
			return err
		}
		if every <= 0 {
			return fmt.Errorf("%w: metadata key %s.full_attention_interval = %d", ErrBadFile, m.Arch, every)
		}
		for i := range p.Layers {
			s.Recurrent[i] = (i+1)%every != 0
		}
	}
	return nil
}

// flag reads element i of a per-layer array of booleans or integers.
func flag(a gguf.Array, i int) (bool, error) {
	if a.ElemType() == gguf.ValueBool {
		return a.Bool(i)
	}
	x, err := a.Int64(i)
	return x != 0, err
}

// checkRopeSections refuses multi-section RoPE sections under which some
// rotated pair would take the extra (fourth) position, which for text is
// not the token's: llama.cpp's interleaved sections give pair j the
// first position when j%3 == 0 and j < 3*s0, the second when j%3 == 1
// and j < 3*s1, the third when j%3 == 2 and j < 3*s2, else the fourth.
func checkRopeSections(m Meta, p *Params) error {
	v, ok := m.lookup("rope.dimension_sections")
	if !ok {
		return nil
	}
	a, err := v.Array()
	if err != nil || a.Len() < 3 {
		return fmt.Errorf("%w: metadata key %s.rope.dimension_sections is not a list of sections", ErrBadFile, m.Arch)
	}
	var sec [4]int64
	for i := range min(a.Len(), 4) {
		if sec[i], err = a.Int64(i); err != nil || sec[i] < 0 || sec[i] > 1<<16 {
			return fmt.Errorf("%w: metadata key %s.rope.dimension_sections[%d]", ErrBadFile, m.Arch, i)
		}
	}
	total := sec[0] + sec[1] + sec[2] + sec[3]
	if total == 0 {
		return nil
	}
	for j := int64(0); j < int64(p.Rot/2); j++ {
		s := j % total
		if !(s%3 == 0 && s < 3*sec[0] || s%3 == 1 && s < 3*sec[1] || s%3 == 2 && s < 3*sec[2]) {
			return fmt.Errorf("%w: %s.rope.dimension_sections %v rotate pair %d by the extra position", ErrUnsupported, m.Arch, sec, j)
		}
	}
	return nil
}
