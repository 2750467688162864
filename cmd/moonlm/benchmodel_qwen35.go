package main

import (
	"strconv"

	"github.com/moonlm/moonlm/gguf"
)

// qwen35BenchShape is Qwen3.5-0.8B's shape, the default of --arch qwen35.
var qwen35BenchShape = map[string]int{"dim": 1024, "layers": 24, "heads": 8, "kv-heads": 2, "ffn": 3584}

// Qwen3.5-0.8B's attention and DeltaNet sizes, fixed whatever the shape
// flags: heads of 256 rotated on 64 dimensions (sections 11, 11, 10),
// full attention every fourth layer; DeltaNet heads of 128, 16 for keys
// and 16 for values, and a convolution of 4.
const (
	qwen35BenchHeadDim  = 256
	qwen35BenchRot      = 64
	qwen35BenchInterval = 4
	qwen35BenchState    = 128
	qwen35BenchKHeads   = 16
	qwen35BenchVHeads   = 16
	qwen35BenchConv     = 4
)

// qwen35Bench is the Qwen3.5-shaped model's keys (the architecture and the
// shape's name first) and tensors, weights in Q8_0 and the rest F32 as
// llama-quantize leaves them. The decay's scale ssm_a is -1 and its bias
// 0, so states decay by about half per token.
func qwen35Bench(sh benchShape, nVocab int) ([]benchKey, []*benchTensor) {
	const a = "qwen35."
	inner := qwen35BenchVHeads * qwen35BenchState
	convDim := 2*qwen35BenchKHeads*qwen35BenchState + inner
	keys := []benchKey{
		{"general.architecture", "qwen35"}, {"", "Qwen3.5-0.8B"},
		{a + "context_length", uint32(262144)},
		{a + "embedding_length", uint32(sh.Dim)},
		{a + "block_count", uint32(sh.Layers)},
		{a + "feed_forward_length", uint32(sh.FFN)},
		{a + "attention.head_count", uint32(sh.Heads)},
		{a + "attention.head_count_kv", uint32(sh.KVHeads)},
		{a + "attention.key_length", uint32(qwen35BenchHeadDim)},
		{a + "attention.value_length", uint32(qwen35BenchHeadDim)},
		{a + "rope.dimension_count", uint32(qwen35BenchRot)},
		{a + "rope.dimension_sections", []int32{11, 11, 10, 0}},
		{a + "rope.freq_base", float32(1e7)},
		{a + "attention.layer_norm_rms_epsilon", float32(1e-6)},
		{a + "full_attention_interval", uint32(qwen35BenchInterval)},
		{a + "ssm.conv_kernel", uint32(qwen35BenchConv)},
		{a + "ssm.state_size", uint32(qwen35BenchState)},
		{a + "ssm.group_count", uint32(qwen35BenchKHeads)},
		{a + "ssm.time_step_rank", uint32(qwen35BenchVHeads)},
		{a + "ssm.inner_size", uint32(inner)},
		{a + "vocab_size", uint32(nVocab)},
	}
	mat := func(name string, cols, rows int) *benchTensor {
		return &benchTensor{name: name, typ: gguf.Q8_0, shape: []int64{int64(cols), int64(rows)}}
	}
	qDim, kvDim := sh.Heads*qwen35BenchHeadDim, sh.KVHeads*qwen35BenchHeadDim
	ts := []*benchTensor{mat("token_embd.weight", sh.Dim, nVocab)}
	for il := 0; il < sh.Layers; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		ts = append(ts, benchVector(p+"attn_norm.weight", sh.Dim, 1))
		if (il+1)%qwen35BenchInterval == 0 {
			ts = append(ts,
				mat(p+"attn_q.weight", sh.Dim, 2*qDim),
				mat(p+"attn_k.weight", sh.Dim, kvDim),
				mat(p+"attn_v.weight", sh.Dim, kvDim),
				benchVector(p+"attn_q_norm.weight", qwen35BenchHeadDim, 1),
				benchVector(p+"attn_k_norm.weight", qwen35BenchHeadDim, 1),
				mat(p+"attn_output.weight", qDim, sh.Dim),
			)
		} else {
			conv := benchVector(p+"ssm_conv1d.weight", qwen35BenchConv*convDim, 0.25)
			conv.shape = []int64{qwen35BenchConv, int64(convDim)}
			ts = append(ts,
				mat(p+"attn_qkv.weight", sh.Dim, convDim),
				mat(p+"attn_gate.weight", sh.Dim, inner),
				mat(p+"ssm_beta.weight", sh.Dim, qwen35BenchVHeads),
				mat(p+"ssm_alpha.weight", sh.Dim, qwen35BenchVHeads),
				conv,
				benchVector(p+"ssm_dt.bias", qwen35BenchVHeads, 0),
				benchVector(p+"ssm_a", qwen35BenchVHeads, -1),
				benchVector(p+"ssm_norm.weight", qwen35BenchState, 1),
				mat(p+"ssm_out.weight", inner, sh.Dim),
			)
		}
		ts = append(ts,
			benchVector(p+"post_attention_norm.weight", sh.Dim, 1),
			mat(p+"ffn_gate.weight", sh.Dim, sh.FFN),
			mat(p+"ffn_up.weight", sh.Dim, sh.FFN),
			mat(p+"ffn_down.weight", sh.FFN, sh.Dim),
		)
	}
	return keys, append(ts, benchVector("output_norm.weight", sh.Dim, 1))
}
