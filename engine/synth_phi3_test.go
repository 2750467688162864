package engine

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// rewriteTensors copies src into a temporary file, passing each tensor
// through edit, which returns the tensors to write in its place (none to
// drop it).
func rewriteTensors(t *testing.T, src string, edit func(ts *gguf.Tensor) []*gguf.Tensor) string {
	t.Helper()
	f, err := gguf.Open(src)
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	for _, ts := range f.Tensors() {
		for _, o := range edit(ts) {
			require.NoError(t, w.AddTensor(o.Name, o.Type, o.Shape, o.Data))
		}
	}
	return writeTempGGUF(t, w, "rewritten.gguf")
}

// splitQKV writes a fused attn_qkv matrix (F32 or Q8_0 rows) as separate
// attn_q, attn_k and attn_v tensors of q, kv and kv rows.
func splitQKV(t *testing.T, ts *gguf.Tensor, q, kv int64) []*gguf.Tensor {
	t.Helper()
	prefix := strings.TrimSuffix(ts.Name, "attn_qkv.weight")
	rb, err := ts.Type.RowBytes(ts.Shape[0])
	require.NoError(t, err)
	var out []*gguf.Tensor
	off := int64(0)
	for _, p := range []struct {
		name string
		rows int64
	}{{"attn_q.weight", q}, {"attn_k.weight", kv}, {"attn_v.weight", kv}} {
		out = append(out, &gguf.Tensor{Name: prefix + p.name, Type: ts.Type, Shape: []int64{ts.Shape[0], p.rows},
			Data: ts.Data[off*rb : (off+p.rows)*rb]})
		off += p.rows
	}
	require.Equal(t, ts.Shape[1], off)
	return out
}

// TestPhi3SeparateQKV: phi3 files with separate attn_q/k/v (as llama.cpp
// accepts them) give exactly the logits of the fused attn_qkv they were
// cut from; a file with neither is an error naming both.
func TestPhi3SeparateQKV(t *testing.T) {
	fused := synthF32(t, synthSpecOf(t, "phi3"))
	q, kv := int64(synthHeads*synthHeadDim), int64(synthKVHeads*synthHeadDim)
	separate := rewriteTensors(t, fused, func(ts *gguf.Tensor) []*gguf.Tensor {
		if strings.HasSuffix(ts.Name, "attn_qkv.weight") {
			return splitQKV(t, ts, q, kv)
		}
		return []*gguf.Tensor{ts}
	})
	logits := func(path string) []float32 {
		m, err := Open(path, ModelParams{Threads: 2})
		require.NoError(t, err)
		defer m.Close()
		toks, err := m.Tokenize("Once upon a time, there was a", true, false)
		require.NoError(t, err)
		s, err := m.NewSession(SessionParams{KVF32: true, NCtx: 64})
		require.NoError(t, err)
		defer s.Close()
		all := make([]float32, len(toks)*m.Info().VocabSize)
		require.NoError(t, s.PrefillAll(toks, all))
		return all
	}
	assert.Equal(t, logits(fused), logits(separate), "separate Q, K, V against the fused matrix")

	none := rewriteTensors(t, fused, func(ts *gguf.Tensor) []*gguf.Tensor {
		if ts.Name == "blk.2.attn_qkv.weight" {
			return nil
		}
		return []*gguf.Tensor{ts}
	})
	_, err := Open(none, ModelParams{Threads: 1})
	require.ErrorIs(t, err, ErrBadFile)
	assert.Contains(t, err.Error(), "missing tensor blk.2.attn_q.weight (or blk.2.attn_qkv.weight)")

	noUp := rewriteTensors(t, fused, func(ts *gguf.Tensor) []*gguf.Tensor {
		if ts.Name == "blk.1.ffn_up.weight" {
			return nil
		}
		return []*gguf.Tensor{ts}
	})
	_, err = Open(noUp, ModelParams{Threads: 1})
	require.ErrorIs(t, err, ErrBadFile)
	assert.Contains(t, err.Error(), "missing tensor blk.1.ffn_up.weight")

	// A fused up matrix of the unfused shape is refused naming its shape.
	halfUp := rewriteTensors(t, fused, func(ts *gguf.Tensor) []*gguf.Tensor {
		if ts.Name == "blk.0.ffn_up.weight" {
			rb, _ := ts.Type.RowBytes(ts.Shape[0])
			return []*gguf.Tensor{{Name: ts.Name, Type: ts.Type, Shape: []int64{ts.Shape[0], ts.Shape[1] / 2}, Data: ts.Data[:rb*ts.Shape[1]/2]}}
		}
		return []*gguf.Tensor{ts}
	})
	_, err = Open(halfUp, ModelParams{Threads: 1})
	require.ErrorIs(t, err, ErrBadFile)
	assert.Contains(t, err.Error(), "blk.0.ffn_up.weight: shape [256 512], want [256 1024]")
}

// phi3LongPath is the phi3 Q8_0 file with an original context of 256, so
// that a 512-position session takes the long RoPE factors (llama.cpp's
// rule: n_ctx > rope.scaling.original_context_length). With -update-synth
// it is also written under build/synth for making its reference.
func phi3LongPath(t *testing.T) string {
	t.Helper()
	return synthVariantPath(t, "synth-phi3-Q8_0.gguf", "phi3.rope.scaling.original_context_length", 256, "synth-phi3-Q8_0-long.gguf")
}

// TestPhi3LongFactors: beyond the original context the long LongRoPE
// factors apply; against llama.cpp on the same file, exact in the llama.cpp
// numerics mode and within phi3's Q8_0 spread in the default one.
func TestPhi3LongFactors(t *testing.T) {
	path := phi3LongPath(t)
	ref := synthRefPath("synth-phi3-Q8_0.long.ref.jsonl")
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	assert.Equal(t, m.ropeLong, m.ropeFactors(512))
	assert.Equal(t, m.ropeShort, m.ropeFactors(256))
	assert.NotEqual(t, m.ropeLong, m.ropeShort)
	require.NoError(t, m.Close())

	checkSynthVariant(t, path, ref, "phi3")
}
