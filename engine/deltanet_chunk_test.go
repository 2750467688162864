package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// relDiff is the largest absolute difference of a and b relative to the
// largest magnitude in b.
func relDiff(a, b []float32) float64 {
	var d, m float64
	for i := range b {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	return d / max(m, 1e-30)
}

// TestDeltaNetChunkedMatchesSteps: in the default numerics with chunks
// on, a prompt evaluated in chunks gives the logits of every position and
// the recurrent state the per-token kernel gives, to 2e-5 of their
// largest magnitude (measured: at most 4e-6), for prompts around the
// chunk boundaries (1, chunk-1, chunk, chunk+1 and 3*chunk+5 tokens of
// random ids) with the sized chunk and a short one, after a prompt that
// does not start at position 0 (a state that is not zero). The F32
// synthetic Qwen3.5 with an F32 KV cache keeps quantized activations and
// f16 keys from magnifying rounding differences.
const deltaChunkTol = 2e-5

func TestDeltaNetChunkedMatchesSteps(t *testing.T) {
	m, err := Open(synthQwen35F32(t), ModelParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	vocab := m.Info().VocabSize
	for _, chunk := range []int{deltaChunk, 8} {
		for _, n := range []int{1, chunk - 1, chunk, chunk + 1, 3*chunk + 5} {
			rng := rand.New(rand.NewPCG(uint64(n), uint64(chunk)))
			head := make([]int32, 5)
			prompt := make([]int32, n)
			for i := range head {
				head[i] = int32(rng.IntN(vocab))
			}
			for i := range prompt {
				prompt[i] = int32(rng.IntN(vocab))
			}
			run := func(c int) ([]float32, []float32) {
				s := newHybridSession(t, m, SessionParams{NCtx: 512, KVF32: true})
				require.NotNil(t, s.dn, "the default numerics' DeltaNet scratch")
				s.dn.chunk = c
				require.NoError(t, s.Prefill(head, nil))
				lg := make([]float32, n*vocab)
				require.NoError(t, s.PrefillAll(prompt, lg))
				return lg, append([]float32(nil), s.rec.state...)
			}
			stepLg, stepState := run(0)
			chLg, chState := run(chunk)
			t.Logf("chunk %d, %d tokens: logits %.2g, state %.2g", chunk, n, relDiff(chLg, stepLg), relDiff(chState, stepState))
			require.LessOrEqual(t, relDiff(chLg, stepLg), deltaChunkTol, "chunk %d, %d tokens: logits", chunk, n)
			require.LessOrEqual(t, relDiff(chState, stepState), deltaChunkTol, "chunk %d, %d tokens: recurrent state", chunk, n)
		}
	}
}

// TestDeltaNetReferenceTokenByToken: the reference numerics keep ggml's
// token-by-token recurrence (no chunked scratch), and the default
// numerics' decode allocates nothing.
func TestDeltaNetReferenceTokenByToken(t *testing.T) {
	m, err := Open(synthModel(t, "synth-qwen35-Q8_0.gguf"), ModelParams{Threads: 2, Numerics: NumericsLlamaCpp})
	require.NoError(t, err)
	s := newHybridSession(t, m, SessionParams{})
	require.Nil(t, s.dn)
	s.Close()
	m.Close()

	m = openQwen35(t)
	s = newHybridSession(t, m, SessionParams{})
	require.NotNil(t, s.dn)
	lg := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill(hybA, lg))
	tok := int32(5)
	allocs := testing.AllocsPerRun(20, func() {
		require.NoError(t, s.Decode(tok, lg))
		tok = (tok + 7) % 500
	})
	require.Zero(t, allocs, "allocations per decoded token")
}
