package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
)

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

func gemma4Q8Path(t *testing.T) string { return synthModel(t, "synth-gemma4-Q8_0.gguf") }

// TestGemma4LayerShapes: the synthetic file's layers get their own
// shapes, one plan per distinct shape (own or shared KV, sliding or
// global), a KV cache layer for each layer with its own keys only, and
// layer 2's absent attn_v is its attn_k.
func TestGemma4LayerShapes(t *testing.T) {
	m, err := Open(gemma4Q8Path(t), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	var heads, kvHeads, ff, kvFrom []int
	for il := range m.layers {
		L := &m.layers[il]
		assert.Equal(t, g4Sliding[il], L.sliding, "layer %d sliding", il)
		heads = append(heads, L.c.HeadDim)
		kvHeads = append(kvHeads, L.c.KVHeads)
		ff = append(ff, L.c.FF)
		kvFrom = append(kvFrom, m.cfg.Shapes[il].KVFrom)
	}
	assert.Equal(t, []int{32, 32, 64, 32, 64}, heads)
	assert.Equal(t, []int{2, 2, 1, 2, 1}, kvHeads)
	assert.Equal(t, []int{256, 256, 256, 512, 512}, ff)
	assert.Equal(t, []int{0, 1, 2, 1, 2}, kvFrom)
	assert.Len(t, m.plans, 4)
	assert.Equal(t, []int{64, 64, 64}, m.kvDims)
	for il, want := range []int{0, 1, 2, 1, 2} {
		assert.Equal(t, want, m.layers[il].kv, "layer %d's cache layer", il)
	}
	for _, il := range []int{3, 4} {
		L := &m.layers[il]
		assert.True(t, L.plan.sharedKV)
		assert.Nil(t, L.mats[arch.WK].Data, "layer %d loads no attn_k", il)
		assert.Nil(t, L.vecs[arch.KNorm], "layer %d loads no attn_k_norm", il)
		for _, ph := range L.plan.phases {
			for _, op := range ph.ops {
				assert.NotEqual(t, tkStoreKV, op.kind, "layer %d stores no keys", il)
			}
		}
	}
	L2 := &m.layers[2]
	require.NotNil(t, L2.mats[arch.WK].Data)
	assert.Same(t, &L2.mats[arch.WK].Data[0], &L2.mats[arch.WV].Data[0], "layer 2's V is its K")
	assert.Equal(t, 4, m.plan.width[arch.Q]/32)
	assert.Equal(t, g4PerLayer, m.plan.width[arch.P])
}

// TestGemma4StateRoundTrip: a saved state of the layers' caches of
// different owners loads into a new session that continues exactly as the
// one that saved it.
func TestGemma4StateRoundTrip(t *testing.T) {
	m, err := Open(gemma4Q8Path(t), ModelParams{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	toks, err := m.Tokenize("Lily wanted to play with her ball and her friend Tom", true, false)
	require.NoError(t, err)
	vocab := m.Info().VocabSize
	a, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer a.Close()
	require.NoError(t, a.Prefill(toks[:len(toks)-1], nil))
	state, err := a.SaveState()
	require.NoError(t, err)
	want := make([]float32, vocab)
	require.NoError(t, a.Decode(toks[len(toks)-1], want))

	b, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.LoadState(state))
	got := make([]float32, vocab)
	require.NoError(t, b.Decode(toks[len(toks)-1], got))
	assert.Equal(t, want, got)
}

// TestGemma4Refusals: what the engine does not run for gemma4 is
// ErrUnsupported, and a layer with its own KV cache but no attn_k is
// ErrBadFile naming the tensor.
func TestGemma4Refusals(t *testing.T) {
	m, err := Open(gemma4Q8Path(t), ModelParams{Threads: 1})
	require.NoError(t, err)
	_, err = m.NewSession(SessionParams{KVType: gguf.Q8_0, NCtx: 64})
	assert.ErrorIs(t, err, ErrUnsupported)
	require.NoError(t, m.Close())

	_, err = Open(gemma4Q8Path(t), ModelParams{Threads: 1, Numerics: NumericsIk})
	assert.ErrorIs(t, err, ErrUnsupported)

	noK := rewriteTensors(t, gemma4Q8Path(t), func(ts *gguf.Tensor) []*gguf.Tensor {
		if ts.Name == "blk.1.attn_k.weight" {
			return nil
		}
		return []*gguf.Tensor{ts}
	})
	_, err = Open(noK, ModelParams{Threads: 1})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrBadFile), "%v", err)
	assert.True(t, strings.Contains(err.Error(), "blk.1.attn_k.weight"), "%v", err)
}
