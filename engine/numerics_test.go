package engine

import (
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolveNumerics(t *testing.T) {
	for _, tc := range []struct {
		env  string
		in   Numerics
		want Numerics
	}{
		{"", NumericsFast, NumericsFast},
		{"fast", NumericsFast, NumericsFast},
		{"llamacpp", NumericsFast, NumericsLlamaCpp},
		{"LlamaCpp", NumericsFast, NumericsLlamaCpp},
		{"llamacpp-norepack", NumericsFast, NumericsLlamaCppNoRepack},
		{"ik", NumericsFast, NumericsIk},
		{"ik_llama.cpp", NumericsFast, NumericsIk},
		{"llamacpp", NumericsIk, NumericsIk},
		// An explicit llama.cpp mode is not overridden by the environment.
		{"fast", NumericsLlamaCpp, NumericsLlamaCpp},
		{"llamacpp", NumericsLlamaCppNoRepack, NumericsLlamaCppNoRepack},
	} {
		t.Setenv("MOONLM_NUMERICS", tc.env)
		got, err := resolveNumerics(tc.in)
		require.NoError(t, err, "env %q", tc.env)
		assert.Equal(t, tc.want, got, "env %q, %v", tc.env, tc.in)
	}
	t.Setenv("MOONLM_NUMERICS", "exact")
	_, err := resolveNumerics(NumericsFast)
	assert.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	assert.ErrorContains(t, err, "MOONLM_NUMERICS")
	t.Setenv("MOONLM_NUMERICS", "")
	_, err = resolveNumerics(Numerics(7))
	assert.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	assert.Equal(t, "llamacpp-norepack", NumericsLlamaCppNoRepack.String())
	assert.Equal(t, "ik", NumericsIk.String())
}

// TestNumericsOpen checks what the llama.cpp and ik modes install (ik:
// its q8_2-reading layouts): ggml-order
// layouts for the q4_K and q6_K matrices of a Q4_K_M model (q4_K_8x8 where
// llama.cpp repacks, vec_dot/tiled elsewhere or without repacking), packed
// even when MOONLM_PACK=0 asks otherwise, and a clear error for a bad
// MOONLM_NUMERICS.
func TestNumericsOpen(t *testing.T) {
	path := shareddata.Path(t, "synth/synth-llama-Q4_K_M.gguf")
	t.Setenv("MOONLM_PACK", "0")
	layouts := func(n Numerics) map[string]string {
		m, err := Open(path, ModelParams{Threads: 1, Numerics: n})
		require.NoError(t, err)
		defer m.Close()
		assert.Equal(t, n, m.Numerics())
		out := map[string]string{}
		for _, pt := range m.PackedTensors() {
			out[pt.Name] = pt.Layout
		}
		if n != NumericsFast {
			assert.Equal(t, PackSourcePacked, m.OpenStats().PackSource)
		}
		return out
	}
	l := layouts(NumericsLlamaCpp)
	assert.Equal(t, "q4_K.ggml-8x8.v1", l["blk.0.attn_q.weight"])
	assert.Equal(t, "q6_K.ggml-vecdot-tiled.v1", l["token_embd.weight (tied output)"])
	l = layouts(NumericsLlamaCppNoRepack)
	assert.Equal(t, "q4_K.ggml-vecdot-tiled.v1", l["blk.0.attn_q.weight"])
	l = layouts(NumericsIk)
	assert.Equal(t, "q4_K.ik-q8_2.v1", l["blk.0.attn_q.weight"])
	assert.Equal(t, "q6_K.ik-q8_2.v1", l["token_embd.weight (tied output)"])
	t.Setenv("MOONLM_NUMERICS", "bogus")
	_, err := Open(path, ModelParams{})
	assert.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
}

// TestReferenceLayoutsKeepGGUFBytes: the layouts the reference modes read
// in place (layoutFor's inPlace) pack rows to the same bytes, so reading
// the mapping instead of a packed copy computes the same.
func TestReferenceLayoutsKeepGGUFBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []Numerics{NumericsLlamaCpp, NumericsLlamaCppNoRepack, NumericsIk} {
		m := &Model{numerics: n, kern: kernels.Detect()}
		for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K, gguf.F32} {
			const rows, cols = 16, 512
			src := make([]byte, rows*kernels.RowBytes(typ, cols))
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			mt := &kernels.Matrix{Type: typ, Rows: rows, Cols: cols, Data: src}
			l, inPlace := m.layoutFor(mt)
			if !inPlace {
				continue
			}
			require.Equal(t, len(src), l.PackedSize(rows, cols), "%v %v", n, typ)
			dst := make([]byte, len(src))
			l.PackRows(mt, dst, 0, rows/l.Rows)
			assert.Equal(t, src, dst, "%v: %s packs %v rows to other bytes", n, l.Name, typ)
		}
	}
}

// TestReferenceModesReadWeightsInPlace: in the reference modes the covered
// matrices read the file mapping itself: no packed copy is made.
func TestReferenceModesReadWeightsInPlace(t *testing.T) {
	path := shareddata.Path(t, "synth/synth-llama-Q4_K_M.gguf")
	for _, n := range []Numerics{NumericsLlamaCpp, NumericsLlamaCppNoRepack, NumericsIk} {
		m, err := Open(path, ModelParams{Threads: 1, Numerics: n})
		require.NoError(t, err)
		st := m.OpenStats()
		assert.Zero(t, st.PackedBytes, "%v: q4_K and q6_K are covered, nothing is copied", n)
		assert.Equal(t, len(m.PackedTensors()), st.PackedMatrices)
		for il := range m.layers {
			for _, r := range []arch.Role{arch.WQ, arch.WO, arch.Down} {
				mt := &m.layers[il].mats[r]
				require.NotNil(t, mt.Layout, "%v: layer %d role %d", n, il, r)
				assert.Equal(t, unsafe.SliceData(mt.Data), unsafe.SliceData(mt.Packed), "%v: layer %d role %d reads a copy", n, il, r)
			}
		}
		require.NoError(t, m.Close())
	}
}
