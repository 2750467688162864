package shareddata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindModel(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MOONLM_MODELS", dir)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", "")

	require.Equal(t, dir, ModelDirs()[0], "MOONLM_MODELS is searched first")
	assert.Equal(t, filepath.Join(repoRoot(), "build", "models"), ModelDirs()[1])
	t.Chdir(t.TempDir()) // outside the repository: no build/models to find things in

	const name = "test-model-that-is-never-fetched.gguf"
	_, err := FindModel(name)
	require.Error(t, err)
	assert.Contains(t, err.Error(), dir, "the error names the folders searched")

	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	_, err = FindModel(name)
	require.Error(t, err, "an empty file (an interrupted fetch) is not a model")

	require.NoError(t, os.WriteFile(p, []byte("GGUF"), 0o644))
	got, err := FindModel(name)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

func TestFindModelHint(t *testing.T) {
	t.Setenv("MOONLM_MODELS", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", "")
	t.Chdir(t.TempDir())
	_, err := FindModel(Gemma3)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "scripts/fetch-model.sh gemma3"), err.Error())
}
