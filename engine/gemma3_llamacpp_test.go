package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemma3LlamaCppVaried runs Gemma 3 270M Q4_K_M in the llama.cpp
// numerics mode on prompts of varied kind and length against llama.cpp
// (testdata/gemma3-270m.varied.ref.jsonl, see testdata/README.md): every
// position checked must equal llama.cpp's log-probabilities. Besides short
// text, a chat turn, code, numbers and French, the lengths are chosen where
// batching matters: 65 and 70 tokens (a 64-token chunk plus 1-7, where
// llama.cpp still multiplies q6_K with its 8-token-and-more kernel) and 133
// tokens (the same past 128), and 786 tokens (two micro-batches, 512 + 274,
// and past the local layers' 512-position window). The last 12
// positions of each prompt and the first 12 greedy positions are checked:
// the 262144-row q8_0 output head on the pure-Go exact kernels costs most
// of a second per position.
func TestGemma3LlamaCppVaried(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Gemma 3 270M on the pure-Go exact kernels (minutes on 2 cores)")
	}
	var diffs []float64
	runRefFiles(t, refOptions{
		model: gemma3Path(t), refs: "testdata/gemma3-270m.varied.ref.jsonl",
		tol: 1e-5, gap: 0, parseSpecial: true, diffs: &diffs, numerics: NumericsLlamaCpp,
		nCtx: 1024, lastPrompt: 12, maxGreedy: 12,
	})
	require.NotEmpty(t, diffs)
	t.Logf("%d positions, largest difference %.6f", len(diffs), slices.Max(diffs))
	assert.LessOrEqual(t, slices.Max(diffs), 1e-5, "largest log-probability difference")
}
