//go:build unix

package packcache

import (
	"hash/crc32"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crcCombine against hash/crc32 over the concatenation.
func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lens := []int{0, 1, 2, 3, 4, 7, 8, 255, 4096, 65537}
	for range 50 {
		lens = append(lens, r.IntN(20_000))
	}
	for _, la := range lens {
		lb := lens[r.IntN(len(lens))]
		a, b := payload(uint64(la), la), payload(uint64(lb)+1, lb)
		want := crc32.ChecksumIEEE(append(append([]byte(nil), a...), b...))
		got := crcCombine(crc32.ChecksumIEEE(a), crc32.ChecksumIEEE(b), uint64(lb))
		require.Equal(t, want, got, "len(A)=%d len(B)=%d", la, lb)
	}
}

// withParallel makes checksum split data into procs shares of at least
// chunk bytes for the rest of the test.
func withParallel(t *testing.T, chunk, procs int) {
	old, oldProcs := parallelChunk, runtime.GOMAXPROCS(procs)
	parallelChunk = chunk
	t.Cleanup(func() {
		parallelChunk = old
		runtime.GOMAXPROCS(oldProcs)
	})
}

func TestChecksumParallel(t *testing.T) {
	withParallel(t, 4096, 5)
	for _, n := range []int{0, 4095, 8192, 4096*5 + 17, 100_003, 1 << 20} {
		data := payload(uint64(n), n)
		assert.Equal(t, crc32.ChecksumIEEE(data), checksum(data, false), "n=%d", n)
	}
	// Get goes through the parallel path and still validates.
	c, _ := newConfig(t)
	data := payload(9, 1<<20+5)
	require.NoError(t, c.Put(testKey(1), data))
	e := mustGet(t, c, testKey(1), int64(len(data)))
	assert.Equal(t, data, e.Data)
	require.NoError(t, e.Close())
}

// A file that shrinks after mapping: the fault comes back as a reason, not
// a crash, whether the lost pages are read by the caller or by a helper
// goroutine of checksum.
func TestCheckEntryFault(t *testing.T) {
	t.Run("one goroutine", testCheckEntryFault)
	t.Run("helper goroutine", func(t *testing.T) {
		withParallel(t, 64<<10, 4)
		testCheckEntryFault(t)
	})
}

func testCheckEntryFault(t *testing.T) {
	c, _ := newConfig(t)
	k := testKey(1)
	enc := must(encodeKey(k))
	data := payload(1, 1<<20)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	off := dataOffset(len(enc))
	m, err := mapFile(f, off+int64(len(data)), true)
	require.NoError(t, err)
	defer unmap(m)
	require.Empty(t, checkEntry(m, enc, int64(len(data)), true), "valid before the truncation")

	require.NoError(t, os.Truncate(path, off+int64(len(data))/2))
	assert.Contains(t, checkEntry(m, enc, int64(len(data)), true), "fault while reading")
}
