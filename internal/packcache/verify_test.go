package packcache

import (
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lazily verified entry: Get checks only header, key and length; Verify
// reads the data and accepts an intact entry.
func TestLazyVerifyIntact(t *testing.T) {
	withParallel(t, 64<<10, 3)
	old := crcPiece
	crcPiece = 16 << 10 // several pieces per share
	t.Cleanup(func() { crcPiece = old })
	c, _ := newConfig(t)
	c.LazyVerify = true
	data := payload(3, 1<<20+4096+17)
	require.NoError(t, c.Put(testKey(1), data))
	e := mustGet(t, c, testKey(1), int64(len(data)))
	defer e.Close()
	require.NoError(t, e.Verify())
	assert.Equal(t, data, e.Data)
	assert.FileExists(t, e.Path())
}

// checksum with populating gives the same CRC as one pass, for sizes around
// the share and piece boundaries.
func TestChecksumPopulating(t *testing.T) {
	withParallel(t, 4096, 3)
	old := crcPiece
	crcPiece = 8192
	t.Cleanup(func() { crcPiece = old })
	for _, n := range []int{0, 1, 8191, 8192, 8193, 64<<10 + 1, 3*64<<10 - 5, 1 << 20} {
		data := payload(uint64(n)+7, n)
		assert.Equal(t, crc32.ChecksumIEEE(data), checksum(data, true), "n=%d", n)
	}
}

// One flipped byte of data: the lazy Get still hits (it does not read the
// data), Verify reports ErrCorrupt and removes the file, and a full Get
// (or the next lazy open after Verify) misses.
func TestLazyVerifyCorrupt(t *testing.T) {
	for _, where := range []string{"first", "middle", "last"} {
		t.Run(where, func(t *testing.T) {
			withParallel(t, 64<<10, 2)
			c, _ := newConfig(t)
			k := testKey(2)
			data := payload(4, 512<<10+3)
			require.NoError(t, c.Put(k, data))
			path := entryPath(t, c, k)
			st, err := os.Stat(path)
			require.NoError(t, err)
			i := map[string]int64{"first": 0, "middle": int64(len(data)) / 2, "last": int64(len(data)) - 1}[where]
			flipByte(t, path, st.Size()-int64(len(data))+i)

			lazy := c
			lazy.LazyVerify = true
			e := mustGet(t, lazy, k, int64(len(data)))
			err = e.Verify()
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrCorrupt), "%v", err)
			assert.Contains(t, err.Error(), "removed")
			require.NoError(t, e.Close())
			_, err = os.Lstat(path)
			assert.True(t, errors.Is(err, fs.ErrNotExist), "the corrupt entry is removed: %v", err)
			e, err = lazy.Get(k, int64(len(data)))
			require.NoError(t, err)
			assert.Nil(t, e, "a removed entry is a miss")
		})
	}
}

// A corrupt header or a wrong length is caught by the lazy Get itself.
func TestLazyGetChecksHeader(t *testing.T) {
	c, _ := newConfig(t)
	c.LazyVerify = true
	k := testKey(4)
	data := payload(6, 100<<10)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	flipByte(t, path, offDataLen) // the stored data length
	e, err := c.Get(k, int64(len(data)))
	require.NoError(t, err)
	assert.Nil(t, e, "a corrupt header is a miss")

	require.NoError(t, c.Put(k, data))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, st.Size()-1))
	e, err = c.Get(k, int64(len(data)))
	require.NoError(t, err)
	assert.Nil(t, e, "a truncated entry is a miss")
}

// The file of an unstamped entry shrinks between a lazy Get and Verify:
// Verify returns an error (the fault on the lost pages), it does not crash.
func TestLazyVerifyTruncated(t *testing.T) {
	for _, procs := range []int{1, 3} {
		withParallel(t, 64<<10, procs)
		c, _ := newConfig(t)
		c.LazyVerify = true
		k := testKey(5)
		data := payload(7, 1<<20)
		require.NoError(t, c.Put(k, data))
		require.NoError(t, removeStamp(entryPath(t, c, k))) // else Get trusts it and Verify reads nothing
		e := mustGet(t, c, k, int64(len(data)))
		require.False(t, e.Trusted())
		require.NoError(t, os.Truncate(e.Path(), 70<<10))
		err := e.Verify()
		require.Error(t, err, "procs=%d", procs)
		assert.Contains(t, err.Error(), "fault while reading")
		require.NoError(t, e.Close())
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x40
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}
