package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/internal/testmodel"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInspectStories260KJSON checks inspect's JSON on the real model against
// the facts the shared test data README gives about it (dim 64, 5 layers,
// 4 KV heads of 8, ffn 172, vocabulary 512, separate output.weight, all F32).
func TestInspectStories260KJSON(t *testing.T) {
	rep, err := inspectFile(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	b, err := rep.json()
	require.NoError(t, err)

	var out struct {
		Version  uint32                     `json:"version"`
		Metadata map[string]json.RawMessage `json:"metadata"`
		Tensors  []struct {
			Name   string  `json:"name"`
			Type   string  `json:"type"`
			Shape  []int64 `json:"shape"`
			Offset int64   `json:"offset"`
			Bytes  int64   `json:"bytes"`
		} `json:"tensors"`
		NParams    int64 `json:"n_params"`
		DataOffset int64 `json:"data_offset"`
	}
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	assert.Equal(t, uint32(3), out.Version)
	assert.JSONEq(t, `"llama"`, string(out.Metadata["general.architecture"]))
	assert.JSONEq(t, `64`, string(out.Metadata["llama.embedding_length"]))
	assert.JSONEq(t, `172`, string(out.Metadata["llama.feed_forward_length"]))
	assert.NotContains(t, out.Metadata, "llama.rope.freq_base")
	var toks struct {
		Type  string   `json:"type"`
		Count int      `json:"count"`
		Head  []string `json:"head"`
	}
	require.NoError(t, json.Unmarshal(out.Metadata["tokenizer.ggml.tokens"], &toks))
	assert.Equal(t, "str", toks.Type)
	assert.Equal(t, 512, toks.Count)
	assert.Contains(t, toks.Head, "<s>")

	// 3 global tensors and 9 per layer.
	require.Len(t, out.Tensors, 3+5*9)
	first := out.Tensors[0]
	assert.Equal(t, "token_embd.weight", first.Name)
	assert.Equal(t, "f32", first.Type)
	assert.Equal(t, []int64{64, 512}, first.Shape)
	assert.Equal(t, out.DataOffset, first.Offset)
	assert.Equal(t, int64(64*512*4), first.Bytes)

	// Parameters from the README's dimensions: embeddings and output head,
	// the final norm, and per layer q, k, v, o, two norms and three FFN
	// matrices.
	const dim, kv, ffn, vocab, layers = 64, 32, 172, 512, 5
	perLayer := dim*dim + 2*dim*kv + dim*dim + 2*dim + 3*dim*ffn
	assert.Equal(t, int64(2*dim*vocab+dim+layers*perLayer), out.NParams)
	var sum int64
	for _, tn := range out.Tensors {
		sum += tn.Bytes
	}
	assert.Equal(t, out.NParams*4, sum, "all F32")

	var text strings.Builder
	require.NoError(t, rep.writeText(&text))
	assert.Contains(t, text.String(), "blk.4.ffn_norm.weight")
	assert.Contains(t, text.String(), "parameters:   292800")
}

func TestInspectErrors(t *testing.T) {
	assert.Error(t, runInspect(nil))
	assert.Error(t, runInspect([]string{"a.gguf", "b.gguf"}))
	assert.Error(t, runInspect([]string{"--bogus", "a.gguf"}))
	err := runInspect([]string{"does-not-exist.gguf"})
	assert.ErrorContains(t, err, "does-not-exist.gguf")
}

// TestInspectPacked lists the matrices an open repacks: on a Q8_0 model
// every layer matrix and the tied head, never token_embd for lookups.
func TestInspectPacked(t *testing.T) {
	if kernels.Detect().Packed(gguf.Q8_0) == nil {
		t.Skipf("no packed q8_0 layout in the %s kernels of this CPU", kernels.Detect().Name())
	}
	vocab := shareddata.Path(t, "vocab/ggml-vocab-smollm2.gguf")
	out := filepath.Join(t.TempDir(), "m.gguf")
	_, err := makeBenchModel(out, vocab, "q8_0", benchShape{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512}, 3, 2)
	require.NoError(t, err)
	rep, err := inspectFile(out)
	require.NoError(t, err)
	require.NoError(t, rep.addPacked(out))
	assert.Equal(t, kernels.Detect().Name(), rep.PackedKernels)
	require.Len(t, rep.Packed, 2*7+1)
	l := kernels.Detect().Packed(gguf.Q8_0)
	var sum int64
	for _, p := range rep.Packed {
		assert.Equal(t, l.Name, p.Layout, p.Name)
		sum += int64(p.Bytes)
	}
	assert.Equal(t, sum, rep.PackedBytes)
	assert.Equal(t, "token_embd.weight (tied output)", rep.Packed[len(rep.Packed)-1].Name)
	var b strings.Builder
	require.NoError(t, rep.writeText(&b))
	assert.Contains(t, b.String(), "packed at open with the "+kernels.Detect().Name()+" kernels (15 matrices")
}

// writeTestModel writes internal/testmodel's tiny llama model with
// general.architecture set to arch.
func writeTestModel(t *testing.T, arch string) string {
	t.Helper()
	s := testmodel.Small
	s.Meta = map[string]any{"general.architecture": arch}
	b, err := testmodel.Build(s)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), arch+".gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// sortedFamilies is every registered family in the order inspect lists
// them; the list must hold at least the first families ever supported.
func sortedFamilies() []string {
	names := slices.Clone(arch.Names())
	slices.Sort(names)
	return names
}

// TestInspectArchitectureSupport: inspect reports a registered family as
// supported, and an unregistered one by name with the family it resembles
// ("none" for a state-space model), in text and JSON.
func TestInspectArchitectureSupport(t *testing.T) {
	cases := []struct {
		arch      string
		supported bool
		closest   string
		line      string
	}{
		{"llama", true, "", `arch:        "llama" (supported)`},
		{"internlm2", false, "llama", `arch:        "internlm2" (not supported; closest supported family: llama; supported: ` + strings.Join(sortedFamilies(), ", ") + ")"},
		{"mamba", false, "none", `arch:        "mamba" (not supported; closest supported family: none;`},
	}
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			rep, err := inspectFile(writeTestModel(t, c.arch))
			require.NoError(t, err)
			var text strings.Builder
			require.NoError(t, rep.writeText(&text))
			assert.Contains(t, text.String(), c.line)

			b, err := rep.json()
			require.NoError(t, err)
			var out struct {
				Arch struct {
					Name      string   `json:"name"`
					Supported bool     `json:"supported"`
					Closest   *string  `json:"closest_supported"`
					Families  []string `json:"supported_families"`
				} `json:"architecture"`
			}
			require.NoError(t, json.Unmarshal(b, &out), "%s", b)
			assert.Equal(t, c.arch, out.Arch.Name)
			assert.Equal(t, c.supported, out.Arch.Supported)
			if c.supported {
				assert.Nil(t, out.Arch.Closest, "no closest family for a supported one")
			} else {
				require.NotNil(t, out.Arch.Closest)
				assert.Equal(t, c.closest, *out.Arch.Closest)
			}
			assert.Contains(t, out.Arch.Families, "granite")
			assert.Contains(t, out.Arch.Families, "smollm3")
		})
	}
}
