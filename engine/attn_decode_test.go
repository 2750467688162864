package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSplitDecodeMatchesGrouped checks that a decode step's attention in
// two passes (attn_decode.go: scores split by positions among the threads,
// then the outputs by KV head) gives logits bit-identical to one task per
// KV head (attendGroup), with 1 to 3 threads (uneven splits), on models
// with grouped-query attention (SmolLM2: 3 query heads per KV head) and
// one with a sliding window of 8 and soft-capping (the gemma2 synthetic
// file), whose rows start past position 0 at every offset.
func TestSplitDecodeMatchesGrouped(t *testing.T) {
	models := map[string]string{
		"smollm2": smolLM2Path(t),
		"gemma2":  synthF32(t, synthSpecOf(t, "gemma2")),
	}
	for name, path := range models {
		for threads := 1; threads <= 3; threads++ {
			t.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(t *testing.T) {
				m, err := Open(path, ModelParams{Kernels: testKernels(t), Threads: threads})
				require.NoError(t, err)
				defer m.Close()
				vocab := m.Info().VocabSize
				run := func(split bool) []float32 {
					testPerKVHead, testSplitAlways = !split, split
					defer func() { testPerKVHead, testSplitAlways = false, false }()
					s, err := m.NewSession(SessionParams{NCtx: 256})
					require.NoError(t, err)
					defer s.Close()
					require.True(t, s.decScores != nil && s.ops.GroupAttention && !s.ops.GGMLDecode && s.ops.Attend == nil,
						"the session does not take the split decode")
					return prefillDecodeLogits(t, s, vocab, 120)
				}
				requireIdenticalLogits(t, run(true), run(false), vocab, "split", "grouped")
			})
		}
	}
}

// prefillDecodeLogits prefills s with a 37-token prompt, then decodes
// steps tokens, and returns every position's logits.
func prefillDecodeLogits(t *testing.T, s *Session, vocab, steps int) []float32 {
	t.Helper()
	prompt := make([]int32, 37)
	for i := range prompt {
		prompt[i] = int32(1 + i*37%(vocab-1))
	}
	out := make([]float32, (len(prompt)+steps)*vocab)
	require.NoError(t, s.PrefillAll(prompt, out))
	for i := range steps {
		at := (len(prompt) + i) * vocab
		require.NoError(t, s.Decode(int32(1+i*101%(vocab-1)), out[at:at+vocab]))
	}
	return out
}

// requireIdenticalLogits fails at the first logit where a and b differ.
func requireIdenticalLogits(t *testing.T, a, b []float32, vocab int, nameA, nameB string) {
	t.Helper()
	require.Len(t, b, len(a))
	for i := range a {
		if a[i] != b[i] {
			require.Failf(t, "logits differ", "position %d, logit %d: %s %v, %s %v", i/vocab, i%vocab, nameA, a[i], nameB, b[i])
		}
	}
}
