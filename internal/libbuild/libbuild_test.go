package libbuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The repository's file parses into go build flags, comments left out.
func TestArgsOfRepository(t *testing.T) {
	args, err := Args(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Contains(t, args, "-trimpath")
	for _, a := range args {
		assert.True(t, strings.HasPrefix(a, "-"), "%q is not a flag", a)
		assert.NotContains(t, a, "#")
	}
}

func TestArgsParsing(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, "capi"), 0o755))
	write := func(s string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "capi", "buildflags"), []byte(s), 0o644))
	}
	write("# comment\n\n  -trimpath  \n\t# indented comment\n-gcflags=fmt=-l\n")
	args, err := Args(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"-trimpath", "-gcflags=fmt=-l"}, args)

	write("-ldflags=-s -w\n")
	_, err = Args(root)
	assert.ErrorContains(t, err, "one argument a line")

	_, err = Args(t.TempDir())
	assert.Error(t, err, "a root without capi/buildflags")
}
