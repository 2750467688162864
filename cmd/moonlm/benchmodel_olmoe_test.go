package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// TestMakeBenchModelOLMoE: --arch olmoe writes a mixture of experts the
// engine runs, typed as llama.cpp's Q4_K_M types a model of 64 experts,
// the vocabulary padded to --vocab-size; the bench counts only the used
// experts' share of the expert tensors as read per token.
func TestMakeBenchModelOLMoE(t *testing.T) {
	vocab := shareddata.Path(t, "vocab/ggml-vocab-gpt-2.gguf")
	out := filepath.Join(t.TempDir(), "bench-olmoe.gguf")
	sh := benchShape{Arch: "olmoe", Dim: 256, Layers: 8, Heads: 4, KVHeads: 4, FFN: 256, Experts: 8, Used: 2, VocabSize: 50304}
	_, err := makeBenchModel(out, vocab, "q4_k_m", sh, 7, 2)
	require.NoError(t, err)
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	moreBits := map[int]bool{0: true, 3: true, 6: true, 7: true} // 8 layers: < 1, >= 7, (il-1)%3 == 2
	for il := 0; il < 8; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		want := gguf.Q4_K
		if moreBits[il] {
			want = gguf.Q6_K
		}
		for name, typ := range map[string]gguf.Type{
			"attn_v.weight": want, "ffn_down_exps.weight": want, "attn_q.weight": gguf.Q4_K,
			"ffn_gate_exps.weight": gguf.Q4_K, "ffn_up_exps.weight": gguf.Q4_K, "ffn_gate_inp.weight": gguf.F32,
			"attn_k_norm.weight": gguf.F32,
		} {
			tt, ok := f.Tensor(p + name)
			if assert.True(t, ok, p+name) {
				assert.Equal(t, typ, tt.Type, p+name)
			}
		}
	}
	gate, ok := f.Tensor("blk.0.ffn_gate_exps.weight")
	require.True(t, ok)
	assert.Equal(t, []int64{256, 256, 8}, gate.Shape)
	for name, typ := range map[string]gguf.Type{"token_embd.weight": gguf.Q4_K, "output.weight": gguf.Q6_K} {
		tt, ok := f.Tensor(name)
		if assert.True(t, ok, name) {
			assert.Equal(t, typ, tt.Type, name)
			assert.Equal(t, []int64{256, 50304}, tt.Shape, name)
		}
	}
	v, ok := f.Lookup("tokenizer.ggml.tokens")
	require.True(t, ok)
	toks, err := v.Array()
	require.NoError(t, err)
	assert.Equal(t, 50304, toks.Len())
	last, err := toks.String(50303)
	require.NoError(t, err)
	assert.Equal(t, "<|pad_50303|>", last)

	// Per token: everything but the embeddings (one row) and 6 of the 8
	// experts of each expert tensor.
	want := expertShareBytes(f, 50304, 8, 2, func(tt *gguf.Tensor) bool { return len(tt.Shape) == 3 })
	assert.Equal(t, want, decodeWeightBytes(f))
	assert.Equal(t, 50304, runBenchModel(t, out, []int32{464, 3290, 318}, 257).VocabSize)
}

// TestMakeBenchModelQwen3MoeTwin: --arch qwen3moe writes the olmoe
// shape as a Qwen3-MoE the engine runs, with the olmoe file's matrices
// (the same seed), and --reuse of the olmoe file gives the very same
// file without quantizing again.
func TestMakeBenchModelQwen3MoeTwin(t *testing.T) {
	vocab := shareddata.Path(t, "vocab/ggml-vocab-gpt-2.gguf")
	dir := t.TempDir()
	sh := benchShape{Arch: "olmoe", Dim: 256, Layers: 2, Heads: 2, KVHeads: 2, FFN: 256, Experts: 4, Used: 2}
	olmoe := filepath.Join(dir, "olmoe.gguf")
	_, err := makeBenchModel(olmoe, vocab, "q4_k_m", sh, 5, 2)
	require.NoError(t, err)
	sh.Arch = "qwen3moe"
	direct, reused := filepath.Join(dir, "direct.gguf"), filepath.Join(dir, "reused.gguf")
	_, err = makeBenchModel(direct, vocab, "q4_k_m", sh, 5, 2)
	require.NoError(t, err)
	sh.Reuse = olmoe
	_, err = makeBenchModel(reused, vocab, "q4_k_m", sh, 5, 2)
	require.NoError(t, err)
	a, err := os.ReadFile(direct)
	require.NoError(t, err)
	b, err := os.ReadFile(reused)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(a, b), "--reuse gives another file")

	fo, err := gguf.Open(olmoe)
	require.NoError(t, err)
	defer fo.Close()
	fq, err := gguf.Open(direct)
	require.NoError(t, err)
	defer fq.Close()
	for _, name := range []string{"blk.1.ffn_down_exps.weight", "blk.0.attn_v.weight", "output.weight", "blk.1.ffn_gate_inp.weight"} {
		x, ok1 := fo.Tensor(name)
		y, ok2 := fq.Tensor(name)
		require.True(t, ok1 && ok2, name)
		assert.True(t, bytes.Equal(x.Data, y.Data), "%s differs between the twins", name)
	}
	qn, ok := fq.Tensor("blk.0.attn_q_norm.weight")
	require.True(t, ok)
	assert.Equal(t, []int64{128}, qn.Shape)

	runBenchModel(t, direct, []int32{464, 3290, 318}, 257)
}
