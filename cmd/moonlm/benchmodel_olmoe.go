package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/gguf"
)

// olmoeBenchShape is OLMoE-1B-7B's shape, the default of --arch olmoe:
// hidden 2048, 16 layers, 16 query heads and as many KV heads, experts of
// 1024, 50304 embedding rows.
var olmoeBenchShape = map[string]int{"dim": 2048, "layers": 16, "heads": 16, "kv-heads": 16, "ffn": 1024, "experts": 64, "used": 8, "vocab-size": 50304}

// olmoeTensorType is the weight type of an OLMoE tensor under ftype,
// following llama.cpp's choices for a MoE model of more than 8 experts
// without an importance matrix: for Q4_K_M, Q4_K everywhere (the token
// embeddings included, the head being untied) except Q6_K for the output
// head and for attn_v and ffn_down_exps of the use_more_bits layers; the
// router (ffn_gate_inp) stays F32.
func olmoeTensorType(ftype, name string, il, nLayer int) gguf.Type {
	if ftype == "q8_0" {
		return gguf.Q8_0
	}
	moreBits := il >= 0 && (il < nLayer/8 || il >= 7*nLayer/8 || (il-nLayer/8)%3 == 2)
	switch {
	case name == "output.weight":
		return gguf.Q6_K
	case (strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".ffn_down_exps.weight")) && moreBits:
		return gguf.Q6_K
	}
	return gguf.Q4_K
}

// olmoeBench is the OLMoE-shaped model's keys (the architecture and the
// shape's name first) and tensors, in the order llama.cpp's converter
// writes them. The router's weights are F32 drawn from N(0, 0.02^2) with
// the file's seed, so random inputs spread over every expert.
//
// With arch "qwen3moe" it is the same shape as a Qwen3-MoE (the Q and K
// norms per head instead of over the whole projections, the chosen
// experts' weights renormalized), for engines without olmoe: every
// matrix, and so the work per token, is the same, and with the same seed
// so are its weights.
func olmoeBench(sh benchShape, ftype string, nVocab int, seed uint64, arch string) ([]benchKey, []*benchTensor) {
	a := arch + "."
	headDim := sh.Dim / sh.Heads
	name := "OLMoE-1B-7B"
	if arch == "qwen3moe" {
		name = "OLMoE-1B-7B (qwen3moe)"
	}
	keys := []benchKey{
		{"general.architecture", arch}, {"", name},
		{a + "context_length", uint32(4096)},
		{a + "embedding_length", uint32(sh.Dim)},
		{a + "block_count", uint32(sh.Layers)},
		{a + "feed_forward_length", uint32(sh.FFN)},
		{a + "attention.head_count", uint32(sh.Heads)},
		{a + "attention.head_count_kv", uint32(sh.KVHeads)},
		{a + "rope.freq_base", float32(10000)},
		{a + "attention.layer_norm_rms_epsilon", float32(1e-5)},
		{a + "expert_count", uint32(sh.Experts)},
		{a + "expert_used_count", uint32(sh.Used)},
		{a + "vocab_size", uint32(nVocab)},
	}
	qNorm, kNorm := sh.Heads*headDim, sh.KVHeads*headDim
	if arch == "qwen3moe" {
		keys = append(keys,
			benchKey{a + "expert_feed_forward_length", uint32(sh.FFN)},
			benchKey{a + "attention.key_length", uint32(headDim)},
			benchKey{a + "attention.value_length", uint32(headDim)})
		qNorm, kNorm = headDim, headDim
	}
	qDim, kvDim := sh.Heads*headDim, sh.KVHeads*headDim
	mat := func(name string, il int, shape ...int64) *benchTensor {
		return &benchTensor{name: name, typ: olmoeTensorType(ftype, name, il, sh.Layers), shape: shape}
	}
	router := func(name string, il int) *benchTensor {
		rng := rand.New(rand.NewPCG(seed, 1<<63|uint64(il)))
		f := make([]float32, sh.Dim*sh.Experts)
		for i := range f {
			f[i] = float32(rng.NormFloat64() * 0.02)
		}
		return &benchTensor{name: name, typ: gguf.F32, shape: []int64{int64(sh.Dim), int64(sh.Experts)}, f32: f}
	}
	d, ff, ne := int64(sh.Dim), int64(sh.FFN), int64(sh.Experts)
	ts := []*benchTensor{mat("token_embd.weight", -1, d, int64(nVocab))}
	for il := 0; il < sh.Layers; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		ts = append(ts,
			benchVector(p+"attn_norm.weight", sh.Dim, 1),
			mat(p+"attn_q.weight", il, d, int64(qDim)),
			mat(p+"attn_k.weight", il, d, int64(kvDim)),
			mat(p+"attn_v.weight", il, d, int64(kvDim)),
			mat(p+"attn_output.weight", il, int64(qDim), d),
			benchVector(p+"attn_q_norm.weight", qNorm, 1),
			benchVector(p+"attn_k_norm.weight", kNorm, 1),
			benchVector(p+"ffn_norm.weight", sh.Dim, 1),
			router(p+"ffn_gate_inp.weight", il),
			mat(p+"ffn_gate_exps.weight", il, d, ff, ne),
			mat(p+"ffn_down_exps.weight", il, ff, d, ne),
			mat(p+"ffn_up_exps.weight", il, d, ff, ne),
		)
	}
	ts = append(ts, benchVector("output_norm.weight", sh.Dim, 1), mat("output.weight", -1, d, int64(nVocab)))
	return keys, ts
}

// padVocabValue returns the tokenizer array v of nTok entries padded to n
// entries (padding tokens named <|pad_i|>, typed control, scored 0), or v
// itself when it is not a per-token array.
func padVocabValue(v gguf.Value, nTok, n int) (any, error) {
	arr, err := v.Array()
	if err != nil || arr.Len() != nTok || n <= nTok {
		return v, nil
	}
	x, err := arr.Interface()
	if err != nil {
		return nil, err
	}
	switch s := x.(type) {
	case []string:
		for i := nTok; i < n; i++ {
			s = append(s, fmt.Sprintf("<|pad_%d|>", i))
		}
		return s, nil
	case []int32:
		for i := nTok; i < n; i++ {
			s = append(s, 3) // LLAMA_TOKEN_TYPE_CONTROL
		}
		return s, nil
	case []float32:
		for i := nTok; i < n; i++ {
			s = append(s, 0)
		}
		return s, nil
	}
	return v, nil
}
