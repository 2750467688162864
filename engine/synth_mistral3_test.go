package engine

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mistral3TempPath is the mistral3 Q8_0 file with an original context of
// 8, so that Llama 4's attention temperature (floor(p/8)) departs from 1
// within the prompts (and YaRN's correction dimensions move with it).
// With -update-synth it is also written under build/synth for making its
// reference.
func mistral3TempPath(t *testing.T) string {
	t.Helper()
	return synthVariantPath(t, "synth-mistral3-Q8_0.gguf", "mistral3.rope.scaling.original_context_length", 8, "synth-mistral3-Q8_0-temp.gguf")
}

// TestMistral3AttnTemp: past the original context the queries take Llama
// 4's attention temperature; against llama.cpp on the same file, exact in
// the llama.cpp numerics mode and within mistral3's Q8_0 spread in the
// default one. Without the temperature the file misses its reference.
func TestMistral3AttnTemp(t *testing.T) {
	path := mistral3TempPath(t)
	ref := synthRefPath("synth-mistral3-Q8_0.temp.ref.jsonl")
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	c := m.cfg
	require.NoError(t, m.Close())
	for pos := 0; pos < 8; pos++ {
		assert.Equal(t, float32(1), attnTemp(&c, pos), "position %d", pos)
	}
	assert.Equal(t, float32(1+0.1*math.Log(2)), attnTemp(&c, 8))
	assert.Equal(t, float32(1+0.1*math.Log(4)), attnTemp(&c, 31))

	checkSynthVariant(t, path, ref, "mistral3")

	_, worst := synthWorst(t, withKey(t, path, "mistral3.attention.temperature_scale", float32(0)), loadRefs(t, ref)[1])
	t.Logf("without the temperature: worst %.4f", worst)
	assert.Greater(t, worst, 0.05, "the temperature should move the logits")
}
