package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkSynthF32 runs an F32 synthetic model against its llama.cpp reference
// (testdata/synth/NAME.ref.jsonl) with an F32 KV cache, under the parity
// rules: top-10 log-probabilities within 2e-3, top-1 where the top-2 gap
// exceeds 0.01, greedy ids up to the first near-tie.
func checkSynthF32(t *testing.T, model, name string) {
	t.Helper()
	var diffs []float64
	runRefFiles(t, refOptions{
		model: model, refs: synthRefPath(name + ".ref.jsonl"), kvf32: true,
		tol: 2e-3, gap: 0.01, prompts: synthPrompts(t), diffs: &diffs,
	})
	require.NotEmpty(t, diffs)
	t.Logf("%d positions, worst log-probability difference %.5f", len(diffs), slices.Max(diffs))
}

// checkSynthQ8 runs the generated Q8_0 file NAME.gguf (synthModel), in the default
// numerics and an F16 KV cache, against llama.cpp's default run: every
// difference within maxDiff and the median within median.
func checkSynthQ8(t *testing.T, name string, maxDiff, median float64) {
	t.Helper()
	var diffs []float64
	runRefFiles(t, refOptions{
		model: synthModel(t, name+".gguf"), refs: synthRefPath(name + ".ref.jsonl"),
		tol: maxDiff, gap: maxDiff, prompts: synthPrompts(t), diffs: &diffs,
	})
	require.NotEmpty(t, diffs)
	slices.Sort(diffs)
	med := diffs[len(diffs)/2]
	t.Logf("%d positions: median %.4f, max %.4f", len(diffs), med, diffs[len(diffs)-1])
	assert.LessOrEqual(t, med, median, "median log-probability difference")
}

// synthVariantPath is the generated Q8_0 file BASE (synthModel) with key
// set to v. With -update-synth it is also written to build/synth/OUT for
// making its reference.
func synthVariantPath(t *testing.T, base, key string, v uint32, out string) string {
	t.Helper()
	path := withKey(t, synthModel(t, base), key, v)
	if *updateSynth {
		img, err := os.ReadFile(path)
		require.NoError(t, err)
		out := filepath.Join("..", "build", "synth", out)
		require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
		require.NoError(t, os.WriteFile(out, img, 0o644))
	}
	return path
}

// checkSynthVariant runs a variant Q8_0 file against its reference: exact
// (within 1e-5) in the llama.cpp numerics mode, and within arch's measured
// Q8_0 spread in the default one.
func checkSynthVariant(t *testing.T, path, ref, arch string) {
	t.Helper()
	var diffs []float64
	runRefFiles(t, refOptions{model: path, refs: ref, tol: 1e-5, gap: 0, prompts: synthPrompts(t),
		diffs: &diffs, numerics: NumericsLlamaCpp})
	require.NotEmpty(t, diffs)
	assert.LessOrEqual(t, slices.Max(diffs), 1e-5)

	spread := synthNewQ8Spread[arch]
	diffs = nil
	runRefFiles(t, refOptions{model: path, refs: ref, tol: spread.max, gap: spread.max, prompts: synthPrompts(t), diffs: &diffs})
	require.NotEmpty(t, diffs)
	t.Logf("%d positions, worst %.4f", len(diffs), slices.Max(diffs))
}

// checkSynthLlamaCppExact runs the generated NAME.gguf in the llama.cpp
// numerics mode against NAME.ref.jsonl (F16 KV cache) or, with kvf32,
// NAME.kvf32.ref.jsonl: every prompt and greedy position equal to 1e-5 (the
// rounding of the float64 log-sum-exp).
func checkSynthLlamaCppExact(t *testing.T, name string, kvf32 bool) {
	t.Helper()
	ref := name + map[bool]string{false: ".ref.jsonl", true: ".kvf32.ref.jsonl"}[kvf32]
	var diffs []float64
	runRefFiles(t, refOptions{
		model: synthModel(t, name+".gguf"), refs: synthRefPath(ref), kvf32: kvf32,
		tol: 1e-5, gap: 0, prompts: synthPrompts(t), diffs: &diffs, numerics: NumericsLlamaCpp,
	})
	require.NotEmpty(t, diffs)
	assert.LessOrEqual(t, slices.Max(diffs), 1e-5, "largest log-probability difference")
}
