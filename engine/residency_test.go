package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/moonlm/moonlm/kernels"
)

// presentPages counts the pages of b mapped in this process
// (/proc/self/pagemap bit 63), which is what RSS counts.
func presentPages(t *testing.T, b []byte) int {
	t.Helper()
	f, err := os.Open("/proc/self/pagemap")
	require.NoError(t, err)
	defer f.Close()
	ps := os.Getpagesize()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := p / uintptr(ps)
	n := int((p+uintptr(len(b))+uintptr(ps)-1)/uintptr(ps) - lo)
	buf := make([]byte, 8*n)
	_, err = f.ReadAt(buf, int64(lo)*8)
	require.NoError(t, err)
	c := 0
	for i := 0; i < n; i++ {
		if buf[8*i+7]&0x80 != 0 {
			c++
		}
	}
	return c
}

// mapScattered maps a temporary file of size bytes and reads 512
// scattered rows of it, as embedding lookups do; it returns the mapping
// and the sum of the bytes read.
func mapScattered(t *testing.T, size int) ([]byte, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "table")
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(path, data, 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Munmap(b) })
	sum := 0
	for i := 0; i < 512; i++ {
		sum += int(b[(i*7919*4099)%size])
	}
	require.GreaterOrEqual(t, presentPages(t, b), 256, "the reads made pages resident")
	return b, sum
}

// TestDropLookupPagesPerLayer: the per-layer token embeddings (Gemma 4)
// are dropped after lookups as the token embeddings are.
func TestDropLookupPagesPerLayer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts resident pages with /proc/self/pagemap, Linux only")
	}
	b, _ := mapScattered(t, 48<<20)
	small := make([]byte, 4096)
	m := &Model{embd: &kernels.Matrix{Data: small}, output: &kernels.Matrix{Data: small}, pleEmbd: &kernels.Matrix{Data: b}}
	m.dropLookupPages()
	require.LessOrEqual(t, presentPages(t, b), 1)
}

// TestDropResidency reads scattered rows of a file mapping, as embedding
// lookups do, and checks that dropResidency (as dropLookupPages calls it) unmaps the pages they (and the
// kernel's fault-around) made resident while the data stays readable.
func TestDropResidency(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts resident pages with /proc/self/pagemap, Linux only")
	}
	const size = 48 << 20
	b, sum := mapScattered(t, size)
	before := presentPages(t, b)
	dropResidency(b, 1, len(b), t.Logf) // an unaligned start: the partial first page stays
	after := presentPages(t, b)
	t.Logf("resident pages: %d after 512 scattered reads, %d after dropResidency", before, after)
	require.LessOrEqual(t, after, 1)
	sum2 := 0
	for i := 0; i < 512; i++ {
		sum2 += int(b[(i*7919*4099)%size])
	}
	require.Equal(t, sum, sum2, "the data reads back the same")
}
