package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchStories260KJSON runs the bench logic on the real stories260K with
// tiny phases and checks that every field the issue asks for is present in
// the JSON and plausible.
func TestBenchStories260KJSON(t *testing.T) {
	path := shareddata.Path(t, "models/stories260K.gguf")
	st, err := os.Stat(path)
	require.NoError(t, err)
	res, err := benchRun(benchConfig{Path: path, Threads: 2, Prompt: 16, Gen: 8, Rounds: 3,
		PGPrompt: 8, PGGen: 4, Warmup: true})
	require.NoError(t, err)
	b, err := json.Marshal(res)
	require.NoError(t, err)

	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	for _, k := range []string{"open_ms", "prefill_tok_s", "decode_tok_s", "ttft_ms", "peak_rss_bytes",
		"allocs_per_token", "kernels", "threads", "open", "pg_tok_s", "kv_bytes"} {
		assert.Contains(t, out, k)
	}
	num := func(k string) float64 {
		v, ok := out[k].(float64)
		require.True(t, ok, "%s is %T (%v)", k, out[k], out[k])
		return v
	}
	assert.Equal(t, kernels.Variant, out["kernels"])
	assert.Equal(t, 2.0, num("threads"))
	assert.Equal(t, float64(st.Size()), num("file_bytes"))
	assert.Equal(t, "llama", out["arch"])
	assert.Greater(t, num("open_ms"), 0.0)
	assert.Less(t, num("open_ms"), 10000.0)
	open := out["open"].(map[string]any)
	for _, k := range []string{"map_ms", "parse_ms", "build_ms"} {
		v, _ := open[k].(float64)
		assert.Greater(t, v, 0.0, k)
		assert.LessOrEqual(t, v, num("open_ms"), k)
	}
	assert.Greater(t, num("prefill_tok_s"), 0.0)
	assert.Greater(t, num("decode_tok_s"), 0.0)
	assert.Greater(t, num("pg_tok_s"), 0.0)
	// 16 tokens at the measured rate take the time to first token.
	assert.InDelta(t, 16/num("prefill_tok_s")*1e3, num("ttft_ms"), num("ttft_ms")*0.5+0.01)
	assert.Len(t, res.PrefillAll, 3)
	assert.Len(t, res.DecodeAll, 3)
	// The process holds at least the mapped model after touching all of it
	// and far less than a gigabyte.
	assert.Greater(t, num("peak_rss_bytes"), float64(st.Size()))
	assert.Less(t, num("peak_rss_bytes"), float64(1<<30))
	// Decode allocates nothing (engine contract); allow a stray runtime
	// allocation in another goroutine.
	assert.Less(t, num("allocs_per_token"), 0.5)
	assert.GreaterOrEqual(t, num("allocs_per_token"), 0.0)
	// 5 layers x 4 KV heads x 8 dims, keys and values, f16, 16 positions
	// (max(prompt 16, gen 8 + 1, pg 8 + 4)).
	assert.Equal(t, float64(2*2*5*4*8*16), num("kv_bytes"))
	// Decode reads every tensor but one row of the untied token_embd.
	assert.Less(t, num("weight_bytes_per_token"), num("file_bytes"))
}

func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{},                         // no model
		{"-m", "x", "--pg", "8"},   // no N
		{"-m", "x", "--pg", "0,4"}, // zero P
		{"-m", "x", "extra"},
		{"-m", "x", "-r", "0"},
	} {
		assert.Error(t, runBench(args), "%q", args)
	}
	err := runBench([]string{"-m", filepath.Join(t.TempDir(), "absent.gguf")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "absent.gguf")
}

func TestBenchMedian(t *testing.T) {
	assert.Equal(t, 0.0, median(nil))
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
	xs := []float64{3, 1, 2}
	median(xs)
	assert.Equal(t, []float64{3, 1, 2}, xs, "median must not reorder its input")
}

// maxLibraryBytes is the deployment-size budget of the stripped shared
// library (issue 8: llama.cpp's CPU libraries together are about 3.1 MB).
const maxLibraryBytes = 4_000_000

// TestLibrarySize fails if the stripped libmoonlm.so exceeds 4 MB (10^6 bytes). It
// measures $MOONLM_LIBRARY when that file exists (make exports it), else it
// builds the library as the Makefile does into a temporary folder.
func TestLibrarySize(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the size budget is for the Linux shared library")
	}
	lib := os.Getenv("MOONLM_LIBRARY")
	if st, err := os.Stat(lib); lib == "" || err != nil || st.IsDir() {
		if testing.Short() {
			t.Skip("-short: not building the shared library (set MOONLM_LIBRARY to measure one)")
		}
		if _, err := exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler to build the shared library with")
		}
		lib = filepath.Join(t.TempDir(), "libmoonlm.so")
		mapFile, err := filepath.Abs(filepath.Join("..", "..", "capi", "moonlm.map"))
		require.NoError(t, err)
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath",
			"-ldflags", "-s -w -extldflags=-Wl,-soname,libmoonlm.so.0,--version-script="+mapFile,
			"-o", lib, "../../capi")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Run(), "building the library: %s", stderr.String())
	}
	st, err := os.Stat(lib)
	require.NoError(t, err)
	t.Logf("%s: %d bytes (%.2f MiB)", lib, st.Size(), float64(st.Size())/(1<<20))
	assert.LessOrEqual(t, st.Size(), int64(maxLibraryBytes), "stripped library %s is over the 4 MB budget", lib)
}
