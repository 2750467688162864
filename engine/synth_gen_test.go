package engine

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
)

// updateSynth rewrites the synthetic models of engine/testdata/synth:
// go test ./engine/ -run TestWriteSynth -update-synth
var updateSynth = flag.Bool("update-synth", false, "rewrite engine/testdata/synth/synth-*.gguf")

// synthSpec is one synthetic model, shaped as the shared test data's synth
// files: hidden 256, 4 heads of 64, 2 KV heads, ffn 512, the stories260K
// tokenizer, weights N(0, 0.08²), norm weights 1 + 0.1·N(0,1).
type synthSpec struct {
	arch   string
	layers int
	seed   uint64
	// keys are the family's own metadata, after the shared dimensions.
	keys []synthKey
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
	}},
	// Granite 3.x's multipliers as its 2B models publish them (head size
	// 64 there too, so attention.scale 1/64 replaces 1/8).
	{arch: "granite", layers: 6, seed: 4, keys: []synthKey{
		{"rope.freq_base", float32(1e7)},
		{"attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"embedding_scale", float32(12)},
		{"attention.scale", float32(0.015625)},
		{"residual_scale", float32(0.22)},
		{"logit_scale", float32(8)},
	}},
}

const (
	synthDim, synthHeads, synthKVHeads, synthHeadDim, synthFF = 256, 4, 2, 64, 512
)

// buildSynth writes spec's model, in F32 or (q8) Q8_0, into a GGUF image.
// Q8_0 quantizes the matrices with ggml's reference quantizer and keeps the
// vectors in F32, as llama-quantize does.
func buildSynth(t *testing.T, spec synthSpec, q8 bool) []byte {
	t.Helper()
	tokFile, err := gguf.Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer tokFile.Close()

	w := gguf.NewWriter()
	set := func(k string, v any) { require.NoError(t, w.Set(k, v)) }
	a := spec.arch
	set("general.architecture", a)
	set("general.name", "synth-"+a)
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
	for _, k := range spec.keys {
		set(a+"."+k.name, k.v)
	}
	vocab := 0
	for _, k := range tokFile.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := tokFile.Lookup(k)
			set(k, v)
			if k == "tokenizer.ggml.tokens" {
				arr, err := v.Array()
				require.NoError(t, err)
				vocab = arr.Len()
			}
		}
	}
	require.Equal(t, 512, vocab)
	set(a+".vocab_size", uint32(vocab))
	if q8 {
		set("general.quantization_version", uint32(2))
	}

	rng := rand.New(rand.NewPCG(spec.seed, 0x5eed))
	add := func(name string, shape ...int64) {
		n := int(shape[0])
		rows := 1
		if len(shape) == 2 {
			rows = int(shape[1])
		}
		vals := make([]float32, n*rows)
		for i := range vals {
			if len(shape) == 1 {
				vals[i] = float32(1 + 0.1*rng.NormFloat64())
			} else {
				vals[i] = float32(0.08 * rng.NormFloat64())
			}
		}
		if q8 && len(shape) == 2 {
			rb := n / 32 * 34
			data := make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				kernels.QuantizeWeightRow(gguf.Q8_0, vals[r*n:(r+1)*n], data[r*rb:(r+1)*rb])
			}
			require.NoError(t, w.AddTensor(name, gguf.Q8_0, shape, data))
			return
		}
		data := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, shape, data))
	}
	qDim, kvDim := int64(synthHeads*synthHeadDim), int64(synthKVHeads*synthHeadDim)
	add("token_embd.weight", synthDim, int64(vocab))
	for il := 0; il < spec.layers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		add(p+"attn_norm.weight", synthDim)
		add(p+"attn_q.weight", synthDim, qDim)
		add(p+"attn_k.weight", synthDim, kvDim)
		add(p+"attn_v.weight", synthDim, kvDim)
		add(p+"attn_output.weight", qDim, synthDim)
		add(p+"ffn_norm.weight", synthDim)
		add(p+"ffn_gate.weight", synthDim, synthFF)
		add(p+"ffn_up.weight", synthDim, synthFF)
		add(p+"ffn_down.weight", synthFF, synthDim)
	}
	add("output_norm.weight", synthDim)

	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// TestWriteSynth remakes the synthetic models from their specs and checks
// that the committed files are what the generator writes (with
// -update-synth it rewrites them instead).
func TestWriteSynth(t *testing.T) {
	for _, spec := range synthSpecs {
		for _, q8 := range []bool{false, true} {
			name := "synth-" + spec.arch + map[bool]string{false: "-f32", true: "-Q8_0"}[q8] + ".gguf"
			t.Run(name, func(t *testing.T) {
				img := buildSynth(t, spec, q8)
				path := filepath.Join("testdata", "synth", name)
				if *updateSynth {
					require.NoError(t, os.WriteFile(path, img, 0o644))
					return
				}
				have, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.Equal(have, img), "%s differs from what the generator writes (rerun with -update-synth if the change is intended)", path)
			})
		}
	}
}
