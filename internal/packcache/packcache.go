// Package packcache keeps repacked weight layouts in a persistent on-disk
// cache, so that a second open of a model maps the packed bytes instead of
// rebuilding them.
//
// Each entry is one file directly in Config.Dir, named from a hash of its
// key (so a changed model or layout gives a different name; the full key is
// still stored and compared). The file is a small header followed by the
// data, which starts at a 64 KiB boundary so that it is page-aligned on
// every page size in use and maps cleanly:
//
//	offset  field (little-endian)
//	0       magic "MOONLMPK"
//	8       u32 format version
//	12      u32 CRC-32C of the header region [0, data offset), this field as zero
//	16      u64 data offset
//	24      u64 data length
//	32      u32 CRC-32 (IEEE) of the data
//	36      u32 length of the encoded key
//	40      the encoded key, then zeros up to the data offset
//	...     data
//
// Get validates an entry (length before mapping, then header, key and the
// data's checksum) and maps it read-only; it never copies. With
// Config.LazyVerify, Get checks only the length, header and key (reading
// one 64 KiB header, whatever the entry's size) and maps without reading the
// data; the caller then runs Entry.Verify, which reads and checksums the
// data (populating the page tables as it goes), before trusting Data. Put writes a
// temporary file in Dir, fsyncs it, renames it over the entry and fsyncs
// Dir, so concurrent writers in threads or processes never produce a torn
// or mixed entry. Put and a successful Verify stamp the entry (stamp.go):
// a later lazy Get of the unchanged file trusts it (Entry.Trusted) and
// Verify reads nothing. Eviction is least recently used by the entry
// file's modification time, which Get refreshes (or its stamp's, which a
// trusted Get refreshes instead).
//
// A mapped file truncated after Get makes a later access to the lost pages
// raise SIGBUS. The engine reads weights on goroutines that run with
// debug.SetPanicOnFault(true), which turns that into a recoverable panic;
// Entry.Valid re-checks the file's size cheaply so the engine can fall back
// to packing in memory.
package packcache

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMaxBytes is the eviction budget when Config.MaxBytes is not set.
const DefaultMaxBytes = 8 << 30

// FormatVersion is the entry file format version. It is part of the hash
// that names an entry, so moonlm versions with different formats keep
// separate entries instead of overwriting each other's.
const FormatVersion = 2

// Config says where and whether the cache lives.
type Config struct {
	Disabled bool
	Dir      string                           // the cache's own folder (entries live directly in it); eviction never leaves it
	MaxBytes int64                            // eviction budget; <= 0 means DefaultMaxBytes
	Logf     func(format string, args ...any) // debug log of every fallback and eviction; nil = silent
	// LazyVerify: Get leaves the data's checksum to Entry.Verify, which the
	// caller must run (and see succeed) before it trusts Data.
	LazyVerify bool
}

// Key identifies an entry.
type Key struct {
	Model   string   // absolute path of the model file
	Size    int64    // its size
	ModTime int64    // its modification time, ns
	Header  [32]byte // Digest of the GGUF header and tensor table (the caller computes it)
	Layout  string   // the packed layouts and their versions, e.g. "q4_K.r16.v1,q6_K.r16.v1"
	CPU     string   // the CPU features the layouts were built for
}

const (
	magic      = "MOONLMPK"
	fixedLen   = 40
	dataAlign  = 64 << 10
	maxField   = 64 << 10 // longest string field of a key
	staleAfter = time.Hour

	offVersion   = 8
	offHeaderCRC = 12
	offDataOff   = 16
	offDataLen   = 24
	offDataCRC   = 32
	offKeyLen    = 36

	entryPrefix = "mlpk-"
	entrySuffix = ".bin"
	tempPrefix  = ".mlpk-"
	tempSuffix  = ".tmp"
	nameHexLen  = 32 // hex digits of the key hash in a name
	tempHexLen  = 16 // hex digits of a temporary file's random part
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ParseBytes parses a positive byte count: an integer, optionally followed
// by K, M, G or T (powers of 1024, with an optional "iB" or "B").
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "B")
	t = strings.TrimSuffix(t, "I")
	shift := 0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			t = strings.TrimSpace(t[:n-1])
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("byte count %q: not an integer with an optional K/M/G/T suffix", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("byte count %q: must be positive", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("byte count %q: too large", s)
	}
	return n << shift, nil
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

func (c Config) maxBytes() int64 {
	if c.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return c.MaxBytes
}

// encodeKey is the key's byte form, stored in the header and hashed into
// the entry's name: each string as a u32 length and its bytes, integers as
// u64, all little-endian, in field order.
func encodeKey(k Key) ([]byte, error) {
	for _, f := range [...]struct{ name, v string }{{"model path", k.Model}, {"layout", k.Layout}, {"cpu", k.CPU}} {
		if len(f.v) > maxField {
			return nil, fmt.Errorf("key %s is %d bytes, more than %d", f.name, len(f.v), maxField)
		}
	}
	b := make([]byte, 0, 4*3+8*2+32+len(k.Model)+len(k.Layout)+len(k.CPU))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(k.Model)))
	b = append(b, k.Model...)
	b = binary.LittleEndian.AppendUint64(b, uint64(k.Size))
	b = binary.LittleEndian.AppendUint64(b, uint64(k.ModTime))
	b = append(b, k.Header[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(k.Layout)))
	b = append(b, k.Layout...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(k.CPU)))
	b = append(b, k.CPU...)
	return b, nil
}

// hashHex is the hex key hash shared by an entry's name and its temporary
// files' names; the format version is hashed in too.
func hashHex(enc []byte) string {
	b := append([]byte(magic), binary.LittleEndian.AppendUint32(nil, FormatVersion)...)
	d := Digest(append(b, enc...))
	return hex.EncodeToString(d[:])[:nameHexLen]
}

// dataOffset is where the data of an entry with an encoded key of n bytes
// starts.
func dataOffset(n int) int64 {
	return (int64(fixedLen+n) + dataAlign - 1) / dataAlign * dataAlign
}

// EntryName returns the file name (in Dir) of the entry for key.
func EntryName(key Key) (string, error) {
	enc, err := encodeKey(key)
	if err != nil {
		return "", fmt.Errorf("packcache: %w", err)
	}
	return entryPrefix + hashHex(enc) + entrySuffix, nil
}

// isHex reports whether s is n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isEntryName reports whether name is an entry file's name; only such
// files are ever evicted.
func isEntryName(name string) bool {
	return strings.HasPrefix(name, entryPrefix) && strings.HasSuffix(name, entrySuffix) &&
		isHex(name[len(entryPrefix):len(name)-len(entrySuffix)], nameHexLen)
}

// isTempName reports whether name is one of our temporary files; only such
// files are ever removed as stale.
func isTempName(name string) bool {
	if !strings.HasPrefix(name, tempPrefix) || !strings.HasSuffix(name, tempSuffix) {
		return false
	}
	mid := name[len(tempPrefix) : len(name)-len(tempSuffix)]
	return len(mid) == nameHexLen+1+tempHexLen && mid[nameHexLen] == '-' &&
		isHex(mid[:nameHexLen], nameHexLen) && isHex(mid[nameHexLen+1:], tempHexLen)
}

// headerCRC is the CRC-32C of the header region h with its CRC field as
// zero.
func headerCRC(h []byte) uint32 {
	var zero [4]byte
	crc := crc32.Update(0, castagnoli, h[:offHeaderCRC])
	crc = crc32.Update(crc, castagnoli, zero[:])
	return crc32.Update(crc, castagnoli, h[offHeaderCRC+4:])
}

// buildHeader returns the header region of an entry for enc and the data
// that is the concatenation of parts.
func buildHeader(enc []byte, parts [][]byte) []byte {
	off := dataOffset(len(enc))
	h := make([]byte, off)
	copy(h, magic)
	var n int64
	var crc uint32
	for _, p := range parts {
		n += int64(len(p))
		crc = crc32.Update(crc, dataTable, p)
	}
	le := binary.LittleEndian
	le.PutUint32(h[offVersion:], FormatVersion)
	le.PutUint64(h[offDataOff:], uint64(off))
	le.PutUint64(h[offDataLen:], uint64(n))
	le.PutUint32(h[offDataCRC:], crc)
	le.PutUint32(h[offKeyLen:], uint32(len(enc)))
	copy(h[fixedLen:], enc)
	le.PutUint32(h[offHeaderCRC:], headerCRC(h))
	return h
}

// checkEntry validates a mapped entry file m against the encoded key and
// the data size, and with data the data's checksum; it returns why it is
// invalid, or "". A fault while reading (the file shrank under us) is
// reported as a reason, not a crash.
func checkEntry(m, enc []byte, size int64, data bool) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(runtime.Error); ok {
				if _, ok := e.(interface{ Addr() uintptr }); ok {
					reason = fmt.Sprintf("fault while reading (file shrank?): %v", e)
					return
				}
			}
			panic(r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	off := dataOffset(len(enc))
	if int64(len(m)) != off+size {
		return fmt.Sprintf("mapped %d bytes, want %d", len(m), off+size)
	}
	le := binary.LittleEndian
	if string(m[:len(magic)]) != magic {
		return "bad magic"
	}
	if v := le.Uint32(m[offVersion:]); v != FormatVersion {
		return fmt.Sprintf("format version %d, want %d", v, FormatVersion)
	}
	if o := le.Uint64(m[offDataOff:]); o != uint64(off) {
		return fmt.Sprintf("data offset %d, want %d", o, off)
	}
	if n := le.Uint64(m[offDataLen:]); n != uint64(size) {
		return fmt.Sprintf("data length %d, want %d", n, size)
	}
	if n := le.Uint32(m[offKeyLen:]); n != uint32(len(enc)) {
		return fmt.Sprintf("key length %d, want %d", n, len(enc))
	}
	h := m[:off]
	if got, want := le.Uint32(h[offHeaderCRC:]), headerCRC(h); got != want {
		return fmt.Sprintf("header checksum %#08x, computed %#08x", got, want)
	}
	if !bytes.Equal(h[fixedLen:fixedLen+len(enc)], enc) {
		return "stored key differs (hash collision or a copied file)"
	}
	if !data {
		return ""
	}
	if got, want := le.Uint32(h[offDataCRC:]), checksum(m[off:], false); got != want {
		return fmt.Sprintf("data checksum %#08x, computed %#08x", got, want)
	}
	return ""
}

// Entry is a validated entry mapped read-only; Data stays valid until
// Close. Writing to Data faults. If the file is truncated while mapped,
// reading the lost pages raises SIGBUS: read Data on goroutines running
// with debug.SetPanicOnFault(true) and check Valid to fall back.
type Entry struct {
	Data []byte

	mu      sync.Mutex
	mapping []byte
	f       *os.File
	fd      uintptr     // f's descriptor, for Valid's fstat
	st      fs.FileInfo // f's identity, so Verify removes this file only
	path    string
	crc     uint32 // the data's checksum as stored in the header

	// trusted: a stamp says the data was verified in the file's present
	// state (Verify returns at once). Otherwise state, when stateOK, is the
	// file's state taken before any data was read, which a successful
	// Verify stamps.
	trusted bool
	state   fileState
	stateOK bool
	logf    func(format string, args ...any)
}

// ErrCorrupt says that an entry's data does not match its checksum.
var ErrCorrupt = errors.New("packcache: entry data does not match its checksum")

// Verify reads every byte of Data (on up to GOMAXPROCS goroutines,
// populating the page tables as it goes, so that the first use of a
// verified entry does not fault page by page) and compares the checksum
// with the header's. On a match it stamps the entry (see stamp.go), so the
// next open of the unchanged file trusts it without reading it; an entry
// that Get found stamped (Trusted) returns at once. On a mismatch it
// removes the entry file (unless it was replaced meanwhile), so the next
// open packs afresh, and returns an error wrapping ErrCorrupt. A fault
// while reading (the file shrank under the mapping) is an error too, never
// a crash. Verify must not run concurrently with Close.
func (e *Entry) Verify() (err error) {
	if e.trusted {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("packcache: verify %s: fault while reading (file shrank?): %v", e.path, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	got := checksum(e.Data, true)
	if got == e.crc {
		if e.stateOK {
			if err := writeStamp(e.path, e.crc, e.state); err != nil && e.logf != nil {
				e.logf("%v (the next open verifies again)", err)
			}
		}
		return nil
	}
	err = fmt.Errorf("%w: %s: stored %#08x, computed %#08x", ErrCorrupt, e.path, e.crc, got)
	cur, lerr := os.Lstat(e.path)
	switch {
	case lerr != nil || !os.SameFile(cur, e.st):
		return fmt.Errorf("%w (replaced meanwhile, left alone)", err)
	case removeErr(os.Remove(e.path)) != nil:
		return fmt.Errorf("%w (cannot remove it)", err)
	}
	_ = removeStamp(e.path)
	return fmt.Errorf("%w (removed)", err)
}

// Trusted reports whether Get found the entry stamped as verified in the
// file's present state, so that Verify does not read the data.
func (e *Entry) Trusted() bool { return e.trusted }

// removeErr is the error of a removal that did not happen (a file already
// gone is not one).
func removeErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Path returns the entry's file path.
func (e *Entry) Path() string { return e.path }

// Valid reports whether the mapped file still has its full length (one
// fstat), so the caller can fall back before touching pages that a
// truncation took away. It is false after Close.
func (e *Entry) Valid() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return false
	}
	n, err := fileSize(e.fd)
	return err == nil && n == int64(len(e.mapping))
}

// Close unmaps the entry; Data must not be used afterwards. Closing twice
// is harmless.
func (e *Entry) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return nil
	}
	errU := unmap(e.mapping)
	errC := e.f.Close()
	e.Data, e.mapping, e.f = nil, nil, nil
	if err := errors.Join(errU, errC); err != nil {
		return fmt.Errorf("packcache: close %s: %w", e.path, err)
	}
	return nil
}

// Get returns the entry for key if one exists and is valid: its stored key
// equals key, its length equals size, the bounds of its records are sane and
// the checksum of the data matches (CRC-32C, computed at memory speed; with
// LazyVerify it is left to Entry.Verify).
// A miss is (nil, nil). An invalid entry is removed, logged, and a miss.
// A hit refreshes the entry's recency for eviction. Get returns an error
// only for a negative size; cache trouble (unreadable folder, failed
// mapping) is logged and a miss.
func (c Config) Get(key Key, size int64) (*Entry, error) {
	if c.Disabled {
		return nil, nil
	}
	if size < 0 {
		return nil, fmt.Errorf("packcache: get: negative data size %d", size)
	}
	if c.Dir == "" {
		c.logf("miss: no cache folder configured")
		return nil, nil
	}
	if !mmapSupported {
		c.logf("miss: mapping is not supported on %s", runtime.GOOS)
		return nil, nil
	}
	enc, err := encodeKey(key)
	if err != nil {
		c.logf("miss: %v", err)
		return nil, nil
	}
	path := filepath.Join(c.Dir, entryPrefix+hashHex(enc)+entrySuffix)
	want := dataOffset(len(enc))
	if size > math.MaxInt-want {
		c.logf("miss %s: data size %d too large to map", path, size)
		return nil, nil
	}
	want += size

	f, err := openNoFollow(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			c.logf("miss %s: no entry", path)
		} else {
			c.logf("miss %s: %v", path, err)
		}
		return nil, nil
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		c.logf("miss %s: %v", path, err)
		return nil, nil
	}
	if !st.Mode().IsRegular() {
		f.Close()
		c.logf("miss %s: not a regular file (left alone)", path)
		return nil, nil
	}
	// The length is checked before mapping: touching a page past the end
	// of a short file would fault.
	if st.Size() != want {
		c.discard(f, st, path, fmt.Sprintf("size %d, want %d", st.Size(), want))
		return nil, nil
	}
	m, err := mapFile(f, want, !c.LazyVerify)
	if err != nil {
		f.Close()
		c.logf("miss %s: %v", path, err)
		return nil, nil
	}
	if reason := checkEntry(m, enc, size, !c.LazyVerify); reason != "" {
		_ = unmap(m)
		c.discard(f, st, path, reason)
		return nil, nil
	}
	off := want - size
	crc := binary.LittleEndian.Uint32(m[offDataCRC:])
	e := &Entry{Data: m[off:want:want], mapping: m, f: f, fd: f.Fd(), st: st, path: path, crc: crc, logf: c.Logf}
	now := time.Now()
	if c.LazyVerify {
		if s, ok := statFile(e.fd); ok && stampMatches(stampPathOf(path), crc, s) {
			// Touching the entry would change its ctime and void the
			// stamp: the stamp carries the recency instead.
			e.trusted = true
			if err := os.Chtimes(stampPathOf(path), now, now); err != nil {
				c.logf("hit %s: cannot refresh its recency: %v", path, err)
			}
			return e, nil
		}
	}
	if err := os.Chtimes(path, now, now); err != nil {
		c.logf("hit %s: cannot refresh its recency: %v", path, err)
	}
	if c.LazyVerify {
		// The state after the refresh and before Verify reads any data: a
		// change before this is seen by the checksum, one after it
		// changes the state.
		e.state, e.stateOK = statFile(e.fd)
	}
	return e, nil
}

// discard closes f, removes the invalid entry at path (unless another
// writer replaced it meanwhile) and logs why.
func (c Config) discard(f *os.File, st fs.FileInfo, path, reason string) {
	f.Close()
	cur, err := os.Lstat(path)
	if err != nil || !os.SameFile(cur, st) {
		c.logf("miss %s: invalid entry (%s); replaced meanwhile, left alone", path, reason)
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.logf("miss %s: invalid entry (%s); cannot remove it: %v", path, reason, err)
		return
	}
	_ = removeStamp(path)
	c.logf("miss %s: invalid entry (%s); removed", path, reason)
}

// Put publishes data as the entry for key: a temporary file in Dir, write,
// fsync, rename (atomic: concurrent writers in threads or processes never
// produce a torn or mixed entry; the last rename wins with a complete file),
// then evicts least-recently-used entries down to MaxBytes, never the one
// just written. Errors (read-only folder, no space) are returned wrapped
// (and logged); the caller keeps using its in-memory data. Temporary files
// of crashed writers older than an hour are removed first. Disabled: a
// no-op returning nil.
func (c Config) Put(key Key, data []byte) error {
	return c.PutParts(key, [][]byte{data})
}

// PutParts is Put of the concatenation of parts, without building it in
// memory: the engine can publish its packed tensors as they are.
func (c Config) PutParts(key Key, parts [][]byte) error {
	if c.Disabled {
		return nil
	}
	err := c.put(key, parts)
	if err != nil {
		c.logf("%v", err)
	}
	return err
}

func (c Config) put(key Key, parts [][]byte) error {
	if c.Dir == "" {
		return errors.New("packcache: put: no cache folder configured")
	}
	if !mmapSupported {
		return fmt.Errorf("packcache: put: mapping is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
	}
	enc, err := encodeKey(key)
	if err != nil {
		return fmt.Errorf("packcache: put: %w", err)
	}
	hx := hashHex(enc)
	name := entryPrefix + hx + entrySuffix
	path := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("packcache: put %s: create cache folder: %w", path, err)
	}
	c.removeStaleTemps()

	hdr := buildHeader(enc, parts)
	tmp, f, err := createTemp(c.Dir, hx)
	if err != nil {
		return fmt.Errorf("packcache: put %s: %w", path, err)
	}
	fail := func(step string, err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("packcache: put %s: %s %s: %w", path, step, tmp, err)
	}
	if _, err := f.Write(hdr); err != nil {
		return fail("write header to", err)
	}
	for _, p := range parts {
		if _, err := f.Write(p); err != nil {
			return fail("write data to", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	written, stampable := statFile(f.Fd())
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("packcache: put %s: close %s: %w", path, tmp, err)
	}
	// Stamp recency from the same clock Get uses: the file system's own
	// timestamps can lag time.Now by a clock tick.
	now := time.Now()
	if err := os.Chtimes(tmp, now, now); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("packcache: put %s: set time of %s: %w", path, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("packcache: put %s: rename %s: %w", path, tmp, err)
	}
	// The entry is published; a failed folder fsync only weakens its
	// durability across a crash, so it is logged, not returned.
	if err := syncDir(c.Dir); err != nil {
		c.logf("put %s: fsync folder: %v", path, err)
	}
	if stampable {
		c.stampWritten(path, binary.LittleEndian.Uint32(hdr[offDataCRC:]), written)
	}
	c.evict(name)
	return nil
}

// stampWritten stamps the entry just published at path (see stamp.go) if
// it is still the file written (inode w.Ino): its checksum was computed
// over the bytes written, so the next open need not read them back. The
// state stamped is taken after the rename, which changed the file's ctime.
func (c Config) stampWritten(path string, crc uint32, w fileState) {
	f, err := openNoFollow(path)
	if err != nil {
		return
	}
	defer f.Close()
	s, ok := statFile(f.Fd())
	if !ok || s.Dev != w.Dev || s.Ino != w.Ino {
		return // replaced meanwhile by another writer: its opens verify it
	}
	if err := writeStamp(path, crc, s); err != nil {
		c.logf("put %s: %v (the next open verifies it)", path, err)
	}
}

// createTemp creates a new temporary file for the entry with key hash hx.
func createTemp(dir, hx string) (string, *os.File, error) {
	var err error
	for range 8 {
		name := fmt.Sprintf("%s%s-%016x%s", tempPrefix, hx, rand.Uint64(), tempSuffix)
		p := filepath.Join(dir, name)
		var f *os.File
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return p, f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return "", nil, fmt.Errorf("create temporary file: %w", err)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeStaleTemps removes our temporary files (by name pattern) that have
// not been written for an hour: their writer crashed.
func (c Config) removeStaleTemps() {
	ents, err := readDir(c.Dir)
	if err != nil {
		c.logf("stale temporary files: %v", err)
		return
	}
	cutoff := time.Now().Add(-staleAfter)
	for _, d := range ents {
		if !isTempName(d.Name()) || !d.Type().IsRegular() {
			continue
		}
		info, err := d.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			continue
		}
		p := filepath.Join(c.Dir, d.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.logf("stale temporary file %s: %v", p, err)
			continue
		}
		c.logf("removed stale temporary file %s (last written %s)", p, info.ModTime().Format(time.RFC3339))
	}
}

// readDir lists dir's entries in directory order: os.ReadDir would sort
// them by name, which neither caller needs (evict sorts by age), and its
// sort is ~10 KB of the shared library.
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	return ents, err
}

// evict removes the least recently used entries (oldest modification time
// first) until the entries in Dir fit MaxBytes, never keep. Only regular
// files named like entries are considered.
func (c Config) evict(keep string) {
	ents, err := readDir(c.Dir)
	if err != nil {
		c.logf("eviction: %v", err)
		return
	}
	type item struct {
		name  string
		size  int64
		mtime time.Time // the entry file's
		used  time.Time // the later of mtime and its stamp's
	}
	var items []item
	var total int64
	for _, d := range ents {
		if isStampName(d.Name()) && d.Type().IsRegular() {
			c.removeOrphanStamp(d.Name())
			continue
		}
		if !isEntryName(d.Name()) || !d.Type().IsRegular() {
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue
		}
		used := info.ModTime()
		if st := stampTime(filepath.Join(c.Dir, d.Name())); st.After(used) {
			used = st
		}
		items = append(items, item{d.Name(), info.Size(), info.ModTime(), used})
		total += info.Size()
	}
	budget := c.maxBytes()
	if total <= budget {
		return
	}
	sort.Slice(items, func(i, j int) bool {
		if !items[i].used.Equal(items[j].used) {
			return items[i].used.Before(items[j].used)
		}
		return items[i].name < items[j].name
	})
	for _, it := range items {
		if total <= budget {
			break
		}
		if it.name == keep {
			continue
		}
		p := filepath.Join(c.Dir, it.name)
		// Skip an entry used or rewritten since the listing.
		cur, err := os.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				total -= it.size
			}
			continue
		}
		if !cur.Mode().IsRegular() || !cur.ModTime().Equal(it.mtime) || cur.Size() != it.size ||
			stampTime(p).After(it.used) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			c.logf("evict %s: %v", p, err)
			continue
		}
		_ = removeStamp(p)
		total -= it.size
		c.logf("evicted %s (%d bytes, last used %s); cache now %d bytes, budget %d",
			p, it.size, it.used.Format(time.RFC3339), total, budget)
	}
}
