//go:build unix

package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A file truncated after Open mapped it but before the header was read is
// ErrMapping, not a SIGBUS that ends the process.
func TestParseMappedFault(t *testing.T) {
	w := NewWriter()
	for i := 0; i < 4096; i++ {
		require.NoError(t, w.Set("k"+strconv.Itoa(i), "a value of some length"))
	}
	var b bytes.Buffer
	_, err := w.WriteTo(&b)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	fd, err := os.Open(path)
	require.NoError(t, err)
	defer fd.Close()
	data, err := unix.Mmap(int(fd.Fd()), 0, b.Len(), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(data)
	require.NoError(t, os.Truncate(path, 0))
	_, err = parseMapped(data)
	require.ErrorIs(t, err, ErrMapping)
}
