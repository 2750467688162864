//go:build unix

package packcache

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// logBuf collects a Config's debug log so tests can check what was said.
type logBuf struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuf) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// matching returns the lines containing s.
func (l *logBuf) matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			out = append(out, x)
		}
	}
	return out
}

// newConfig returns a Config whose Dir is a fresh "packed" folder inside a
// temporary folder (so the parent can hold files the cache must not touch).
func newConfig(t testing.TB) (Config, *logBuf) {
	lb := &logBuf{}
	return Config{Dir: filepath.Join(t.TempDir(), "packed"), MaxBytes: 1 << 40, Logf: lb.logf}, lb
}

func testKey(i int) Key {
	k := Key{
		Model:   fmt.Sprintf("/models/model-%d.gguf", i),
		Size:    1_000_000 + int64(i),
		ModTime: 1_700_000_000_000_000_000 + int64(i),
		Layout:  "q4_K.r16.v1,q6_K.r16.v1",
		CPU:     "avx2,fma,f16c",
	}
	for j := range k.Header {
		k.Header[j] = byte(i*31 + j)
	}
	return k
}

// payload is n deterministic pseudo-random bytes for seed.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

func entryPath(t testing.TB, c Config, k Key) string {
	name, err := EntryName(k)
	require.NoError(t, err)
	return filepath.Join(c.Dir, name)
}

func mustGet(t testing.TB, c Config, k Key, size int64) *Entry {
	t.Helper()
	e, err := c.Get(k, size)
	require.NoError(t, err)
	require.NotNil(t, e, "expected a cache hit")
	return e
}

func requireMiss(t testing.TB, c Config, k Key, size int64) {
	t.Helper()
	e, err := c.Get(k, size)
	require.NoError(t, err)
	if e != nil {
		e.Close()
		t.Fatalf("expected a miss, got a hit")
	}
}

func requireGone(t testing.TB, path string) {
	t.Helper()
	_, err := os.Lstat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "%s should have been removed", path)
}

// mappedFrom reports whether address a lies in a mapping of file path,
// according to /proc/self/maps.
func mappedFrom(t *testing.T, a uintptr, path string) bool {
	f, err := os.Open("/proc/self/maps")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		require.True(t, ok)
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		require.NoError(t, err1)
		require.NoError(t, err2)
		if uint64(a) >= l && uint64(a) < h {
			return strings.Join(fields[5:], " ") == path
		}
	}
	require.NoError(t, sc.Err())
	return false
}

func TestRoundTrip(t *testing.T) {
	c, _ := newConfig(t)
	for i, n := range []int{0, 1, 4095, 65536, 1<<20 + 3} {
		k := testKey(i)
		want := payload(uint64(i), n)
		require.NoError(t, c.Put(k, want))

		e := mustGet(t, c, k, int64(n))
		require.Equal(t, want, e.Data, "size %d", n)
		assert.Equal(t, n, cap(e.Data), "Data's capacity ends at the data")
		assert.True(t, e.Valid())
		path := entryPath(t, c, k)
		assert.Equal(t, path, e.Path())
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, dataOffset(len(must(encodeKey(k))))+int64(n), st.Size())
		if n > 0 {
			a := uintptr(unsafe.Pointer(unsafe.SliceData(e.Data)))
			assert.Zero(t, a%uintptr(os.Getpagesize()), "data is page-aligned")
			if runtime.GOOS == "linux" {
				real, err := filepath.EvalSymlinks(path)
				require.NoError(t, err)
				assert.True(t, mappedFrom(t, a, real), "Data is a mapping of %s, not a copy", real)
			}
		}
		require.NoError(t, e.Close())
		assert.False(t, e.Valid(), "Valid after Close")
		assert.Nil(t, e.Data)
		require.NoError(t, e.Close(), "second Close")
	}
	ents, err := readEntries(c.Dir)
	require.NoError(t, err)
	for _, d := range ents {
		assert.True(t, isEntryName(d.Name()), "only entries remain, found %s", d.Name())
	}
	assert.Len(t, ents, 5)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// PutParts writes the same file as Put of the concatenation.
func TestPutParts(t *testing.T) {
	c, _ := newConfig(t)
	k := testKey(8)
	whole := payload(8, 250_000)
	require.NoError(t, c.Put(k, whole))
	want, err := os.ReadFile(entryPath(t, c, k))
	require.NoError(t, err)
	require.NoError(t, os.Remove(entryPath(t, c, k)))

	parts := [][]byte{nil, whole[:1], whole[1:70_000], {}, whole[70_000:], nil}
	require.NoError(t, c.PutParts(k, parts))
	got, err := os.ReadFile(entryPath(t, c, k))
	require.NoError(t, err)
	require.Equal(t, want, got)
	e := mustGet(t, c, k, int64(len(whole)))
	assert.Equal(t, whole, e.Data)
	require.NoError(t, e.Close())

	require.NoError(t, c.PutParts(testKey(9), nil))
	e = mustGet(t, c, testKey(9), 0)
	assert.Empty(t, e.Data)
	require.NoError(t, e.Close())
}

// Valid is cheap enough to call per forward pass: no allocation.
func TestValidDoesNotAllocate(t *testing.T) {
	c, _ := newConfig(t)
	require.NoError(t, c.Put(testKey(1), payload(1, 1000)))
	e := mustGet(t, c, testKey(1), 1000)
	defer e.Close()
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if !e.Valid() {
			t.Fatal("not valid")
		}
	}))
}

// An entry replaced by a later Put stays mapped and intact for whoever
// holds it.
func TestEntrySurvivesReplacement(t *testing.T) {
	c, _ := newConfig(t)
	k := testKey(1)
	old := payload(1, 100_000)
	require.NoError(t, c.Put(k, old))
	e := mustGet(t, c, k, int64(len(old)))
	defer e.Close()
	neu := payload(2, len(old))
	require.NoError(t, c.Put(k, neu))
	assert.True(t, e.Valid())
	assert.Equal(t, old, e.Data)
	e2 := mustGet(t, c, k, int64(len(neu)))
	defer e2.Close()
	assert.Equal(t, neu, e2.Data)
}

func TestMissOnKeyChange(t *testing.T) {
	c, lb := newConfig(t)
	k := testKey(7)
	data := payload(7, 10_000)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)

	changes := map[string]func(*Key){
		"model":        func(k *Key) { k.Model += "x" },
		"size":         func(k *Key) { k.Size++ },
		"modtime":      func(k *Key) { k.ModTime-- },
		"header first": func(k *Key) { k.Header[0] ^= 1 },
		"header last":  func(k *Key) { k.Header[31] ^= 0x80 },
		"layout":       func(k *Key) { k.Layout = "q4_K.r16.v2,q6_K.r16.v1" },
		"cpu":          func(k *Key) { k.CPU = "avx512f,avx512bw" },
		// the same bytes split differently between two fields
		"field boundary": func(k *Key) { k.Layout, k.CPU = k.Layout+k.CPU[:3], k.CPU[3:] },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			k2 := k
			change(&k2)
			require.NotEqual(t, k, k2)
			assert.NotEqual(t, path, entryPath(t, c, k2), "a changed key gives a different name")
			requireMiss(t, c, k2, int64(len(data)))
		})
	}
	// None of those misses touched the original.
	e := mustGet(t, c, k, int64(len(data)))
	assert.Equal(t, data, e.Data)
	require.NoError(t, e.Close())
	assert.Empty(t, lb.matching("invalid"))

	// A different data size for the same key is an invalid entry.
	requireMiss(t, c, k, int64(len(data))+1)
	requireGone(t, path)
	assert.Len(t, lb.matching("invalid entry (size"), 1)
}

// The key stored inside is compared, not only the name's hash.
func TestStoredKeyCompared(t *testing.T) {
	c, lb := newConfig(t)
	a, b := testKey(1), testKey(1)
	b.CPU = strings.Replace(a.CPU, "avx2", "avx3", 1) // same encoded length
	data := payload(3, 5000)
	require.NoError(t, c.Put(a, data))
	raw, err := os.ReadFile(entryPath(t, c, a))
	require.NoError(t, err)
	pb := entryPath(t, c, b)
	require.NoError(t, os.WriteFile(pb, raw, 0o644))

	requireMiss(t, c, b, int64(len(data)))
	requireGone(t, pb)
	assert.Len(t, lb.matching("stored key differs"), 1)
	e := mustGet(t, c, a, int64(len(data)))
	require.NoError(t, e.Close())
}

// checkInvalidVariants writes variants of a valid entry file over it and checks
// each is a miss that removes the file.
func checkInvalidVariants(t *testing.T, c Config, k Key, size int64, path string, variants func(yield func(desc string, b []byte))) int {
	n := 0
	variants(func(desc string, b []byte) {
		require.NoError(t, os.WriteFile(path, b, 0o644), desc)
		e, err := c.Get(k, size)
		require.NoError(t, err, desc)
		if e != nil {
			e.Close()
			t.Fatalf("%s: expected a miss, got a hit", desc)
		}
		_, err = os.Lstat(path)
		require.ErrorIs(t, err, fs.ErrNotExist, "%s: the invalid entry should have been removed", desc)
		n++
	})
	return n
}

func TestCorruptionIsMiss(t *testing.T) {
	c, lb := newConfig(t)
	k := testKey(2)
	data := payload(2, 300_000)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int(dataOffset(len(must(encodeKey(k)))))
	keyEnd := fixedLen + len(must(encodeKey(k)))

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	flip := func(yield func(string, []byte), at int) {
		b := append([]byte(nil), good...)
		x := byte(1 + r.IntN(255))
		b[at] ^= x
		yield(fmt.Sprintf("byte %d ^= %#x", at, x), b)
	}
	n := checkInvalidVariants(t, c, k, int64(len(data)), path, func(yield func(string, []byte)) {
		for at := 0; at < keyEnd; at++ { // every byte of the fixed header and the key
			flip(yield, at)
		}
		for range 200 { // the padding
			flip(yield, keyEnd+r.IntN(off-keyEnd))
		}
		flip(yield, off-1)
		for range 300 { // the data
			flip(yield, off+r.IntN(len(data)))
		}
		flip(yield, off)
		flip(yield, len(good)-1)
	})
	t.Logf("%d corrupted variants rejected", n)
	for _, reason := range []string{"bad magic", "format version", "data offset", "data length", "key length", "header checksum", "data checksum"} {
		assert.NotEmpty(t, lb.matching(reason), "some flip is rejected for %q", reason)
	}

	// The intact file is still a hit.
	require.NoError(t, os.WriteFile(path, good, 0o644))
	e := mustGet(t, c, k, int64(len(data)))
	assert.Equal(t, data, e.Data)
	require.NoError(t, e.Close())
}

func TestTruncationIsMiss(t *testing.T) {
	c, _ := newConfig(t)
	k := testKey(3)
	data := payload(3, 200_000)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	off := int(dataOffset(len(must(encodeKey(k)))))

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	lengths := []int{0, 1, len(magic), fixedLen - 1, fixedLen, off - 1, off, off + 1, len(good) - 1}
	for range 100 {
		lengths = append(lengths, r.IntN(len(good)))
	}
	checkInvalidVariants(t, c, k, int64(len(data)), path, func(yield func(string, []byte)) {
		for _, n := range lengths {
			yield(fmt.Sprintf("truncated to %d of %d bytes", n, len(good)), good[:n])
		}
		// Longer than it should be is invalid too.
		yield("one byte appended", append(append([]byte(nil), good...), 0))
		yield("a page appended", append(append([]byte(nil), good...), make([]byte, 4096)...))
	})
}

func TestTruncatedAfterMapping(t *testing.T) {
	c, _ := newConfig(t)
	k := testKey(4)
	data := payload(4, 1<<20)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	e := mustGet(t, c, k, int64(len(data)))
	defer e.Close()
	require.True(t, e.Valid())

	off := dataOffset(len(must(encodeKey(k))))
	require.NoError(t, os.Truncate(path, off))
	assert.False(t, e.Valid(), "Valid notices the truncation")

	// What the package doc promises the engine: with SetPanicOnFault, a read
	// of a page the truncation took away is a recoverable panic, not a crash.
	var got any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { got = recover() }()
		debug.SetPanicOnFault(true)
		faultSink = e.Data[len(e.Data)-1]
		t.Error("reading a truncated page did not fault")
	}()
	<-done
	re, ok := got.(runtime.Error)
	require.True(t, ok, "recovered %v", got)
	_, ok = re.(interface{ Addr() uintptr })
	assert.True(t, ok, "the fault carries its address: %v", re)

	require.NoError(t, e.Close())
	requireMiss(t, c, k, int64(len(data)))
	requireGone(t, path)
}

// faultSink keeps the read of a truncated page from being optimized away.
var faultSink byte

// reseal recomputes the header checksum of an entry file's bytes.
func reseal(b []byte) {
	off := binary.LittleEndian.Uint64(b[offDataOff:])
	binary.LittleEndian.PutUint32(b[offHeaderCRC:], headerCRC(b[:off]))
}

func TestVersionMismatchIsMiss(t *testing.T) {
	c, lb := newConfig(t)
	k := testKey(5)
	data := payload(5, 4096)
	require.NoError(t, c.Put(k, data))
	path := entryPath(t, c, k)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, v := range []uint32{0, FormatVersion + 1, 0xffffffff} {
		binary.LittleEndian.PutUint32(b[offVersion:], v)
		reseal(b)
		require.NoError(t, os.WriteFile(path, b, 0o644))
		requireMiss(t, c, k, int64(len(data)))
		requireGone(t, path)
	}
	assert.Len(t, lb.matching("format version"), 3)

	// reseal itself is right: the current version, resealed, is a hit.
	binary.LittleEndian.PutUint32(b[offVersion:], FormatVersion)
	reseal(b)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	e := mustGet(t, c, k, int64(len(data)))
	require.NoError(t, e.Close())
}

// helperEnv names the environment variables that make the test binary act
// as one of TestTwoProcessesPutSameKey's writers (see TestMain).
const (
	helperDir    = "MOONLM_PACKCACHE_TEST_HELPER_DIR"
	helperSeed   = "MOONLM_PACKCACHE_TEST_HELPER_SEED"
	helperSize   = "MOONLM_PACKCACHE_TEST_HELPER_SIZE"
	helperRounds = "MOONLM_PACKCACHE_TEST_HELPER_ROUNDS"
	helperGo     = "MOONLM_PACKCACHE_TEST_HELPER_GO" // start when this file exists
)

// helperFull makes the test binary a writer that runs out of room (see
// TestPutOutOfRoom).
const helperFull = "MOONLM_PACKCACHE_TEST_HELPER_FULL_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDir); dir != "" {
		os.Exit(helperPut(dir))
	}
	if dir := os.Getenv(helperFull); dir != "" {
		os.Exit(helperOutOfRoom(dir))
	}
	os.Exit(m.Run())
}

// helperOutOfRoom limits the file size this process may write to 256 KiB
// (a stand-in for a full disk that works without privileges) and Puts 1 MiB;
// it prints Put's error and exits 0 if Put failed as it should.
func helperOutOfRoom(dir string) int {
	signal.Ignore(syscall.SIGXFSZ) // the write then fails with EFBIG instead
	lim := unix.Rlimit{Cur: 256 << 10, Max: 256 << 10}
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 2
	}
	err := Config{Dir: dir}.Put(testKey(1), payload(1, 1<<20))
	if err == nil {
		fmt.Println("Put succeeded beyond the file size limit")
		return 1
	}
	fmt.Print(err)
	return 0
}

// helperPut is a writer process: it Puts its payload for the shared key
// several times.
func helperPut(dir string) int {
	seed, err1 := strconv.ParseUint(os.Getenv(helperSeed), 10, 64)
	size, err2 := strconv.Atoi(os.Getenv(helperSize))
	rounds, err3 := strconv.Atoi(os.Getenv(helperRounds))
	if err1 != nil || err2 != nil || err3 != nil {
		fmt.Fprintln(os.Stderr, "helper: bad environment")
		return 2
	}
	c := Config{Dir: dir, MaxBytes: 1 << 40}
	data := payload(seed, size)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(os.Getenv(helperGo)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "helper: no start signal")
			return 3
		}
	}
	start := time.Now()
	for range rounds {
		if err := c.Put(testKey(99), data); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 1
		}
	}
	fmt.Printf("%d %d\n", start.UnixNano(), time.Now().UnixNano())
	return 0
}

func TestTwoProcessesPutSameKey(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips re-executing the test binary as two writers")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	c, _ := newConfig(t)
	type writer struct {
		seed uint64
		size int
	}
	writers := []writer{{11, 3<<20 + 5}, {22, 5<<20 + 1}}
	const rounds = 8
	overlapped := 0
	for trial := range 3 {
		require.NoError(t, os.RemoveAll(c.Dir))
		goFile := filepath.Join(t.TempDir(), "go")
		var wg sync.WaitGroup
		outs := make([][]byte, len(writers))
		errs := make([]error, len(writers))
		for i, w := range writers {
			wg.Go(func() {
				outs[i], errs[i] = runWriter(exe, c.Dir, goFile, w.seed, w.size, rounds)
			})
		}
		time.Sleep(50 * time.Millisecond) // let both start and wait
		require.NoError(t, os.WriteFile(goFile, nil, 0o644))
		wg.Wait()
		var spans [2][2]int64
		for i := range writers {
			require.NoError(t, errs[i], "writer %d (trial %d): %s", i, trial, outs[i])
			_, err := fmt.Sscan(string(outs[i]), &spans[i][0], &spans[i][1])
			require.NoError(t, err, "writer %d output %q", i, outs[i])
		}
		if spans[0][0] < spans[1][1] && spans[1][0] < spans[0][1] {
			overlapped++
		}

		ents, err := readEntries(c.Dir)
		require.NoError(t, err)
		require.Len(t, ents, 1, "one entry and no temporary files")
		path := entryPath(t, c, testKey(99))
		require.Equal(t, filepath.Base(path), ents[0].Name())
		st, err := os.Stat(path)
		require.NoError(t, err)
		off := dataOffset(len(must(encodeKey(testKey(99)))))
		var w *writer
		for i := range writers {
			if st.Size() == off+int64(writers[i].size) {
				w = &writers[i]
			}
		}
		require.NotNil(t, w, "entry size %d is neither writer's", st.Size())
		e := mustGet(t, c, testKey(99), int64(w.size))
		require.Equal(t, payload(w.seed, w.size), e.Data, "exactly one writer's complete payload")
		require.NoError(t, e.Close())
	}
	// Which writer wins and whether they overlap depends on scheduling; the
	// checks above hold either way.
	t.Logf("the two writers ran concurrently in %d of 3 trials", overlapped)
}

func TestPutOutOfRoom(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips re-executing the test binary")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	c, _ := newConfig(t)
	require.NoError(t, c.Put(testKey(2), payload(2, 1000))) // an entry already there
	p := exec.Command(exe)
	p.Env = append(os.Environ(), helperFull+"="+c.Dir)
	out, err := p.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "write data to", "Put's error says what failed")
	assert.Contains(t, string(out), c.Dir, "and where")
	assert.Contains(t, string(out), syscall.EFBIG.Error())

	ents, err := readEntries(c.Dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "the temporary file was removed")
	requireMiss(t, c, testKey(1), 1<<20)
	e := mustGet(t, c, testKey(2), 1000)
	require.NoError(t, e.Close())
}

// runWriter runs the test binary as a writer process (see TestMain).
func runWriter(exe, dir, goFile string, seed uint64, size, rounds int) ([]byte, error) {
	p := exec.Command(exe)
	p.Env = append(os.Environ(),
		helperDir+"="+dir,
		helperGo+"="+goFile,
		helperSeed+"="+strconv.FormatUint(seed, 10),
		helperSize+"="+strconv.Itoa(size),
		helperRounds+"="+strconv.Itoa(rounds))
	return p.CombinedOutput()
}

func TestConcurrentPutGet(t *testing.T) {
	c, lb := newConfig(t)
	const nKeys = 4
	sizes := [nKeys]int{70_000, 1, 150_000, 0}
	// A budget of about two entries keeps eviction running alongside.
	c.MaxBytes = 2 * (dataOffset(100) + 150_000)
	var wg sync.WaitGroup
	var hits, misses sync.Map
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 30 {
				i := r.IntN(nKeys)
				want := payload(uint64(i), sizes[i])
				if r.IntN(2) == 0 {
					if err := c.Put(testKey(i), want); err != nil {
						t.Errorf("put %d: %v", i, err)
					}
					continue
				}
				e, err := c.Get(testKey(i), int64(sizes[i]))
				if err != nil {
					t.Errorf("get %d: %v", i, err)
					continue
				}
				if e == nil {
					misses.Store(i, true)
					continue
				}
				hits.Store(i, true)
				if string(e.Data) != string(want) {
					t.Errorf("get %d: wrong data", i)
				}
				if !e.Valid() {
					t.Errorf("get %d: not valid", i)
				}
				if err := e.Close(); err != nil {
					t.Errorf("close %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	assert.Empty(t, lb.matching("invalid"), "no reader ever saw a torn entry")
	n := 0
	hits.Range(func(any, any) bool { n++; return true })
	t.Logf("keys hit: %d of %d; evictions: %d", n, nKeys, len(lb.matching("evicted")))
	ents, err := readEntries(c.Dir)
	require.NoError(t, err)
	for _, d := range ents {
		assert.True(t, isEntryName(d.Name()), "no temporary file left: %s", d.Name())
	}
}

func TestEvictionOrder(t *testing.T) {
	c, lb := newConfig(t)
	const n = 100_000
	a, b, cc, d, e, f := testKey(1), testKey(2), testKey(3), testKey(4), testKey(5), testKey(6)
	for i, k := range []Key{a, b, cc} {
		require.NoError(t, c.Put(k, payload(uint64(i), n)))
	}
	fileSize := dataOffset(len(must(encodeKey(a)))) + n
	now := time.Now()
	for i, k := range []Key{a, b, cc} { // a oldest, then b, then c
		ts := now.Add(time.Duration(i-3) * time.Hour)
		require.NoError(t, os.Chtimes(entryPath(t, c, k), ts, ts))
	}
	en := mustGet(t, c, a, n) // a becomes the most recently used
	require.NoError(t, en.Close())
	st, err := os.Stat(entryPath(t, c, a))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), st.ModTime(), time.Minute, "Get refreshed the recency")
	time.Sleep(10 * time.Millisecond)

	exists := func(k Key) bool {
		_, err := os.Stat(entryPath(t, c, k))
		return err == nil
	}
	// Room for three: adding d evicts only b, the least recently used.
	c.MaxBytes = 3 * fileSize
	require.NoError(t, c.Put(d, payload(4, n)))
	assert.Equal(t, []bool{true, false, true, true}, []bool{exists(a), exists(b), exists(cc), exists(d)}, "a b c d")

	time.Sleep(10 * time.Millisecond)
	// Room for two: adding e evicts c, then a (older than d).
	c.MaxBytes = 2 * fileSize
	require.NoError(t, c.Put(e, payload(5, n)))
	assert.Equal(t, []bool{false, false, false, true, true}, []bool{exists(a), exists(b), exists(cc), exists(d), exists(e)}, "a b c d e")
	ev := lb.matching("evicted")
	require.Len(t, ev, 3)
	for i, k := range []Key{b, cc, a} {
		assert.Contains(t, ev[i], entryPath(t, c, k), "eviction %d", i)
	}

	// A budget smaller than the newest entry alone: everything else goes,
	// the newest stays and is still a hit.
	c.MaxBytes = 1
	big := payload(6, 3*n)
	require.NoError(t, c.Put(f, big))
	ents, err := readEntries(c.Dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	en = mustGet(t, c, f, int64(len(big)))
	assert.Equal(t, big, en.Data)
	require.NoError(t, en.Close())
}

func TestForeignFilesUntouched(t *testing.T) {
	c, _ := newConfig(t)
	root := filepath.Dir(c.Dir)
	require.NoError(t, os.MkdirAll(c.Dir, 0o755))
	old := time.Now().Add(-48 * time.Hour)
	hx := strings.Repeat("ab", nameHexLen/2)
	content := payload(42, 200_000)

	type file struct {
		path string
		dir  bool
	}
	var foreign []file
	add := func(p string) {
		require.NoError(t, os.WriteFile(p, content, 0o644))
		require.NoError(t, os.Chtimes(p, old, old))
		foreign = append(foreign, file{path: p})
	}
	// Beside the cache folder: say, downloaded models.
	add(filepath.Join(root, "model.gguf"))
	add(filepath.Join(root, entryPrefix+hx+entrySuffix)) // entry-like, but outside Dir
	// In Dir, names that are not ours.
	for _, name := range []string{
		"notes.txt",
		entryPrefix + "xyz" + entrySuffix,
		entryPrefix + hx + entrySuffix + ".bak",
		strings.ToUpper(entryPrefix) + hx + entrySuffix,
		entryPrefix + hx[1:] + entrySuffix,
		entryPrefix + strings.ToUpper(hx) + entrySuffix,
		tempPrefix + "x" + tempSuffix,
		tempPrefix + hx + tempSuffix,
		tempPrefix + hx + "-" + hx + tempSuffix,
	} {
		add(filepath.Join(c.Dir, name))
	}
	// A folder and a symlink with entry names.
	sub := filepath.Join(c.Dir, entryPrefix+strings.Repeat("cd", nameHexLen/2)+entrySuffix)
	require.NoError(t, os.Mkdir(sub, 0o755))
	add(filepath.Join(sub, "inside"))
	foreign = append(foreign, file{path: sub, dir: true})
	link := filepath.Join(c.Dir, entryPrefix+strings.Repeat("ef", nameHexLen/2)+entrySuffix)
	require.NoError(t, os.Symlink(filepath.Join(root, "model.gguf"), link))

	// Our own temporary files: a stale one goes, a fresh one stays.
	stale := filepath.Join(c.Dir, tempPrefix+hx+"-0123456789abcdef"+tempSuffix)
	fresh := filepath.Join(c.Dir, tempPrefix+hx+"-fedcba9876543210"+tempSuffix)
	require.NoError(t, os.WriteFile(stale, content, 0o644))
	require.NoError(t, os.Chtimes(stale, old, old))
	require.NoError(t, os.WriteFile(fresh, content, 0o644))

	c.MaxBytes = 1
	for i := range 3 {
		require.NoError(t, c.Put(testKey(i), payload(uint64(i), 1000)))
	}
	for _, f := range foreign {
		st, err := os.Lstat(f.path)
		require.NoError(t, err, "%s must not be removed", f.path)
		if f.dir {
			assert.True(t, st.IsDir())
			continue
		}
		assert.True(t, st.ModTime().Equal(old), "%s mtime untouched", f.path)
		b, err := os.ReadFile(f.path)
		require.NoError(t, err)
		assert.Equal(t, content, b, "%s content untouched", f.path)
	}
	target, err := os.Readlink(link)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "model.gguf"), target)
	requireGone(t, stale)
	_, err = os.Stat(fresh)
	assert.NoError(t, err, "a fresh temporary file (a writer at work) stays")
	for i := range 2 {
		requireGone(t, entryPath(t, c, testKey(i)))
	}
	e := mustGet(t, c, testKey(2), 1000)
	require.NoError(t, e.Close())
}

// A symlink or a folder under an entry's name is a miss and left alone.
func TestGetLeavesNonFilesAlone(t *testing.T) {
	c, _ := newConfig(t)
	require.NoError(t, os.MkdirAll(c.Dir, 0o755))
	target := filepath.Join(filepath.Dir(c.Dir), "target")
	require.NoError(t, c.Put(testKey(0), payload(0, 5000)))
	// A perfectly valid entry elsewhere, reached through a symlink.
	require.NoError(t, os.Rename(entryPath(t, c, testKey(0)), target))
	link := entryPath(t, c, testKey(0))
	require.NoError(t, os.Symlink(target, link))
	requireMiss(t, c, testKey(0), 5000)
	_, err := os.Lstat(link)
	require.NoError(t, err, "symlink left alone")
	_, err = os.Stat(target)
	require.NoError(t, err, "its target left alone")

	dir := entryPath(t, c, testKey(1))
	require.NoError(t, os.Mkdir(dir, 0o755))
	requireMiss(t, c, testKey(1), 0)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, st.IsDir())
}

func TestReadOnlyDir(t *testing.T) {
	c, lb := newConfig(t)
	k, k2 := testKey(1), testKey(2)
	data := payload(1, 10_000)
	require.NoError(t, c.Put(k, data))
	require.NoError(t, os.Chmod(c.Dir, 0o500))
	t.Cleanup(func() { os.Chmod(c.Dir, 0o755) })
	probe := filepath.Join(c.Dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		os.Remove(probe)
		t.Skip("a 0500 folder is still writable here (running as root or with CAP_DAC_OVERRIDE), so a read-only cache cannot be simulated")
	}
	err := c.Put(k2, data)
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrPermission)
	assert.Contains(t, err.Error(), c.Dir, "the error says where")
	assert.NotEmpty(t, lb.matching("put"), "the failure is logged")
	requireMiss(t, c, k2, int64(len(data)))

	// What was cached before still serves.
	e := mustGet(t, c, k, int64(len(data)))
	assert.Equal(t, data, e.Data)
	require.NoError(t, e.Close())
	// A corrupt entry that cannot be removed is still only a miss.
	require.NoError(t, os.Chmod(entryPath(t, c, k), 0o644))
	fh, err := os.OpenFile(entryPath(t, c, k), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteAt([]byte{0xff}, int64(len(magic))-1)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	requireMiss(t, c, k, int64(len(data)))
	assert.NotEmpty(t, lb.matching("cannot remove"))
}

// A cache folder that cannot be created (a file is in the way): this
// failure is reproducible as root too.
func TestUnwritableDir(t *testing.T) {
	c, lb := newConfig(t)
	blocker := filepath.Join(filepath.Dir(c.Dir), "file")
	require.NoError(t, os.WriteFile(blocker, []byte("x"), 0o644))
	c.Dir = filepath.Join(blocker, "packed")
	err := c.Put(testKey(1), payload(1, 100))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "create cache folder")
	assert.NotEmpty(t, lb.matching("create cache folder"))
	requireMiss(t, c, testKey(1), 100)
	b, err := os.ReadFile(blocker)
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
}

func TestDisabled(t *testing.T) {
	c, lb := newConfig(t)
	k := testKey(1)
	data := payload(1, 1000)
	require.NoError(t, c.Put(k, data)) // a valid entry exists
	d := c
	d.Disabled = true
	requireMiss(t, d, k, int64(len(data)))
	require.NoError(t, d.Put(testKey(2), data))
	_, err := os.Stat(entryPath(t, c, testKey(2)))
	assert.ErrorIs(t, err, fs.ErrNotExist, "disabled Put writes nothing")

	d.Dir = filepath.Join(t.TempDir(), "never")
	require.NoError(t, d.Put(k, data))
	_, err = os.Stat(d.Dir)
	assert.ErrorIs(t, err, fs.ErrNotExist, "disabled Put creates no folder")
	e := mustGet(t, c, k, int64(len(data))) // untouched by the disabled calls
	require.NoError(t, e.Close())
	assert.Empty(t, lb.matching("miss"), "a disabled cache is silent")
}

func TestNoDirConfigured(t *testing.T) {
	var c Config
	require.Error(t, c.Put(testKey(1), []byte("x")))
	requireMiss(t, c, testKey(1), 1)
	_, err := c.Get(testKey(1), -1)
	require.Error(t, err, "a negative size is a caller error")
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, " 2 ": 2, "3k": 3 << 10, "3KB": 3 << 10, "3KiB": 3 << 10, "5m": 5 << 20, "8G": 8 << 30, "8 GiB": 8 << 30, "2t": 2 << 40} {
		got, err := ParseBytes(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "x", "0", "-1", "1.5G", "G", "99999999999T", "1X"} {
		_, err := ParseBytes(s)
		assert.Error(t, err, "%q", s)
	}
}

// BenchmarkGetValidate measures Get (length, header and CRC-32C of the
// data) on a 256 MiB entry that is in the page cache.
func BenchmarkGetValidate(b *testing.B) {
	const n = 256 << 20
	c := Config{Dir: b.TempDir(), MaxBytes: 1 << 40}
	k := testKey(1)
	require.NoError(b, c.Put(k, payload(1, n)))
	e := mustGet(b, c, k, n) // warm the page cache
	require.NoError(b, e.Close())
	b.SetBytes(n)
	b.ResetTimer()
	for b.Loop() {
		e := mustGet(b, c, k, n)
		e.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

// BenchmarkValid measures Entry.Valid (one fstat).
func BenchmarkValid(b *testing.B) {
	c := Config{Dir: b.TempDir(), MaxBytes: 1 << 40}
	require.NoError(b, c.Put(testKey(1), payload(1, 1000)))
	e := mustGet(b, c, testKey(1), 1000)
	defer e.Close()
	b.ReportAllocs()
	for b.Loop() {
		if !e.Valid() {
			b.Fatal("not valid")
		}
	}
}

// readEntries lists dir as os.ReadDir does, leaving out stamp files (whose
// own tests are in stamp_test.go).
func readEntries(dir string) ([]os.DirEntry, error) {
	ents, err := os.ReadDir(dir)
	out := ents[:0]
	for _, d := range ents {
		if !isStampName(d.Name()) {
			out = append(out, d)
		}
	}
	return out, err
}
