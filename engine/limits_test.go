package engine

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// writeTestModel writes b to a temporary file and returns its path.
func writeTestModel(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// heapAllocs is the bytes the Go heap has allocated so far (cumulative).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// The tiny test model opens and runs: the hostile variants below differ
// from it in one key only, so their refusals are the keys' doing.
func TestTestModelOpens(t *testing.T) {
	b, err := testmodel.Build(testmodel.Small)
	require.NoError(t, err)
	m, err := Open(writeTestModel(t, "small.gguf", b), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 32})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 5, 6}, logits))
	for _, l := range logits {
		require.False(t, math.IsNaN(float64(l)) || math.IsInf(float64(l), 0), "logit %v", l)
	}
}

// Metadata that asks for more than the file holds (a block count of 2^31,
// dimensions no tensor has) or numbers a model cannot run with (NaN, zero
// or negative RoPE base and norm epsilon) is ErrBadFile naming the key, and
// refusing it allocates no more than a small multiple of the file.
func TestHostileMetadataRefused(t *testing.T) {
	cases, err := testmodel.Hostile()
	require.NoError(t, err)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			path := writeTestModel(t, c.Name+".gguf", c.Data)
			runtime.GC()
			before := heapAllocs()
			m, err := Open(path, ModelParams{Threads: 1, Pack: PackOff})
			allocated := heapAllocs() - before
			if m != nil {
				m.Close()
			}
			require.Error(t, err)
			want := ErrBadFile
			if c.Unsupported {
				want = ErrUnsupported
			}
			assert.True(t, errors.Is(err, want), "want %v, got %v", want, err)
			assert.Contains(t, strings.ReplaceAll(err.Error(), path, "PATH"), c.Want)
			assert.Less(t, allocated, uint64(16<<20+4*len(c.Data)), "open allocated %d bytes for a %d-byte file", allocated, len(c.Data))
		})
	}
}

// Thread counts beyond MaxThreads are ErrInvalidArgument for models and
// sessions (a pool of 2^31 threads would allocate 128 GiB).
func TestThreadsCapped(t *testing.T) {
	b, err := testmodel.Build(testmodel.Small)
	require.NoError(t, err)
	path := writeTestModel(t, "small.gguf", b)
	for _, n := range []int{MaxThreads + 1, math.MaxInt32, -1} {
		_, err := Open(path, ModelParams{Threads: n})
		require.ErrorIs(t, err, ErrInvalidArgument, "threads %d", n)
		assert.Contains(t, err.Error(), "threads")
	}
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	for _, n := range []int{MaxThreads + 1, math.MaxInt32, -1} {
		_, err := m.NewSession(SessionParams{NCtx: 16, Threads: n})
		require.ErrorIs(t, err, ErrInvalidArgument, "session threads %d", n)
	}
	s, err := m.NewSession(SessionParams{NCtx: 16, Threads: 3})
	require.NoError(t, err)
	s.Close()
}

// openWithin runs Open in a goroutine and fails t if it does not return
// within d (opening a FIFO for reading blocks until a writer comes).
func openWithin(t *testing.T, path string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		m, err := Open(path, ModelParams{Threads: 1})
		if m != nil {
			m.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Open(%s) still blocked after %v", path, d)
		return nil
	}
}

// A directory, a FIFO or a device is refused before it is opened for
// reading, with a message saying what it is and naming the path once; a
// file that is not GGUF says so with its magic.
func TestOpenRefusesWhatIsNotAModel(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	notGGUF := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notGGUF, []byte("hello, this is text\n"), 0o644))
	missing := filepath.Join(dir, "missing.gguf")
	for _, c := range []struct {
		path string
		want string
		is   error
	}{
		{dir, "is a directory", ErrIO},
		{fifo, "FIFO", ErrIO},
		{"/dev/null", "is a device", ErrIO},
		{missing, "no such file", ErrIO},
		{notGGUF, `not a GGUF file (magic "hell"`, ErrBadFile},
	} {
		err := openWithin(t, c.path, 5*time.Second)
		require.Error(t, err, c.path)
		assert.ErrorIs(t, err, c.is, c.path)
		assert.Contains(t, err.Error(), c.want)
		assert.Equal(t, 1, strings.Count(err.Error(), c.path), "the path once in %q", err)
	}
	// gguf.Open refuses them too.
	for _, p := range []string{dir, fifo} {
		done := make(chan error, 1)
		go func() {
			f, err := gguf.Open(p)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err)
			assert.Contains(t, err.Error(), "is a")
		case <-time.After(5 * time.Second):
			t.Fatalf("gguf.Open(%s) blocked", p)
		}
	}
}

// A model file truncated after it is mapped but before its header or its
// tensors are read is ErrIO, not a SIGBUS that ends the process: memory
// faults are recovered during open (parsing, loading norms, packing), not
// only once the model runs.
func TestOpenTruncatedWhileMapped(t *testing.T) {
	b, err := testmodel.Build(testmodel.Small)
	require.NoError(t, err)
	parsed, err := gguf.Parse(b)
	require.NoError(t, err)
	dataOff := parsed.DataOffset
	for _, c := range []struct {
		name string
		size int64
	}{{"header gone", 0}, {"tensors gone", dataOff}} {
		for _, pack := range []PackMode{PackOff, PackOn} {
			t.Run(c.name+"/pack="+strconv.Itoa(int(pack)), func(t *testing.T) {
				path := writeTestModel(t, "small.gguf", b)
				testHookMapped = func(p string) { require.NoError(t, os.Truncate(p, c.size)) }
				defer func() { testHookMapped = nil }()
				m, err := Open(path, ModelParams{Threads: 1, Pack: pack, PackedCache: PackedCacheParams{Mode: CacheOff}})
				if m != nil {
					m.Close()
				}
				require.ErrorIs(t, err, ErrIO)
				assert.Contains(t, err.Error(), "mapping")
			})
		}
	}
	// A quantized model cut after its vectors: open copies the norms and
	// loses only what packing reads. Packing must turn the fault into an
	// error or fall back to the GGUF layout; the first decode then reads
	// the lost pages: ErrIO, not SIGBUS.
	t.Run("matrices gone/packing", func(t *testing.T) {
		q := testmodel.Small
		q.Quant = gguf.Q8_0
		qb, err := testmodel.Build(q)
		require.NoError(t, err)
		qf, err := gguf.Parse(qb)
		require.NoError(t, err)
		te, ok := qf.Tensor("token_embd.weight")
		require.True(t, ok)
		page := int64(os.Getpagesize())
		cut := (te.Offset + page - 1) / page * page
		require.Less(t, cut+page, int64(len(qb)), "the matrices span pages past the cut")
		path := writeTestModel(t, "q8.gguf", qb)
		testHookMapped = func(p string) { require.NoError(t, os.Truncate(p, cut)) }
		defer func() { testHookMapped = nil }()
		m, err := Open(path, ModelParams{Threads: 1, Pack: PackOn, PackedCache: PackedCacheParams{Mode: CacheOff}})
		if err != nil {
			require.ErrorIs(t, err, ErrIO)
			return
		}
		defer m.Close()
		s, err := m.NewSession(SessionParams{NCtx: 8})
		require.NoError(t, err)
		defer s.Close()
		err = s.Decode(1, make([]float32, m.Info().VocabSize))
		require.ErrorIs(t, err, ErrIO, "decode over the lost pages")
	})
	// OpenFile over a file gguf.Open mapped: the same.
	path := writeTestModel(t, "small.gguf", b)
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.Truncate(path, dataOff))
	m, err := OpenFile(f, ModelParams{Threads: 1, Pack: PackOff})
	if m != nil {
		m.Close()
	}
	require.ErrorIs(t, err, ErrIO)
}
