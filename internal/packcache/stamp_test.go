//go:build linux

package packcache

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Put stamps what it wrote: a lazy Get trusts it and Verify reads nothing.
// Without the stamp the entry is verified, and that stamps it again.
func TestStampTrusts(t *testing.T) {
	c, _ := newConfig(t)
	c.LazyVerify = true
	k := testKey(11)
	data := payload(11, 300<<10+5)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	require.FileExists(t, stampPathOf(path))

	e := mustGet(t, c, k, int64(len(data)))
	assert.True(t, e.Trusted(), "a stamped, unchanged entry is trusted")
	require.NoError(t, e.Verify())
	assert.Equal(t, data, e.Data)
	require.NoError(t, e.Close())

	require.NoError(t, removeStamp(path))
	e = mustGet(t, c, k, int64(len(data)))
	assert.False(t, e.Trusted(), "no stamp: the data must be verified")
	require.NoError(t, e.Verify())
	require.NoError(t, e.Close())
	require.FileExists(t, stampPathOf(path), "a successful Verify stamps the entry")
	e = mustGet(t, c, k, int64(len(data)))
	assert.True(t, e.Trusted())
	require.NoError(t, e.Close())

	// A full (not lazy) Get checks the data whatever the stamp says.
	full := c
	full.LazyVerify = false
	e = mustGet(t, full, k, int64(len(data)))
	assert.False(t, e.Trusted())
	require.NoError(t, e.Close())
}

// Changing the entry file in any way voids its stamp: a byte written in
// place (corrupt data caught by Verify, which removes entry and stamp), a
// touch of its times, a rewrite of the same bytes.
func TestStampVoidedByChange(t *testing.T) {
	for _, how := range []string{"flip", "touch", "same-bytes"} {
		t.Run(how, func(t *testing.T) {
			c, _ := newConfig(t)
			c.LazyVerify = true
			k := testKey(12)
			data := payload(12, 200<<10+9)
			require.NoError(t, c.Put(k, data))
			path := entryPath(t, c, k)
			st, err := os.Stat(path)
			require.NoError(t, err)
			off := st.Size() - int64(len(data)) + int64(len(data))/3
			switch how {
			case "flip":
				flipByte(t, path, off)
			case "touch":
				old := time.Now().Add(-time.Hour)
				require.NoError(t, os.Chtimes(path, old, old))
			case "same-bytes":
				flipByte(t, path, off)
				flipByte(t, path, off)
			}
			e := mustGet(t, c, k, int64(len(data)))
			defer e.Close()
			assert.False(t, e.Trusted(), "a changed file is not trusted")
			err = e.Verify()
			if how != "flip" {
				require.NoError(t, err, "the bytes are intact")
				require.NoError(t, e.Close())
				e2 := mustGet(t, c, k, int64(len(data)))
				assert.True(t, e2.Trusted(), "verified again, stamped again")
				require.NoError(t, e2.Close())
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrCorrupt), "%v", err)
			requireGone(t, path)
			requireGone(t, stampPathOf(path))
		})
	}
}

// A damaged, short or foreign stamp is no stamp.
func TestStampDamaged(t *testing.T) {
	for _, how := range []string{"garbage", "short", "other-entry", "symlink"} {
		t.Run(how, func(t *testing.T) {
			c, _ := newConfig(t)
			c.LazyVerify = true
			k := testKey(13)
			data := payload(13, 100<<10)
			require.NoError(t, c.Put(k, data))
			require.NoError(t, c.Put(testKey(14), payload(14, 100<<10)))
			path := entryPath(t, c, k)
			sp := stampPathOf(path)
			b, err := os.ReadFile(sp)
			require.NoError(t, err)
			require.NoError(t, os.Remove(sp))
			switch how {
			case "garbage":
				b[20] ^= 1
				require.NoError(t, os.WriteFile(sp, b, 0o644))
			case "short":
				require.NoError(t, os.WriteFile(sp, b[:stampLen-1], 0o644))
			case "other-entry":
				o, err := os.ReadFile(stampPathOf(entryPath(t, c, testKey(14))))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(sp, o, 0o644))
			case "symlink":
				require.NoError(t, os.Symlink(stampPathOf(entryPath(t, c, testKey(14))), sp))
			}
			e := mustGet(t, c, k, int64(len(data)))
			assert.False(t, e.Trusted())
			require.NoError(t, e.Verify())
			require.NoError(t, e.Close())
		})
	}
}

// A trusted open refreshes the stamp's time, not the entry's (which would
// void the stamp), and eviction counts the later of the two as the last
// use. Eviction removes an evicted entry's stamp and stamps whose entry is
// gone.
func TestStampRecency(t *testing.T) {
	c, lb := newConfig(t)
	c.LazyVerify = true
	const n = 100_000
	a, b := testKey(21), testKey(22)
	require.NoError(t, c.Put(a, payload(21, n)))
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, c.Put(b, payload(22, n))) // by the entries' times, a is older
	time.Sleep(10 * time.Millisecond)
	entryTime := func(k Key) time.Time {
		st, err := os.Stat(entryPath(t, c, k))
		require.NoError(t, err)
		return st.ModTime()
	}
	before := entryTime(a)
	e := mustGet(t, c, a, n) // a: trusted, becomes the most recently used
	require.True(t, e.Trusted())
	require.NoError(t, e.Close())
	assert.Equal(t, before, entryTime(a), "a trusted open leaves the entry's times alone")
	assert.True(t, stampTime(entryPath(t, c, a)).After(entryTime(b)), "and refreshes the stamp's")
	e = mustGet(t, c, a, n)
	assert.True(t, e.Trusted(), "still trusted after the refresh")
	require.NoError(t, e.Close())

	// An orphan stamp (its entry gone) is removed by the next eviction.
	orphan := stampPathOf(entryPath(t, c, testKey(29)))
	require.NoError(t, os.WriteFile(orphan, make([]byte, stampLen), 0o644))

	fileSize := dataOffset(len(must(encodeKey(a)))) + n
	c.MaxBytes = 2 * fileSize
	require.NoError(t, c.Put(testKey(23), payload(23, n)))
	_, err := os.Stat(entryPath(t, c, a))
	assert.NoError(t, err, "a was used last (by its stamp) and stays")
	requireGone(t, entryPath(t, c, b))
	requireGone(t, stampPathOf(entryPath(t, c, b)))
	requireGone(t, orphan)
	assert.Len(t, lb.matching("evicted"), 1)
}
