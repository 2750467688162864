package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/hub/hubtest"
	"github.com/stretchr/testify/require"
)

// moonlm pull against a fake Hub on loopback, with HF_HOME in a temporary
// folder: the path on stdout, plain progress lines on stderr (not a
// terminal), then the same path offline from the cache.
func TestPull(t *testing.T) {
	h := hubtest.New(t)
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", h.Hub.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")

	out, stderr, st := runCLI(t, "", "pull", "org/model:q8_0")
	require.Equal(t, 0, st, stderr)
	p := strings.TrimSpace(out)
	require.Equal(t, filepath.Join(home, "hub", "models--org--model", "snapshots", h.Commit, "model-Q8_0.gguf"), p)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, h.Files["org/model"]["model-Q8_0.gguf"], b)
	require.Contains(t, stderr, "model-Q8_0.gguf  195.3 KiB / 195.3 KiB  100%")
	require.NotContains(t, stderr, "\r")

	_, stderr, st = runCLI(t, "", "pull", "-q", "org/gated:Q4_0")
	require.Equal(t, 1, st)
	require.Contains(t, stderr, "HTTP 401")
	require.Contains(t, stderr, "HF_TOKEN")
	t.Setenv("HF_TOKEN", h.Token)
	out, stderr, st = runCLI(t, "", "pull", "-q", "org/gated:Q4_0")
	require.Equal(t, 0, st, stderr)
	require.Empty(t, stderr)
	require.FileExists(t, strings.TrimSpace(out))

	h.Hub.Close()
	t.Setenv("HF_HUB_OFFLINE", "1")
	out, stderr, st = runCLI(t, "", "pull", "org/model:Q8_0")
	require.Equal(t, 0, st, stderr)
	require.Equal(t, p, strings.TrimSpace(out))
	_, stderr, st = runCLI(t, "", "pull", "org/model:Q4_K_M")
	require.Equal(t, 1, st)
	require.Contains(t, stderr, "offline")

	_, stderr, st = runCLI(t, "", "pull", "not-a-repo")
	require.NotEqual(t, 0, st)
	require.Contains(t, stderr, "org/name")
	_, stderr, st = runCLI(t, "", "pull")
	require.NotEqual(t, 0, st)
	require.Contains(t, stderr, "usage: moonlm pull")
}
