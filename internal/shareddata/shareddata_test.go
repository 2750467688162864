package shareddata

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Find takes a file from the shared test data first, then a vocabulary or
// template from the llama.cpp tree, and says where it looked otherwise.
func TestFindLlamaCppFallback(t *testing.T) {
	shared, llama := t.TempDir(), t.TempDir()
	t.Setenv("MOONLM_TESTDATA", shared)
	t.Setenv("MOONLM_LLAMACPP_DIR", llama)
	write := func(p string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o644))
	}
	write(filepath.Join(shared, "vocab", "a.gguf"))
	write(filepath.Join(llama, "models", "a.gguf"))
	write(filepath.Join(llama, "models", "b.gguf.inp"))
	write(filepath.Join(llama, "models", "templates", "T.jinja"))
	write(filepath.Join(llama, "models", "stories260K.gguf"))

	p, err := Find("vocab/a.gguf")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(shared, "vocab", "a.gguf"), p, "the shared test data first")
	p, err = Find("vocab/b.gguf.inp")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(llama, "models", "b.gguf.inp"), p)
	p, err = Find("templates/T.jinja")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(llama, "models", "templates", "T.jinja"), p)

	// Only vocabularies and templates come from the llama.cpp tree.
	_, err = Find("models/stories260K.gguf")
	require.Error(t, err)
	_, err = Find("vocab/c.gguf")
	require.ErrorContains(t, err, "vocab/c.gguf absent")
	require.ErrorContains(t, err, "nor in the llama.cpp tree")

	t.Setenv("MOONLM_LLAMACPP_DIR", "")
	_, err = Find("vocab/b.gguf.inp")
	require.ErrorContains(t, err, "MOONLM_LLAMACPP_DIR")
	t.Setenv("MOONLM_TESTDATA", filepath.Join(shared, "none"))
	_, err = Find("vocab/a.gguf")
	require.ErrorContains(t, err, "shared test data not found")
}
