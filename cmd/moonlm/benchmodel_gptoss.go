package main

import (
	"math/rand/v2"
	"strconv"

	"github.com/moonlm/moonlm/gguf"
)

// gptOSSBenchShape is gpt-oss-20b's shape, the default of --arch gpt-oss:
// hidden 2880, 24 layers, 64 query and 8 KV heads (of 64), 32 experts of
// 2880 of which 4 are used, an untied output head, 201088 embedding rows.
var gptOSSBenchShape = map[string]int{"dim": 2880, "layers": 24, "heads": 64, "kv-heads": 8, "ffn": 2880, "experts": 32, "used": 4, "vocab-size": 201088}

// gptOSSHeadDim is gpt-oss's head size, whatever the hidden size.
const gptOSSHeadDim = 64

// gptOSSBench is the gpt-oss-20b-shaped model's keys (the architecture
// and the shape's name first) and tensors, in the order llama.cpp's
// converter writes a block's. Its types are those llama-quantize gives
// with MXFP4_MOE (the published gpt-oss files' type): the experts' matrices
// MXFP4, every other matrix Q8_0 (the embeddings and the output head
// included), the router and every vector F32. The router's weights are
// drawn from N(0, 0.02^2) with the file's seed, so random inputs spread
// over every expert; biases and attention sinks are 0, norms 1. Its
// metadata is gpt-oss-20b's: RoPE base 150000 with YaRN 32x from 4096, a
// sliding window of 128 on every other layer, epsilon 1e-5.
func gptOSSBench(sh benchShape, nVocab int, seed uint64) ([]benchKey, []*benchTensor) {
	const a = "gpt-oss."
	keys := []benchKey{
		{"general.architecture", "gpt-oss"}, {"", "gpt-oss-20b"},
		{a + "context_length", uint32(131072)},
		{a + "embedding_length", uint32(sh.Dim)},
		{a + "block_count", uint32(sh.Layers)},
		{a + "feed_forward_length", uint32(sh.FFN)},
		{a + "attention.head_count", uint32(sh.Heads)},
		{a + "attention.head_count_kv", uint32(sh.KVHeads)},
		{a + "attention.key_length", uint32(gptOSSHeadDim)},
		{a + "attention.value_length", uint32(gptOSSHeadDim)},
		{a + "rope.freq_base", float32(150000)},
		{a + "attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + "expert_count", uint32(sh.Experts)},
		{a + "expert_used_count", uint32(sh.Used)},
		{a + "expert_feed_forward_length", uint32(sh.FFN)},
		{a + "attention.sliding_window", uint32(128)},
		{a + "rope.scaling.type", "yarn"},
		{a + "rope.scaling.factor", float32(32)},
		{a + "rope.scaling.original_context_length", uint32(4096)},
	}
	qDim, kvDim := int64(sh.Heads*gptOSSHeadDim), int64(sh.KVHeads*gptOSSHeadDim)
	d, ff, ne := int64(sh.Dim), int64(sh.FFN), int64(sh.Experts)
	mat := func(name string, shape ...int64) *benchTensor {
		typ := gguf.Q8_0
		if len(shape) == 3 {
			typ = gguf.MXFP4
		}
		return &benchTensor{name: name, typ: typ, shape: shape}
	}
	zeros := func(name string, shape ...int64) *benchTensor {
		n := int64(1)
		for _, x := range shape {
			n *= x
		}
		return &benchTensor{name: name, typ: gguf.F32, shape: shape, f32: make([]float32, n)}
	}
	router := func(name string, il int) *benchTensor {
		rng := rand.New(rand.NewPCG(seed, 1<<63|uint64(il)))
		f := make([]float32, sh.Dim*sh.Experts)
		for i := range f {
			f[i] = float32(rng.NormFloat64() * 0.02)
		}
		return &benchTensor{name: name, typ: gguf.F32, shape: []int64{d, ne}, f32: f}
	}
	ts := []*benchTensor{mat("token_embd.weight", d, int64(nVocab))}
	for il := 0; il < sh.Layers; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		ts = append(ts,
			benchVector(p+"attn_norm.weight", sh.Dim, 1),
			mat(p+"attn_q.weight", d, qDim),
			zeros(p+"attn_q.bias", qDim),
			mat(p+"attn_k.weight", d, kvDim),
			zeros(p+"attn_k.bias", kvDim),
			mat(p+"attn_v.weight", d, kvDim),
			zeros(p+"attn_v.bias", kvDim),
			mat(p+"attn_output.weight", qDim, d),
			zeros(p+"attn_output.bias", d),
			zeros(p+"attn_sinks.weight", int64(sh.Heads)),
			benchVector(p+"post_attention_norm.weight", sh.Dim, 1),
			router(p+"ffn_gate_inp.weight", il),
			zeros(p+"ffn_gate_inp.bias", ne),
			mat(p+"ffn_gate_exps.weight", d, ff, ne),
			zeros(p+"ffn_gate_exps.bias", ff, ne),
			mat(p+"ffn_up_exps.weight", d, ff, ne),
			zeros(p+"ffn_up_exps.bias", ff, ne),
			mat(p+"ffn_down_exps.weight", ff, d, ne),
			zeros(p+"ffn_down_exps.bias", d, ne),
		)
	}
	ts = append(ts, benchVector("output_norm.weight", sh.Dim, 1), mat("output.weight", d, int64(nVocab)))
	return keys, ts
}
