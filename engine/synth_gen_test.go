package engine

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// updateSynth writes the synthetic models without checking their sha256,
// into build/synth, and logs the sums, for a generator changed on purpose
// (the references are then made again from those files):
// go test ./engine/ -run 'TestWriteSynth' -update-synth
var updateSynth = flag.Bool("update-synth", false, "write the synthetic models into build/synth without checking their sha256, and log the sums")

// synthSpec is one synthetic model, shaped as the shared test data's synth
// files: hidden 256, 4 heads of 64, 2 KV heads, ffn 512, the stories260K
// tokenizer, weights N(0, 0.08²), norm weights 1 + 0.1·N(0,1).
type synthSpec struct {
	arch   string
	name   string // general.name; "" is synth-ARCH
	layers int
	seed   uint64
	// keys are the family's own metadata, after the shared dimensions
	// (a key of the same name replaces a shared one).
	keys []synthKey
	// tensors lists the file's tensors in write order, which is the order
	// their values are drawn in; nil is the llama set (llamaSynthTensors).
	tensors func(layers int) []synthTensor
	// f32SHA256 is the sha256 of the F32 file, which is not committed: the
	// tests write it from the generator (synthF32) and check it against
	// this. The Q8_0 file's is in synthModelFiles; only the references are
	// committed.
	f32SHA256 string
	// ablations are metadata keys (after "ARCH.") that each turn off one
	// of the family's features, for a family whose file cannot be read as
	// llama (TestSynthNewArchAsLlamaDiffers).
	ablations []synthKey
}

// synthTensor is one tensor of a synthetic file: a matrix (two dimensions)
// of N(0, 0.08²) values, a vector of 1 + 0.1·N(0,1), or a vector of fixed
// values (fill, which draws nothing).
type synthTensor struct {
	name  string
	shape []int64
	fill  func(i int) float32
	// keepF32 keeps a matrix in F32 in the Q8_0 file (llama-quantize keeps
	// the DeltaNet convolution's weights, whose rows are not whole blocks).
	keepF32 bool
}

// llamaSynthTensors is the llama tensor set: no biases, tied output.
func llamaSynthTensors(layers int) []synthTensor {
	qDim, kvDim := int64(synthHeads*synthHeadDim), int64(synthKVHeads*synthHeadDim)
	ts := []synthTensor{{name: "token_embd.weight", shape: []int64{synthDim, 512}}}
	for il := 0; il < layers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		ts = append(ts,
			synthTensor{name: p + "attn_norm.weight", shape: []int64{synthDim}},
			synthTensor{name: p + "attn_q.weight", shape: []int64{synthDim, qDim}},
			synthTensor{name: p + "attn_k.weight", shape: []int64{synthDim, kvDim}},
			synthTensor{name: p + "attn_v.weight", shape: []int64{synthDim, kvDim}},
			synthTensor{name: p + "attn_output.weight", shape: []int64{qDim, synthDim}},
			synthTensor{name: p + "ffn_norm.weight", shape: []int64{synthDim}},
			synthTensor{name: p + "ffn_gate.weight", shape: []int64{synthDim, synthFF}},
			synthTensor{name: p + "ffn_up.weight", shape: []int64{synthDim, synthFF}},
			synthTensor{name: p + "ffn_down.weight", shape: []int64{synthFF, synthDim}},
		)
	}
	return append(ts, synthTensor{name: "output_norm.weight", shape: []int64{synthDim}})
}

type synthKey struct {
	name string // after "ARCH."
	v    any
}

// synthSpecs are the families whose synthetic files live in this
// repository (the shared test data has the first four).
var synthSpecs = []synthSpec{
	// Six layers: layer 3 is SmolLM3's NoPE layer.
	{arch: "smollm3", layers: 6, seed: 3, keys: []synthKey{
		{"rope.freq_base", float32(5e6)},
		{"attention.layer_norm_rms_epsilon", float32(1e-6)},
	}, f32SHA256: "3d8064719807375c6fe478f959fedd8fcfc46efe0ed488c4a8288d729686add3"},
	// Granite 3.x's multipliers as its 2B models publish them (head size
	// 64 there too, so attention.scale 1/64 replaces 1/8).
	{arch: "granite", layers: 6, seed: 4, keys: []synthKey{
		{"rope.freq_base", float32(1e7)},
		{"attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"embedding_scale", float32(12)},
		{"attention.scale", float32(0.015625)},
		{"residual_scale", float32(0.22)},
		{"logit_scale", float32(8)},
	}, f32SHA256: "d9aabc81fb2a4992af2823f8bfc00c0dc182c599b091b88194d81f49060aafbb"},
	// Phi-4-mini's shape of the family: fused QKV and gate/up, 3/4 of
	// each head rotated, LongRoPE factors with its attention factor
	// sqrt(1 + ln(32)/ln(4096)), a 128K context trained from 4K (so a
	// 512-position session takes the short factors). llama.cpp sets token
	// attributes for a model named "phi3" or "phi-3" by tokens this
	// vocabulary lacks, so the name avoids them.
	{arch: "phi3", name: "Synth Phi-4-mini", layers: 4, seed: 5, tensors: phi3SynthTensors, keys: []synthKey{
		{"context_length", uint32(131072)},
		{"rope.dimension_count", uint32(48)},
		{"rope.freq_base", float32(10000)},
		{"rope.scaling.original_context_length", uint32(4096)},
		{"rope.scaling.attn_factor", float32(1.1902381)},
		{"attention.sliding_window", uint32(262144)},
		{"attention.layer_norm_rms_epsilon", float32(1e-5)},
	}, ablations: []synthKey{
		{"rope.scaling.attn_factor", float32(1)},
		// A context beyond 256 takes the long factors.
		{"rope.scaling.original_context_length", uint32(256)},
	}, f32SHA256: "7ace731d9803e8671713301ece17dc1e8f3b618c19c8dd97992953ffbd71bbc1"},
	// Gemma 2 2B's metadata but for a sliding window of 8, so that the
	// prompts reach past it on the even layers, and an attention
	// soft-cap of 5 instead of 50: this model's scores are a few units,
	// which a cap of 50 would barely bend (0.007 in log-probability).
	{arch: "gemma2", layers: 4, seed: 6, tensors: func(layers int) []synthTensor { return withPostNorms(llamaSynthTensors(layers)) },
		keys: []synthKey{
			{"context_length", uint32(8192)},
			{"rope.freq_base", float32(10000)},
			{"attention.layer_norm_rms_epsilon", float32(1e-6)},
			{"attention.sliding_window", uint32(8)},
			{"attn_logit_softcapping", float32(5)},
			{"final_logit_softcapping", float32(30)},
		}, ablations: []synthKey{
			{"attn_logit_softcapping", float32(1e9)},
			{"final_logit_softcapping", float32(1e9)},
			{"attention.sliding_window", uint32(4096)},
		}, f32SHA256: "8bae772f1abe6573f983fa89974ed62483d27c66d7b870cebcc4df82fd7a7e47"},
	// OLMo 2 1B's metadata, with OLMo 3's sliding window on three layers
	// of four (window 8 here, so that the prompts pass it).
	{arch: "olmo2", layers: 4, seed: 7, tensors: olmo2SynthTensors, keys: []synthKey{
		{"rope.freq_base", float32(500000)},
		{"attention.layer_norm_rms_epsilon", float32(1e-6)},
		{"attention.sliding_window", uint32(8)},
	}, ablations: []synthKey{
		{"attention.sliding_window", uint32(0)},
	}, f32SHA256: "51c4a3c3896c88fb41a56268d9f5b06cb5f8411a8c03040c21c6c2138900cfcd"},
	// Ministral 3 3B's metadata: YaRN from 16K to 256K (the ramp covers
	// pairs 10-19 of 32 here), Llama 4's attention temperature 0.1 (1 up
	// to position 16K; TestMistral3AttnTemp shortens the original context
	// to reach it).
	{arch: "mistral3", layers: 4, seed: 8, keys: []synthKey{
		{"context_length", uint32(262144)},
		{"rope.freq_base", float32(1e6)},
		{"attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"rope.scaling.type", "yarn"},
		{"rope.scaling.factor", float32(16)},
		{"rope.scaling.original_context_length", uint32(16384)},
		{"rope.scaling.yarn_beta_fast", float32(32)},
		{"rope.scaling.yarn_beta_slow", float32(1)},
		{"rope.scaling.yarn_log_multiplier", float32(1)},
		{"attention.temperature_scale", float32(0.1)},
	}, ablations: []synthKey{
		{"rope.scaling.type", "linear"},
	}, f32SHA256: "b16551d5313f6aea8ebe5208a7bdbd5bbd3f879f22698e2d4427c0bb37ec7826"},
	// EXAONE 4.0 1.2B's metadata, with a llama3 frequency-factor table
	// (1 for the first 10 pairs, 16 from pair 20, linear between).
	{arch: "exaone4", layers: 4, seed: 9, tensors: exaone4SynthTensors, keys: []synthKey{
		{"context_length", uint32(65536)},
		{"rope.freq_base", float32(1e6)},
		{"attention.layer_norm_rms_epsilon", float32(1e-5)},
	}, ablations: []synthKey{
		// No key turns its block's parts off (they are tensors); the RoPE
		// base at least shows the rotation is there.
		{"rope.freq_base", float32(10000)},
	}, f32SHA256: "b3cbbf48376a2f4537e074c27f97a3c606ec4e09895285b748aa53f8048befa2"},
	// Command R7B's metadata but for a sliding window of 8, so that the
	// prompts pass it on layers 0-2 (layer 3 is global, without RoPE).
	{arch: "cohere2", layers: 4, seed: 10, tensors: cohere2SynthTensors, keys: []synthKey{
		{"context_length", uint32(8192)},
		{"rope.freq_base", float32(50000)},
		{"attention.layer_norm_epsilon", float32(1e-5)},
		{"attention.sliding_window", uint32(8)},
		{"logit_scale", float32(0.25)},
	}, ablations: []synthKey{
		{"attention.sliding_window", uint32(4096)},
		{"logit_scale", float32(1)},
	}, f32SHA256: "36f17a17fdd86a731c164beb48c87ead69a2ff377f87f0dc4c25e50f826db037"},
	// Gemma 4 in the E2B model's kind (synth_gemma4_test.go): both layer
	// shapes, KV sharing, per-layer inputs, an attn_k standing in for an
	// absent attn_v.
	{arch: "gemma4", layers: g4Layers, seed: 11, tensors: gemma4SynthTensors, keys: gemma4SynthKeys(),
		ablations: []synthKey{
			{"embedding_length_per_layer_input", uint32(0)},
			{"attention.sliding_window", uint32(4096)},
			{"rope.freq_base_swa", float32(1e6)},
			// A cap of 3, not none: 30 bends these logits by 0.045 only.
			{"final_logit_softcapping", float32(3)},
		}, f32SHA256: "375f0d0ad849d3082f8c007ba01018dc46ff6f9e1e54db82ed36f0f272793400"},
}

// cohere2SynthTensors is cohere2's set: the llama set without ffn_norm.
func cohere2SynthTensors(layers int) []synthTensor {
	var out []synthTensor
	for _, t := range llamaSynthTensors(layers) {
		if !strings.HasSuffix(t.name, "ffn_norm.weight") {
			out = append(out, t)
		}
	}
	return out
}

// exaone4SynthTensors is exaone4's set: olmo2's layout with per-head Q/K
// norms, a tied output and a llama3 frequency-factor table.
func exaone4SynthTensors(layers int) []synthTensor {
	return append(postNormSynthBlocks(layers, synthHeadDim, synthHeadDim),
		synthTensor{name: "output_norm.weight", shape: []int64{synthDim}},
		synthTensor{name: "rope_freqs.weight", shape: []int64{synthHeadDim / 2}, fill: func(i int) float32 {
			return float32(1 + 15*min(1, max(0, float64(i-10)/10)))
		}},
	)
}

// olmo2SynthTensors is olmo2's set: no input norms; Q and K norms over the
// whole projections, norms after attention and the FFN; an untied output.
func olmo2SynthTensors(layers int) []synthTensor {
	qDim, kvDim := int64(synthHeads*synthHeadDim), int64(synthKVHeads*synthHeadDim)
	return append(postNormSynthBlocks(layers, qDim, kvDim),
		synthTensor{name: "output_norm.weight", shape: []int64{synthDim}},
		synthTensor{name: "output.weight", shape: []int64{synthDim, 512}},
	)
}

// postNormSynthBlocks is the embedding and blocks that olmo2 and exaone4
// share: no input norms, Q and K norms of qNorm and kNorm weights, norms
// after attention and after the FFN.
func postNormSynthBlocks(layers int, qNorm, kNorm int64) []synthTensor {
	qDim, kvDim := int64(synthHeads*synthHeadDim), int64(synthKVHeads*synthHeadDim)
	ts := []synthTensor{{name: "token_embd.weight", shape: []int64{synthDim, 512}}}
	for il := 0; il < layers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		ts = append(ts,
			synthTensor{name: p + "attn_q.weight", shape: []int64{synthDim, qDim}},
			synthTensor{name: p + "attn_k.weight", shape: []int64{synthDim, kvDim}},
			synthTensor{name: p + "attn_v.weight", shape: []int64{synthDim, kvDim}},
			synthTensor{name: p + "attn_q_norm.weight", shape: []int64{qNorm}},
			synthTensor{name: p + "attn_k_norm.weight", shape: []int64{kNorm}},
			synthTensor{name: p + "attn_output.weight", shape: []int64{qDim, synthDim}},
			synthTensor{name: p + "post_attention_norm.weight", shape: []int64{synthDim}},
			synthTensor{name: p + "ffn_gate.weight", shape: []int64{synthDim, synthFF}},
			synthTensor{name: p + "ffn_up.weight", shape: []int64{synthDim, synthFF}},
			synthTensor{name: p + "ffn_down.weight", shape: []int64{synthFF, synthDim}},
			synthTensor{name: p + "post_ffw_norm.weight", shape: []int64{synthDim}},
		)
	}
	return ts
}

// withPostNorms is a tensor set with post_attention_norm after each
// attn_output and post_ffw_norm after each ffn_down (Gemma's names).
func withPostNorms(ts []synthTensor) []synthTensor {
	var out []synthTensor
	for _, t := range ts {
		out = append(out, t)
		for _, post := range []struct{ after, name string }{
			{"attn_output.weight", "post_attention_norm.weight"},
			{"ffn_down.weight", "post_ffw_norm.weight"},
		} {
			if p, ok := strings.CutSuffix(t.name, post.after); ok {
				out = append(out, synthTensor{name: p + post.name, shape: []int64{synthDim}})
			}
		}
	}
	return out
}

// phi3SynthTensors is phi3's set: attn_qkv and the fused ffn_up (gate rows
// first), and the model's LongRoPE factors for its 24 rotated pairs
// (short ones rising from 1 to 1.46, long ones from 1 to 58.5, as the
// published tables rise).
func phi3SynthTensors(layers int) []synthTensor {
	qkv := int64(synthHeads*synthHeadDim + 2*synthKVHeads*synthHeadDim)
	ts := []synthTensor{{name: "token_embd.weight", shape: []int64{synthDim, 512}}}
	for il := 0; il < layers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		ts = append(ts,
			synthTensor{name: p + "attn_norm.weight", shape: []int64{synthDim}},
			synthTensor{name: p + "attn_qkv.weight", shape: []int64{synthDim, qkv}},
			synthTensor{name: p + "attn_output.weight", shape: []int64{synthHeads * synthHeadDim, synthDim}},
			synthTensor{name: p + "ffn_norm.weight", shape: []int64{synthDim}},
			synthTensor{name: p + "ffn_up.weight", shape: []int64{synthDim, 2 * synthFF}},
			synthTensor{name: p + "ffn_down.weight", shape: []int64{synthFF, synthDim}},
		)
	}
	return append(ts,
		synthTensor{name: "output_norm.weight", shape: []int64{synthDim}},
		synthTensor{name: "rope_factors_long.weight", shape: []int64{24}, fill: func(i int) float32 { return 1 + 2.5*float32(i) }},
		synthTensor{name: "rope_factors_short.weight", shape: []int64{24}, fill: func(i int) float32 { return 1 + 0.02*float32(i) }},
	)
}

const (
	synthDim, synthHeads, synthKVHeads, synthHeadDim, synthFF = 256, 4, 2, 64, 512
)

// buildSynth writes spec's model, in F32 or (q8) Q8_0, into a GGUF image.
// Q8_0 quantizes the matrices with ggml's reference quantizer and keeps the
// vectors in F32, as llama-quantize does.
func buildSynth(t testing.TB, spec synthSpec, q8 bool) []byte {
	t.Helper()
	tokFile, err := gguf.Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer tokFile.Close()

	w := gguf.NewWriter()
	set := func(k string, v any) { require.NoError(t, w.Set(k, v)) }
	a := spec.arch
	set("general.architecture", a)
	name := spec.name
	if name == "" {
		name = "synth-" + a
	}
	set("general.name", name)
	set("general.file_type", map[bool]uint32{false: 0, true: 7}[q8])
	set(a+".context_length", uint32(4096))
	set(a+".embedding_length", uint32(synthDim))
	set(a+".block_count", uint32(spec.layers))
	set(a+".feed_forward_length", uint32(synthFF))
	set(a+".rope.dimension_count", uint32(synthHeadDim))
	set(a+".attention.head_count", uint32(synthHeads))
	set(a+".attention.head_count_kv", uint32(synthKVHeads))
	set(a+".attention.key_length", uint32(synthHeadDim))
	set(a+".attention.value_length", uint32(synthHeadDim))
	setSynthTail(t, tokFile, set, a, spec.keys, q8)

	rng := rand.New(rand.NewPCG(spec.seed, 0x5eed))
	add := func(name string, shape []int64, fill func(int) float32, keepF32 bool) {
		n := int(shape[0])
		rows := 1
		for _, d := range shape[1:] {
			rows *= int(d) // a 3-D tensor: per-expert matrices
		}
		vals := make([]float32, n*rows)
		for i := range vals {
			switch {
			case fill != nil:
				vals[i] = fill(i)
			case len(shape) == 1:
				vals[i] = float32(1 + 0.1*rng.NormFloat64())
			default:
				vals[i] = float32(0.08 * rng.NormFloat64())
			}
		}
		typ := gguf.F32
		if q8 && len(shape) >= 2 && !keepF32 {
			typ = gguf.Q8_0
		}
		addSynthTensor(t, w, name, typ, shape, vals)
	}
	tensors := spec.tensors
	if tensors == nil {
		tensors = llamaSynthTensors
	}
	for _, ts := range tensors(spec.layers) {
		add(ts.name, ts.shape, ts.fill, ts.keepF32)
	}

	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// TestWriteSynth checks that the generator's F32 files (not committed)
// hash to the recorded sha256 (with -update-synth it writes them under
// build/synth for making references). The Q8_0 files are
// TestWriteSynthModels'.
func TestWriteSynth(t *testing.T) {
	for _, spec := range synthSpecs {
		name := "synth-" + spec.arch + "-f32.gguf"
		t.Run(name, func(t *testing.T) {
			img := buildSynth(t, spec, false)
			sum := fmt.Sprintf("%x", sha256.Sum256(img))
			if *updateSynth {
				out := filepath.Join("..", "build", "synth", name)
				require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
				require.NoError(t, os.WriteFile(out, img, 0o644))
				t.Logf("wrote %s, sha256 %s", out, sum)
				return
			}
			require.Equal(t, spec.f32SHA256, sum, "the generator's %s differs from the one the references were made from", name)
		})
	}
}

// synthF32 is the path of spec's F32 file, which is not committed: the
// generator writes it into a temporary directory, checked against the
// recorded sha256.
func synthF32(t *testing.T, spec synthSpec) string {
	t.Helper()
	name := "synth-" + spec.arch + "-f32.gguf"
	require.NotEmpty(t, spec.f32SHA256, "%s has no recorded sha256", name)
	img := buildSynth(t, spec, false)
	require.Equal(t, spec.f32SHA256, fmt.Sprintf("%x", sha256.Sum256(img)), "the generator's %s differs from the one the references were made from", name)
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, img, 0o644))
	return path
}

// synthSpecOf is arch's synthetic model.
func synthSpecOf(t testing.TB, arch string) synthSpec {
	t.Helper()
	i := slices.IndexFunc(synthSpecs, func(s synthSpec) bool { return s.arch == arch })
	require.GreaterOrEqual(t, i, 0, "no synthetic spec for %s", arch)
	return synthSpecs[i]
}
