//go:build unix

package packcache

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// FuzzGet feeds arbitrary entry files to Get: it must never panic, a hit
// must be exactly the file's data with a matching checksum, and a miss
// must remove the file. The file is head (the fixed header and key; the
// padding up to the data offset is zeros, flipped bytes there are
// TestCorruptionIsMiss's job), then data, cut to cut bytes if cut > 0; the
// inputs stay small so the fuzzer's minimizer stays fast.
func FuzzGet(f *testing.F) {
	k := testKey(1)
	enc := must(encodeKey(k))
	off := int(dataOffset(len(enc)))
	for _, n := range []int{0, 1, 100} {
		data := payload(uint64(n), n)
		head := buildHeader(enc, [][]byte{data})[:fixedLen+len(enc)]
		f.Add(head, data, uint32(0), int8(0))
		f.Add(head, data, uint32(0), int8(1))
		f.Add(head, data, uint32(off+n/2), int8(0))
	}
	dir := f.TempDir()
	c := Config{Dir: dir, MaxBytes: 1 << 40}
	path := filepath.Join(dir, must(EntryName(k)))
	f.Fuzz(func(t *testing.T, head, data []byte, cut uint32, sizeDelta int8) {
		file := make([]byte, off+len(data))
		copy(file, head[:min(len(head), off)])
		copy(file[off:], data)
		if cut > 0 && int(cut) < len(file) {
			file = file[:cut]
		}
		size := int64(len(data)) + int64(sizeDelta)
		if size < 0 {
			return
		}
		if err := os.WriteFile(path, file, 0o644); err != nil {
			t.Fatal(err)
		}
		e, err := c.Get(k, size)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if e == nil {
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a miss left the file behind (%v)", err)
			}
			return
		}
		defer e.Close()
		if int64(len(e.Data)) != size || len(file) != off+len(data) || string(e.Data) != string(data) {
			t.Fatalf("hit with the wrong data")
		}
		if checksum(e.Data, false) != binary.LittleEndian.Uint32(file[offDataCRC:]) {
			t.Fatalf("hit with a checksum mismatch")
		}
	})
}
