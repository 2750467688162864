package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureStdout runs f with os.Stdout redirected and returns what it wrote.
func captureStdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	ferr := f()
	os.Stdout = old
	w.Close()
	return <-done, ferr
}

// TestGenerateCommandIDs: greedy --ids output equals llama.cpp's greedy
// continuation of the first stories260K reference prompt.
func TestGenerateCommandIDs(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	f, err := os.Open(shareddata.Path(t, "reference/stories260K.ref.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	require.True(t, sc.Scan())
	var ref struct {
		Prompt string  `json:"prompt"`
		Greedy []int32 `json:"greedy"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &ref))

	out, err := captureStdout(t, func() error {
		return runGenerate([]string{"-m", model, "-p", ref.Prompt, "--temp", "0", "-n", "20", "--ids", "-t", "1"})
	})
	require.NoError(t, err)
	var got []int32
	for _, w := range strings.Fields(out) {
		id, err := strconv.Atoi(w)
		require.NoError(t, err)
		got = append(got, int32(id))
	}
	assert.Equal(t, ref.Greedy[:20], got)

	text, err := captureStdout(t, func() error {
		return runGenerate([]string{"--model", model, "--prompt", ref.Prompt, "--temp=0", "-n", "20"})
	})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(text, ref.Prompt+", there was a little girl"), "prompt and continuation %q", text)
}

// TestGenerateCacheType: each KV cache type of --cache-type answers the
// question greedily (SmolLM2's answer leads by a wide margin).
func TestGenerateCacheType(t *testing.T) {
	model := shareddata.Model(t, shareddata.SmolLM2)
	for _, ct := range []string{"f16", "f32", "q8_0", "Q8_0"} {
		out, err := captureStdout(t, func() error {
			return runGenerate([]string{"-m", model, "-p", "The capital of France is", "--temp", "0", "-n", "4", "--cache-type", ct, "-t", "1"})
		})
		require.NoError(t, err, ct)
		assert.Contains(t, out, "Paris", ct)
	}
}

// TestCacheTypeFlag: each --cache-type (and --kv-f32) gives the session
// settings the engine reads as that cache (an F32 cache is KVF32: F32 is
// KVType's zero value, which the engine takes as f16).
func TestCacheTypeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		typ  gguf.Type
		f32  bool
	}{
		{nil, gguf.F32, false}, // the zero value: the engine's default, f16
		{[]string{"--cache-type", "f16"}, gguf.F16, false},
		{[]string{"--cache-type", "f32"}, gguf.F16, true},
		{[]string{"--kv-f32"}, gguf.F32, true},
		{[]string{"--cache-type", "q8_0"}, gguf.Q8_0, false},
		{[]string{"--kv-f32", "--cache-type", "q8_0"}, gguf.Q8_0, false},
	} {
		var ef engineFlags
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		ef.register(fs, 64)
		require.NoError(t, fs.Parse(c.args), "%v", c.args)
		p := ef.sessionParams(64)
		assert.Equal(t, c.typ, p.KVType, "%v", c.args)
		assert.Equal(t, c.f32, p.KVF32, "%v", c.args)
	}
}

func TestGenerateCommandErrors(t *testing.T) {
	assert.Error(t, runGenerate([]string{"-p", "x"}))
	assert.Error(t, runGenerate([]string{"-m", filepath.Join(t.TempDir(), "none.gguf"), "-p", "x"}))
	assert.Error(t, runGenerate([]string{"--bogus"}))
}

// TestPerplexity: the model scores its own greedy text (the golden story)
// as far more likely than the same words shuffled.
func TestPerplexity(t *testing.T) {
	m, err := engine.Open(shareddata.Path(t, "models/stories260K.gguf"), engine.ModelParams{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	text := strings.Repeat(string(golden), 2)
	res, err := perplexity(m, text, -1, engine.SessionParams{NCtx: 64}, nil)
	require.NoError(t, err)
	assert.Greater(t, res.chunks, 4)
	assert.Equal(t, res.chunks*(64-32-1), res.count)
	assert.Less(t, res.ppl, 3.0)
	assert.Greater(t, res.ppl, 1.0)

	words := strings.Fields(text)
	for i := range words { // a fixed permutation
		j := (i*7919 + 13) % len(words)
		words[i], words[j] = words[j], words[i]
	}
	shuffled, err := perplexity(m, strings.Join(words, " "), -1, engine.SessionParams{NCtx: 64}, nil)
	require.NoError(t, err)
	assert.Greater(t, shuffled.ppl, 3*res.ppl)

	_, err = perplexity(m, "too short", -1, engine.SessionParams{NCtx: 64}, nil)
	assert.ErrorIs(t, err, engine.ErrInvalidArgument)
}
