package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// TestMakeBenchModelGptOSS: --arch gpt-oss writes a gpt-oss the engine
// runs, typed as llama-quantize's MXFP4_MOE types it (MXFP4 experts, Q8_0
// for every other matrix, F32 router and vectors), with heads of 64 on a
// hidden size that is not a multiple of 256; the bench counts only the
// used experts' share of the expert tensors (biases included) as read per
// token; mxfp4 is refused for other architectures and gpt-oss in another
// type.
func TestMakeBenchModelGptOSS(t *testing.T) {
	vocab := shareddata.Path(t, "vocab/ggml-vocab-gpt-2.gguf")
	out := filepath.Join(t.TempDir(), "bench-gpt-oss.gguf")
	sh := benchShape{Arch: "gpt-oss", Dim: 288, Layers: 2, Heads: 8, KVHeads: 2, FFN: 160, Experts: 4, Used: 2, VocabSize: 50304}
	_, err := makeBenchModel(out, vocab, "mxfp4", sh, 3, 2)
	require.NoError(t, err)
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	v, ok := f.Lookup("general.file_type")
	require.True(t, ok)
	ft, err := v.Uint64()
	require.NoError(t, err)
	assert.EqualValues(t, 38, ft, "LLAMA_FTYPE_MOSTLY_MXFP4_MOE")
	for il := 0; il < 2; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		for name, want := range map[string]struct {
			typ   gguf.Type
			shape []int64
		}{
			"attn_q.weight":        {gguf.Q8_0, []int64{288, 512}},
			"attn_k.weight":        {gguf.Q8_0, []int64{288, 128}},
			"attn_output.weight":   {gguf.Q8_0, []int64{512, 288}},
			"attn_q.bias":          {gguf.F32, []int64{512}},
			"attn_sinks.weight":    {gguf.F32, []int64{8}},
			"ffn_gate_inp.weight":  {gguf.F32, []int64{288, 4}},
			"ffn_gate_inp.bias":    {gguf.F32, []int64{4}},
			"ffn_gate_exps.weight": {gguf.MXFP4, []int64{288, 160, 4}},
			"ffn_up_exps.weight":   {gguf.MXFP4, []int64{288, 160, 4}},
			"ffn_down_exps.weight": {gguf.MXFP4, []int64{160, 288, 4}},
			"ffn_down_exps.bias":   {gguf.F32, []int64{288, 4}},
		} {
			tt, ok := f.Tensor(p + name)
			if assert.True(t, ok, p+name) {
				assert.Equal(t, want.typ, tt.Type, p+name)
				assert.Equal(t, want.shape, tt.Shape, p+name)
			}
		}
	}
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		tt, ok := f.Tensor(name)
		if assert.True(t, ok, name) {
			assert.Equal(t, gguf.Q8_0, tt.Type, name)
			assert.Equal(t, []int64{288, 50304}, tt.Shape, name)
		}
	}

	// Per token: everything but the embeddings (one row) and 2 of the 4
	// experts of each expert tensor, weights and biases (not the router).
	want := expertShareBytes(f, 50304, 4, 2, func(tt *gguf.Tensor) bool {
		return len(tt.Shape) >= 2 && tt.Shape[len(tt.Shape)-1] == 4 && !strings.HasSuffix(tt.Name, "ffn_gate_inp.weight")
	})
	assert.Equal(t, want, decodeWeightBytes(f))
	// More tokens than a four-token group, so the experts' batched
	// products run too.
	info := runBenchModel(t, out, []int32{464, 3290, 318, 257, 1332, 11, 290, 340, 373}, 257)
	assert.Equal(t, "gpt-oss", info.Arch)

	_, err = makeBenchModel(filepath.Join(t.TempDir(), "x.gguf"), vocab, "q8_0", sh, 3, 2)
	assert.ErrorContains(t, err, "mxfp4")
	sh.Arch = "llama"
	_, err = makeBenchModel(filepath.Join(t.TempDir(), "y.gguf"), vocab, "mxfp4", sh, 3, 2)
	assert.ErrorContains(t, err, "gpt-oss")
}
