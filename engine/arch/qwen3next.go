package arch

import (
	"slices"
	"strconv"
)

// qwen3next is Qwen3-Next (Qwen3-Next-80B-A3B), as llama.cpp runs it: the
// hybrid of gated DeltaNet and gated attention layers that Qwen3.5 took
// over (qwen35moe), with these differences:
//
//   - a DeltaNet layer's value heads are grouped by key head: value head
//     h reads key head h / (VHeads/KHeads), where Qwen3.5's converter
//     tiles them (h % KHeads);
//   - its write strengths and decay inputs come from one projection,
//     ssm_ba, whose rows are grouped by key head (the r = VHeads/KHeads
//     write strengths of its value heads, then their r decay inputs);
//   - its queries, keys, values and output gates come either from
//     attn_qkv and attn_gate (as Qwen3.5's) or, in files converted before
//     those were split out, from one projection ssm_in grouped by key head
//     (the head's query and key, then its value heads' values and gates),
//     which the variant qwen3nextFused reads;
//   - attention rotates with plain NeoX RoPE on rope.dimension_count
//     dimensions (a quarter of the head), not multi-section RoPE.
//
// Every block's FFN is a mixture of experts (softmax routing, the top
// expert_used_count renormalized; the experts' gate and up matrices apart
// or fused in ffn_gate_up_exps) plus a shared expert scaled by
// sigmoid(ffn_gate_inp_shexp . x); the norms are plain RMS norms (the
// converter folds Qwen's 1 + w into the weights). Multi-token-prediction
// blocks (nextn_predict_layers) are not run, as llama.cpp's main graph.
var qwen3next = Family{
	Name:    "qwen3next",
	Hparams: qwen3nextHparams,
	Variant: func(p *Params) *Family {
		if p.SSM.FusedQKVZ {
			return &qwen3nextFused
		}
		return nil
	},
	Model: tiedHead(),
	Layer: qwen3nextLayer(
		Tensor{Role: SSMQKV, Name: "attn_qkv.weight", Cols: Dim, Rows: ConvDim, Only: RecurrentLayers},
		Tensor{Role: SSMGate, Name: "attn_gate.weight", Cols: Dim, Rows: SSMInner, Only: RecurrentLayers},
	),
	Block: qwen3nextBlock(
		Project(XN, Proj{W: SSMQKV, Out: MX}, Proj{W: SSMGate, Out: Z}, Proj{W: SSMBetaAlpha, Out: BA}).On(RecurrentLayers),
		Ungroup(BA).On(RecurrentLayers),
	),
}

// qwen3nextFused is qwen3next for a file whose DeltaNet layers have the
// fused ssm_in in place of attn_qkv and attn_gate. It is not in the
// registry: qwen3next's Variant picks it.
var qwen3nextFused = Family{
	Name:  "qwen3next",
	Model: tiedHead(),
	Layer: qwen3nextLayer(
		Tensor{Role: SSMInQKVZ, Name: "ssm_in.weight", Cols: Dim, Rows: QKVZDim, Only: RecurrentLayers},
	),
	Block: qwen3nextBlock(
		Project(XN, Proj{W: SSMInQKVZ, Out: MXZ}, Proj{W: SSMBetaAlpha, Out: BA}).On(RecurrentLayers),
		Ungroup(MXZ).On(RecurrentLayers),
		Ungroup(BA).On(RecurrentLayers),
	),
}

func qwen3nextHparams(m Meta, p *Params) error {
	p.Neox = true
	if err := readSSM(m, p); err != nil {
		return err
	}
	p.SSM.Grouped = true
	// llama.cpp multiplies by attn_qkv when a layer has it, else by ssm_in.
	if il := slices.Index(p.SSM.Recurrent, true); il >= 0 {
		pre := "blk." + strconv.Itoa(il) + "."
		_, split := m.F.Tensor(pre + "attn_qkv.weight")
		_, fused := m.F.Tensor(pre + "ssm_in.weight")
		p.SSM.FusedQKVZ = fused && !split
	}
	if err := readMoE(m, p, true); err != nil {
		return err
	}
	p.MoE.SharedSigmoid = true
	return readSharedFF(m, p)
}

// qwen3nextLayer is a Qwen3-Next block's tensors, with qkvz the DeltaNet
// layers' projections of the queries, keys, values and output gates.
func qwen3nextLayer(qkvz ...Tensor) []Tensor {
	return join(
		gatedAttnLayer(),
		qkvz,
		[]Tensor{
			{Role: SSMBetaAlpha, Name: "ssm_ba.weight", Cols: Dim, Rows: BADim, Only: RecurrentLayers},
			{Role: SSMConv, Name: "ssm_conv1d.weight", Cols: ConvK, Rows: ConvDim, Table: true, Only: RecurrentLayers},
			{Role: SSMDt, Name: "ssm_dt.bias", Cols: SSMHeads, Only: RecurrentLayers},
			{Role: SSMA, Name: "ssm_a", Cols: SSMHeads, Only: RecurrentLayers},
			{Role: SSMNorm, Name: "ssm_norm.weight", Cols: SSMState, Only: RecurrentLayers},
			{Role: SSMOut, Name: "ssm_out.weight", Cols: SSMInner, Rows: Dim, Only: RecurrentLayers},
		},
		fusableMoEFFN(),
		sharedExpert(),
	)
}

// qwen3nextBlock is a Qwen3-Next block whose DeltaNet layers compute MX,
// Z, BT and AL from the normed XN with dnIn: the gated attention or the
// DeltaNet, each layer as its kind, then after the post-attention norm
// the experts and the gated shared expert.
func qwen3nextBlock(dnIn ...Step) []Step {
	return slices.Concat(
		gatedAttnSteps(),
		dnIn,
		[]Step{
			DeltaNet().On(RecurrentLayers),
			Project(DN, Proj{W: SSMOut, Out: O}).On(RecurrentLayers),
			Residual(O),
			Norm(FFNNorm, X, XN),
			// The router and the shared expert's gate and up in one dispatch.
			Project(XN, Proj{W: GateInp, Out: R}, Proj{W: GateShexp, Out: G}, Proj{W: UpShexp, Out: U}),
			GLU(),
			Project(G, Proj{W: DownShexp, Out: SH}),
			MoE(XN, O),
			SharedGate(XN, GateInpShexp, O),
			Residual(O),
		},
	)
}
