package packcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A stamp records that an entry's data matched its checksum, and the state
// of the entry file (device, inode, size, modification and change times)
// when it was verified: a later open that finds the file in the same state
// trusts the data without reading it again. Every way of changing the file
// through the file system (a write, a truncation, a rename over it, a write
// through a shared mapping) changes its change time (ctime), which user
// space cannot set back, or its inode; so a file in the stamped state holds
// the bytes that were verified. What a stamp cannot see is a change below
// the file system (a disk that flips bits without reporting an error):
// deleting the stamp files makes every open verify again.
//
// A stamp is a small file beside its entry, named like it with the suffix
// ".ok" instead of ".bin":
//
//	offset  field (little-endian)
//	0       magic "MOONLMOK"
//	8       u32 format version (FormatVersion)
//	12      u32 the entry's data checksum (as in its header)
//	16      u64 device, u64 inode, i64 size, i64 mtime ns, i64 ctime ns
//	56      u32 CRC-32C of bytes [0, 56)
//
// Trusted opens refresh the stamp's modification time rather than the
// entry's (which would change the entry's ctime and void the stamp), and
// eviction takes the later of the two as an entry's last use.
const (
	stampMagic  = "MOONLMOK"
	stampSuffix = ".ok"
	stampLen    = 60
)

// fileState is the state of an entry file that a stamp records.
type fileState struct {
	Dev, Ino           uint64
	Size, Mtime, Ctime int64
}

// stampPathOf is the stamp file's path for the entry at path.
func stampPathOf(path string) string {
	return strings.TrimSuffix(path, entrySuffix) + stampSuffix
}

// isStampName reports whether name is a stamp file's name.
func isStampName(name string) bool {
	return strings.HasPrefix(name, entryPrefix) && strings.HasSuffix(name, stampSuffix) &&
		isHex(name[len(entryPrefix):len(name)-len(stampSuffix)], nameHexLen)
}

func encodeStamp(crc uint32, s fileState) []byte {
	b := make([]byte, 0, stampLen)
	le := binary.LittleEndian
	b = append(b, stampMagic...)
	b = le.AppendUint32(b, FormatVersion)
	b = le.AppendUint32(b, crc)
	b = le.AppendUint64(b, s.Dev)
	b = le.AppendUint64(b, s.Ino)
	b = le.AppendUint64(b, uint64(s.Size))
	b = le.AppendUint64(b, uint64(s.Mtime))
	b = le.AppendUint64(b, uint64(s.Ctime))
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// stampMatches reports whether the stamp file at sp says that the entry
// with data checksum crc, now in state s, was verified in that state. A
// missing, short or damaged stamp is no match.
func stampMatches(sp string, crc uint32, s fileState) bool {
	f, err := openNoFollow(sp)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [stampLen + 1]byte
	if n := readStart(f, b[:]); n != stampLen {
		return false
	}
	want := encodeStamp(crc, s)
	return string(b[:stampLen]) == string(want)
}

// writeStamp records that the entry at path, in state s, has data
// checksum crc: a temporary file renamed over the stamp, so a reader sees
// the old stamp, the new one or none. No fsync: a stamp lost in a crash
// costs one verification.
func writeStamp(path string, crc uint32, s fileState) error {
	sp := stampPathOf(path)
	dir := filepath.Dir(sp)
	hx := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), entryPrefix), entrySuffix)
	tmp, f, err := createTemp(dir, hx)
	if err != nil {
		return fmt.Errorf("packcache: stamp %s: %w", sp, err)
	}
	_, werr := f.Write(encodeStamp(crc, s))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, sp)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("packcache: stamp %s: %w", sp, werr)
	}
	return nil
}

// removeStamp removes the stamp of the entry at path, if any.
func removeStamp(path string) error {
	return removeErr(os.Remove(stampPathOf(path)))
}

// stampTime is the modification time of the entry at path's stamp (its
// last trusted use), or the zero time.
func stampTime(path string) time.Time {
	st, err := os.Lstat(stampPathOf(path))
	if err != nil || !st.Mode().IsRegular() {
		return time.Time{}
	}
	return st.ModTime()
}

// removeOrphanStamp removes the stamp file name in dir when its entry is
// gone.
func (c Config) removeOrphanStamp(name string) {
	entry := filepath.Join(c.Dir, strings.TrimSuffix(name, stampSuffix)+entrySuffix)
	if _, err := os.Lstat(entry); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	p := filepath.Join(c.Dir, name)
	if err := removeErr(os.Remove(p)); err != nil {
		c.logf("orphan stamp %s: %v", p, err)
	}
}
