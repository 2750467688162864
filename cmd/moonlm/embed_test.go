package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// moonlm embed prints what Model.Embed computes, as lines or JSON, and
// --rerank what Model.Rerank does, on the engine's generated synthetic BERT.
func TestEmbedCommand(t *testing.T) {
	synthBert := shareddata.SynthModel(t, "synth-bert-Q8_0.gguf")
	out, err := captureStdout(t, func() error {
		return runEmbed([]string{"-m", synthBert, "-t", "1", "-p", "hello world", "-p", "a", "--normalize"})
	})
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2)
	m, err := engine.Open(synthBert, engine.ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	want, err := m.Embed([]string{"hello world", "a"}, engine.EmbedParams{Normalize: true})
	require.NoError(t, err)
	for i, l := range lines {
		fields := strings.Fields(l)
		require.Len(t, fields, 256)
		for j, f := range fields {
			x, err := strconv.ParseFloat(f, 32)
			require.NoError(t, err)
			assert.InDelta(t, want[i][j], x, 1e-7*math.Max(1, math.Abs(x)))
		}
	}

	// JSON, texts from a file, pooling none: one entry per token.
	file := filepath.Join(t.TempDir(), "texts.txt")
	require.NoError(t, os.WriteFile(file, []byte("hi\n\nthere\n"), 0o644))
	out, err = captureStdout(t, func() error {
		return runEmbed([]string{"-m", synthBert, "-t", "1", "-f", file, "--pooling", "none", "--json"})
	})
	require.NoError(t, err)
	var doc struct {
		Data []struct {
			Index     int       `json:"index"`
			Text      int       `json:"text"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	hi, _ := m.Tokenize("hi", true, false)
	there, _ := m.Tokenize("there", true, false)
	require.Len(t, doc.Data, len(hi)+len(there))
	assert.Equal(t, 1, doc.Data[len(doc.Data)-1].Text)
	assert.Len(t, doc.Data[0].Embedding, 256)

	out, err = captureStdout(t, func() error {
		return runEmbed([]string{"-m", synthBert, "-t", "1", "--rerank", "what is a panda?", "-p", "hi"})
	})
	require.NoError(t, err)
	scores, err := m.Rerank("what is a panda?", []string{"hi"})
	require.NoError(t, err)
	assert.Equal(t, fmtFloat(scores[0])+"\thi\n", out)

	for _, bad := range [][]string{
		{"-m", synthBert},
		{"-m", synthBert, "-p", "x", "--pooling", "max"},
		{"-m", synthBert, "-p", "x", "extra"},
	} {
		assert.Error(t, runEmbed(bad), "%v", bad)
	}
}
