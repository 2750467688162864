package engine

import "fmt"

// The synthetic gemma4 model: five layers, sliding (0, 1, 3) and global
// (2, 4), the last two sharing the KV caches of layers 1 and 2.
const (
	g4Layers              = 5
	g4HeadSWA, g4HeadFull = 32, 64 // head sizes of the sliding and the global layers
	g4KVSWA, g4KVFull     = 2, 1   // their KV heads
	g4FF                  = 256    // feed-forward width, doubled in the KV-sharing layers
	g4PerLayer            = 64     // embedding_length_per_layer_input
	g4Shared              = 2      // attention.shared_kv_layers
)

// g4Sliding is the synthetic model's attention.sliding_window_pattern.
var g4Sliding = []bool{true, true, false, true, false}

// gemma4SynthKeys are its metadata: per-layer KV heads and FFN widths,
// both head sizes, a window of 8 (the prompts pass it), Gemma 4's RoPE
// bases (1e6 global, 1e4 sliding), and soft-capped logits.
func gemma4SynthKeys() []synthKey {
	kv, ff := make([]uint32, g4Layers), make([]uint32, g4Layers)
	for il := range kv {
		kv[il] = map[bool]uint32{true: g4KVSWA, false: g4KVFull}[g4Sliding[il]]
		ff[il] = g4FF
		if il >= g4Layers-g4Shared {
			ff[il] = 2 * g4FF
		}
	}
	return []synthKey{
		{"context_length", uint32(131072)},
		{"feed_forward_length", ff},
		{"attention.head_count_kv", kv},
		{"attention.key_length", uint32(g4HeadFull)},
		{"attention.value_length", uint32(g4HeadFull)},
		{"attention.key_length_swa", uint32(g4HeadSWA)},
		{"attention.value_length_swa", uint32(g4HeadSWA)},
		{"rope.dimension_count", uint32(g4HeadFull)},
		{"rope.dimension_count_swa", uint32(g4HeadSWA)},
		{"rope.freq_base", float32(1e6)},
		{"rope.freq_base_swa", float32(10000)},
		{"attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"attention.sliding_window", uint32(8)},
		{"attention.sliding_window_pattern", g4Sliding},
		{"attention.shared_kv_layers", uint32(g4Shared)},
		{"embedding_length_per_layer_input", uint32(g4PerLayer)},
		{"final_logit_softcapping", float32(30)},
	}
}

// qkNormFill is the Q and K norms' weights: about 0.45, so that scores
// (not scaled by the head size in Gemma 4) stay a few units, as trained
// norms keep them, rather than making every softmax nearly one-hot.
func qkNormFill(i int) float32 { return 0.4 + 0.02*float32(i%7) }

// gemma4SynthTensors is its tensor set: per-layer inputs; per layer Q, K
// and V of the layer's head size (none of K and V in the sharing layers,
// and no V in layer 2, whose V is then its K), Q/K norms, post-norms,
// the per-layer input's gate, projection and norm, and an output scale;
// Q/K norm weights of about 0.45 (qkNormFill);
// the tied embeddings and the global layers' RoPE divisors, which rotate
// a quarter of each global head (as the converter's "proportional" RoPE).
func gemma4SynthTensors(layers int) []synthTensor {
	d := int64(synthDim)
	all := int64(g4PerLayer * layers)
	ts := []synthTensor{
		{name: "token_embd.weight", shape: []int64{d, 512}},
		{name: "per_layer_token_embd.weight", shape: []int64{all, 512}},
		{name: "per_layer_model_proj.weight", shape: []int64{d, all}},
		{name: "per_layer_proj_norm.weight", shape: []int64{g4PerLayer}},
	}
	for il := 0; il < layers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		hd, kv := int64(g4HeadFull), int64(g4KVFull)
		if g4Sliding[il] {
			hd, kv = g4HeadSWA, g4KVSWA
		}
		q := int64(synthHeads) * hd
		ff := int64(g4FF)
		ts = append(ts,
			synthTensor{name: p + "attn_norm.weight", shape: []int64{d}},
			synthTensor{name: p + "attn_q.weight", shape: []int64{d, q}},
			synthTensor{name: p + "attn_q_norm.weight", shape: []int64{hd}, fill: qkNormFill},
		)
		if shared := il >= layers-g4Shared; !shared {
			ts = append(ts,
				synthTensor{name: p + "attn_k.weight", shape: []int64{d, kv * hd}},
				synthTensor{name: p + "attn_k_norm.weight", shape: []int64{hd}, fill: qkNormFill})
			if il != 2 {
				ts = append(ts, synthTensor{name: p + "attn_v.weight", shape: []int64{d, kv * hd}})
			}
		} else {
			ff *= 2
		}
		scale := float32(0.6 + 0.1*float64(il))
		ts = append(ts,
			synthTensor{name: p + "attn_output.weight", shape: []int64{q, d}},
			synthTensor{name: p + "post_attention_norm.weight", shape: []int64{d}},
			synthTensor{name: p + "ffn_norm.weight", shape: []int64{d}},
			synthTensor{name: p + "ffn_gate.weight", shape: []int64{d, ff}},
			synthTensor{name: p + "ffn_up.weight", shape: []int64{d, ff}},
			synthTensor{name: p + "ffn_down.weight", shape: []int64{ff, d}},
			synthTensor{name: p + "post_ffw_norm.weight", shape: []int64{d}},
			synthTensor{name: p + "inp_gate.weight", shape: []int64{d, g4PerLayer}},
			synthTensor{name: p + "proj.weight", shape: []int64{g4PerLayer, d}},
			synthTensor{name: p + "post_norm.weight", shape: []int64{d}},
			synthTensor{name: p + "layer_output_scale.weight", shape: []int64{1}, fill: func(int) float32 { return scale }},
		)
	}
	return append(ts,
		synthTensor{name: "output_norm.weight", shape: []int64{d}},
		synthTensor{name: "rope_freqs.weight", shape: []int64{g4HeadFull / 2}, fill: func(i int) float32 {
			if i < g4HeadFull/8 {
				return 1
			}
			return 1e30
		}},
	)
}
