package engine

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/moonlm/moonlm/engine/arch"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestResolveNumerics: every mode is taken as given (the zero value is the
// fast mode whatever MOONLM_NUMERICS says: the engine reads no
// environment), and an unknown mode is an invalid argument.
func TestResolveNumerics(t *testing.T) {
	t.Setenv("MOONLM_NUMERICS", "ik")
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp, NumericsLlamaCppNoRepack, NumericsIk} {
		got, err := resolveNumerics(n)
		require.NoError(t, err, "%v", n)
		assert.Equal(t, n, got)
	}
	for _, n := range []Numerics{-1, Numerics(7)} {
		_, err := resolveNumerics(n)
		assert.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
	}
	assert.Equal(t, "llamacpp-norepack", NumericsLlamaCppNoRepack.String())
	assert.Equal(t, "ik", NumericsIk.String())
}

// TestNumericsOpen checks what the llama.cpp and ik modes install (ik:
// its q8_2-reading layouts): ggml-order
// layouts for the q4_K and q6_K matrices of a Q4_K_M model (q4_K_8x8 where
// llama.cpp repacks, vec_dot/tiled elsewhere or without repacking), packed
// even when PackOff asks otherwise, and a clear error for an unknown mode.
func TestNumericsOpen(t *testing.T) {
	path := shareddata.Path(t, "synth/synth-llama-Q4_K_M.gguf")
	layouts := func(n Numerics) map[string]string {
		m, err := Open(path, ModelParams{Threads: 1, Numerics: n, Pack: PackOff})
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
	_, err := Open(path, ModelParams{Numerics: Numerics(9)})
	assert.True(t, errors.Is(err, ErrInvalidArgument), "%v", err)
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

// TestIkRefusesF32Cache: the ik numerics mode follows ik_llama.cpp's flash
// attention over an f16 cache only, so a session with an f32 cache is
// refused, naming it; the same model takes an f16 session, and the other
// modes take either.
func TestIkRefusesF32Cache(t *testing.T) {
	path := shareddata.Path(t, "synth/synth-llama-Q8_0.gguf")
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp, NumericsLlamaCppNoRepack, NumericsIk} {
		m, err := Open(path, ModelParams{Threads: 1, Numerics: n})
		require.NoError(t, err)
		s, err := m.NewSession(SessionParams{NCtx: 32, KVF32: true})
		if n == NumericsIk {
			require.ErrorIs(t, err, ErrUnsupported)
			assert.Contains(t, err.Error(), "f32 KV cache")
		} else {
			require.NoError(t, err, "%v", n)
			s.Close()
		}
		s, err = m.NewSession(SessionParams{NCtx: 32})
		require.NoError(t, err, "%v, f16 cache", n)
		s.Close()
		require.NoError(t, m.Close())
	}
}

// TestIkRefusesUncoveredType: SmolLM2's q4_1 matrices have no ik_llama.cpp
// layout, so the ik mode refuses the model at open naming the tensor and
// its type (the llama.cpp mode, which covers q4_1, opens it).
func TestIkRefusesUncoveredType(t *testing.T) {
	path := smolLM2Path(t)
	_, err := Open(path, ModelParams{Threads: 1, Numerics: NumericsIk})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "numerics mode ik")
	assert.Contains(t, err.Error(), "q4_1")
	m, err := Open(path, ModelParams{Threads: 1, Numerics: NumericsLlamaCpp})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

// TestIkRefusesBigBatch: from 32 tokens in one forward pass ik_llama.cpp
// multiplies q8_0 and q4_K weights another way, which the ik mode does not
// follow, so such a batch is refused, naming it, and leaves the session as
// it was; 31 tokens are taken, and the other modes take any batch.
func TestIkRefusesBigBatch(t *testing.T) {
	toks := make([]int32, 32)
	for i := range toks {
		toks[i] = int32(1 + i%50)
	}
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp, NumericsIk} {
		m, err := Open(shareddata.Path(t, "synth/synth-llama-Q8_0.gguf"), ModelParams{Threads: 2, Numerics: n})
		require.NoError(t, err)
		s, err := m.NewSession(SessionParams{NCtx: 64})
		require.NoError(t, err)
		err = s.Prefill(toks, nil)
		if n == NumericsIk {
			require.ErrorIs(t, err, ErrUnsupported)
			assert.Contains(t, err.Error(), "a batch of 32 tokens")
			assert.Zero(t, s.Pos())
			require.NoError(t, s.Prefill(toks[:31], nil))
		} else {
			require.NoError(t, err, "%v", n)
		}
		s.Close()
		require.NoError(t, m.Close())
	}
}

// TestIkRefusesSoftcap: ik_llama.cpp's flash attention is followed without
// soft-capped scores only, so the ik mode refuses the synthetic Gemma 2 file
// (attention soft-cap 5) at open, naming it; the llama.cpp mode opens it.
func TestIkRefusesSoftcap(t *testing.T) {
	path := synthModel(t, "synth-gemma2-Q8_0.gguf")
	_, err := Open(path, ModelParams{Threads: 1, Numerics: NumericsIk})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.ErrorContains(t, err, "numerics mode ik: attention soft-capping")
	m, err := Open(path, ModelParams{Threads: 1, Numerics: NumericsLlamaCpp})
	require.NoError(t, err)
	require.NoError(t, m.Close())
}

// TestIkRefusesPastOneKeyBlock: the ik mode follows ik_llama.cpp's flash
// attention while the keys fit one 128-key block, so a prompt that would go
// past it is refused, naming it, and leaves the session as it was.
func TestIkRefusesPastOneKeyBlock(t *testing.T) {
	m, err := Open(shareddata.Path(t, "synth/synth-llama-Q8_0.gguf"), ModelParams{Threads: 2, Numerics: NumericsIk})
	require.NoError(t, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 256})
	require.NoError(t, err)
	defer s.Close()
	toks := make([]int32, 129)
	for i := range toks {
		toks[i] = int32(1 + i%50)
	}
	err = s.Prefill(toks, nil)
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "129 positions")
	assert.Zero(t, s.Pos())
	// A batch of 32 or more tokens is refused too (TestIkRefusesBigBatch):
	// the 128 positions come in batches of up to 31.
	for done := 0; done < 128; done += 31 {
		require.NoError(t, s.Prefill(toks[done:min(done+31, 128)], nil))
	}
	err = s.Decode(1, make([]float32, m.Info().VocabSize))
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Equal(t, 128, s.Pos())
}
