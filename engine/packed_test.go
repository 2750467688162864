package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/packcache"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// synthShape is the shape of a synthetic llama model for packing tests.
type synthShape struct {
	dim, layers, heads, kvHeads, ff int
	tied                            bool
	randomQuants                    bool      // fill Q8_0 blocks with random bytes (fast, for big models)
	quant                           gguf.Type // matrix type; the zero value (F32) means Q8_0
}

// smallShape has row counts that are not multiples of the fake layout's
// group (so remainder rows stay in the GGUF layout).
var smallShape = synthShape{dim: 64, layers: 2, heads: 4, kvHeads: 2, ff: 160}

// writeSynthModel writes a random-weight Q8_0 llama model with the
// stories260K vocabulary (512 tokens) to dir/name and returns its path.
// The same seed gives the same file.
func writeSynthModel(t testing.TB, dir, name string, sh synthShape, seed uint64) string {
	t.Helper()
	vf, err := gguf.Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer vf.Close()
	w := gguf.NewWriter()
	headDim := sh.dim / sh.heads
	set := func(k string, v any) { require.NoError(t, w.Set(k, v), "key %s", k) }
	set("general.architecture", "llama")
	set("general.name", "moonlm packing test "+strconv.FormatUint(seed, 10))
	set("llama.context_length", uint32(256))
	set("llama.embedding_length", uint32(sh.dim))
	set("llama.block_count", uint32(sh.layers))
	set("llama.feed_forward_length", uint32(sh.ff))
	set("llama.attention.head_count", uint32(sh.heads))
	set("llama.attention.head_count_kv", uint32(sh.kvHeads))
	set("llama.attention.layer_norm_rms_epsilon", float32(1e-5))
	set("llama.rope.dimension_count", uint32(headDim))
	for _, k := range vf.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := vf.Lookup(k)
			set(k, v)
		}
	}
	const vocab = 512
	r := rand.New(rand.NewPCG(seed, 7))
	qt := sh.quant
	if qt == gguf.F32 {
		qt = gguf.Q8_0
	}
	mat := func(name string, cols, rows int) {
		rb := kernels.RowBytes(qt, cols)
		data := make([]byte, rows*rb)
		if sh.randomQuants {
			require.Equal(t, gguf.Q8_0, qt, "random quants are Q8_0 blocks")
			for i := 0; i+8 <= len(data); i += 8 {
				binary.LittleEndian.PutUint64(data[i:], r.Uint64())
			}
			for off := 0; off < len(data); off += 34 {
				binary.LittleEndian.PutUint16(data[off:], 0x1400) // scale ~0.001
			}
		} else {
			row := make([]float32, cols)
			for i := 0; i < rows; i++ {
				for j := range row {
					row[j] = float32(r.NormFloat64() * 0.15)
				}
				kernels.QuantizeWeightRow(qt, row, data[i*rb:(i+1)*rb])
			}
		}
		require.NoError(t, w.AddTensor(name, qt, []int64{int64(cols), int64(rows)}, data))
	}
	vec := func(name string, n int) {
		data := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(1+0.1*float32(r.NormFloat64())))
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, []int64{int64(n)}, data))
	}
	mat("token_embd.weight", sh.dim, vocab)
	qDim, kvDim := sh.heads*headDim, sh.kvHeads*headDim
	for il := 0; il < sh.layers; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		vec(p+"attn_norm.weight", sh.dim)
		mat(p+"attn_q.weight", sh.dim, qDim)
		mat(p+"attn_k.weight", sh.dim, kvDim)
		mat(p+"attn_v.weight", sh.dim, kvDim)
		mat(p+"attn_output.weight", qDim, sh.dim)
		vec(p+"ffn_norm.weight", sh.dim)
		mat(p+"ffn_gate.weight", sh.dim, sh.ff)
		mat(p+"ffn_up.weight", sh.dim, sh.ff)
		mat(p+"ffn_down.weight", sh.ff, sh.dim)
	}
	vec("output_norm.weight", sh.dim)
	if !sh.tied {
		mat("output.weight", sh.dim, vocab)
	}
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	require.NoError(t, err)
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = w.WriteTo(bw)
	require.NoError(t, err)
	require.NoError(t, bw.Flush())
	require.NoError(t, f.Close())
	return path
}

// fakeLayout packs groups of 12 Q8_0 rows in reverse order and computes
// with the generic row kernel, counting its calls: a stand-in for the real
// layouts that makes a wrong row mapping or a missed packed path visible.
type fakeLayout struct {
	kernels.PackedLayout
	dots atomic.Int64
}

const fakeRows = 12

func newFakeLayout() *fakeLayout {
	fl := &fakeLayout{}
	generic, err := kernels.New("generic")
	if err != nil {
		panic(err)
	}
	gen := generic.RowDot(gguf.Q8_0)
	dot := func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
		fl.dots.Add(1)
		rb := kernels.RowBytes(gguf.Q8_0, cols)
		ab := kernels.ActivationBytes(gguf.Q8_0, cols)
		for k := 0; k < nTok; k++ {
			for r := 0; r < fakeRows; r++ {
				src := fakeRows - 1 - r
				y[k*yStride+r] = gen(cols, g[src*rb:(src+1)*rb], x[k*xStride:k*xStride+ab])
			}
		}
	}
	fl.PackedLayout = kernels.PackedLayout{
		Name: "test.q8_0.reversed.v1", Type: gguf.Q8_0, Rows: fakeRows, MaxTok: 3,
		GroupBytes: func(cols int) int { return fakeRows * kernels.RowBytes(gguf.Q8_0, cols) },
		Pack: func(dst, src []byte, cols int) {
			rb := kernels.RowBytes(gguf.Q8_0, cols)
			for r := 0; r < fakeRows; r++ {
				copy(dst[r*rb:(r+1)*rb], src[(fakeRows-1-r)*rb:(fakeRows-r)*rb])
			}
		},
		Dot: dot, DotGeneric: dot,
	}
	return fl
}

// withFakeLayout returns the fake Q8_0 layout and the detected kernel set
// with it as its Q8_0 layout.
func withFakeLayout(t *testing.T) (*fakeLayout, *kernels.Set) {
	t.Helper()
	fl := newFakeLayout()
	ks, err := kernels.Detect().WithPacked(gguf.Q8_0, &fl.PackedLayout)
	require.NoError(t, err)
	return fl, ks
}

// noCache keeps tests away from the user's cache folder.
var noCache = PackedCacheParams{Mode: CacheOff}

// runLogits opens path with p and returns the greedy continuation of a
// fixed prompt and the logits of every step.
func runLogits(t *testing.T, path string, p ModelParams) ([]int32, [][]float32, OpenStats) {
	t.Helper()
	m, err := Open(path, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	prompt := []int32{1, 403, 407, 261, 300, 11, 29, 75} // more tokens than a token tile
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill(prompt, logits))
	var toks []int32
	var all [][]float32
	for i := 0; i < 12; i++ {
		all = append(all, append([]float32(nil), logits...))
		tok := argmax(logits)
		toks = append(toks, tok)
		require.NoError(t, s.Decode(tok, logits))
	}
	return toks, all, m.OpenStats()
}

// requireSameLogits compares two runs: the same greedy tokens and logits
// within the kernels' tolerance (the packed fake layout uses the generic
// row kernel, the unpacked path the SIMD one, which sum in another order).
// This random-weight model amplifies a rounding difference a few decoded
// tokens in (the generic and SIMD sets, both unpacked, differ by 0.06 from
// the eighth step on), so the logits are compared on the first steps and
// the greedy tokens on all.
func requireSameLogits(t *testing.T, what string, wantToks, gotToks []int32, want, got [][]float32) {
	t.Helper()
	require.Equal(t, wantToks, gotToks, "%s: greedy tokens", what)
	for i := range want[:min(len(want), 6)] {
		for j := range want[i] {
			d := math.Abs(float64(want[i][j] - got[i][j]))
			require.LessOrEqual(t, d, 2e-3*(1+math.Abs(float64(want[i][j]))), "%s: step %d logit %d: %g vs %g", what, i, j, got[i][j], want[i][j])
		}
	}
}

func TestPackedMatchesUnpacked(t *testing.T) {
	for _, tied := range []bool{false, true} {
		t.Run("tied="+strconv.FormatBool(tied), func(t *testing.T) {
			fl, ks := withFakeLayout(t)
			sh := smallShape
			sh.tied = tied
			path := writeSynthModel(t, t.TempDir(), "m.gguf", sh, 1)

			offToks, offLogits, st := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOff, PackedCache: noCache})
			assert.Equal(t, PackSourceOff, st.PackSource)
			assert.Zero(t, fl.dots.Load(), "PackOff must not use the packed layout")

			m, err := Open(path, ModelParams{Kernels: ks, Threads: 1, Pack: PackOn, PackedCache: noCache})
			require.NoError(t, err)
			assert.Nil(t, m.embd.Packed, "token_embd stays in the GGUF layout for lookups")
			assert.NotNil(t, m.output.Packed, "the head is packed, tied or not")
			require.NoError(t, m.Close())

			toks, logits, st := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})
			assert.Equal(t, PackSourcePacked, st.PackSource)
			// 7 matrices per layer and the head; every one has >= 12 rows.
			assert.Equal(t, 7*sh.layers+1, st.PackedMatrices)
			assert.Positive(t, fl.dots.Load(), "the packed layout computed")
			requireSameLogits(t, "packed vs unpacked", offToks, toks, offLogits, logits)

			// The default packs whatever MOONLM_PACK says (the engine reads
			// no environment); PackOff does not.
			t.Setenv("MOONLM_PACK", "0")
			_, _, st = runLogits(t, path, ModelParams{Kernels: ks, Threads: 1, PackedCache: noCache})
			assert.Equal(t, PackSourcePacked, st.PackSource)
			_, _, st = runLogits(t, path, ModelParams{Kernels: ks, Threads: 1, Pack: PackOff, PackedCache: noCache})
			assert.Equal(t, PackSourceOff, st.PackSource)
		})
	}
}

// TestPackedWithoutLayouts: with no layout for the model's types nothing is
// packed and the source says so.
func TestPackedWithoutLayouts(t *testing.T) {
	ks, err := kernels.Detect().WithPacked(gguf.Q8_0, nil)
	require.NoError(t, err)
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)
	m, err := Open(path, ModelParams{Threads: 1, Pack: PackOn, PackedCache: noCache, Kernels: ks})
	require.NoError(t, err)
	defer m.Close()
	st := m.OpenStats()
	assert.Equal(t, PackSourceNone, st.PackSource)
	assert.Zero(t, st.PackedBytes)
	assert.Empty(t, m.PackedTensors())
}

// procStatusBytes reads a "kB" field of /proc/self/status.
func procStatusBytes(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status (not Linux?): %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err, "%s", line)
			return n << 10
		}
	}
	t.Skipf("/proc/self/status has no %s", field)
	return 0
}

func heapObjectBytes() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestPackedMemory opens a 170 MiB model with packing: the packed copy must
// replace the originals in residency (RSS after open at most file + 64 MiB,
// where keeping both would be twice the file), also while packing (the peak
// stays below one matrix's original plus its packed copy: the ffn matrices
// are 27 MiB each), and live outside the Go heap.
func TestPackedMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads RSS from /proc/self/status, Linux only")
	}
	if testing.Short() {
		t.Skip("writes a 170 MiB model")
	}
	_, ks := withFakeLayout(t)
	sh := synthShape{dim: 1024, layers: 2, heads: 8, kvHeads: 8, ff: 24576, randomQuants: true}
	path := writeSynthModel(t, t.TempDir(), "big.gguf", sh, 3)
	st, err := os.Stat(path)
	require.NoError(t, err)
	debug.FreeOSMemory() // the writer's buffers
	heap0 := heapObjectBytes()
	rss0 := procStatusBytes(t, "VmRSS")
	// Reset the peak (VmHWM) to the current RSS.
	peakReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil

	m, err := Open(path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})
	require.NoError(t, err)
	defer m.Close()
	ost := m.OpenStats()
	require.Equal(t, PackSourcePacked, ost.PackSource)
	require.Greater(t, ost.PackedBytes, st.Size()*9/10, "nearly all weights are packed")

	hwm := procStatusBytes(t, "VmHWM")
	heap1 := heapObjectBytes()
	rss, anon, file := procStatusBytes(t, "VmRSS"), procStatusBytes(t, "RssAnon"), procStatusBytes(t, "RssFile")
	t.Logf("file %d MiB, packed %d MiB; after open: VmRSS %d MiB (anon %d, file %d), peak %d MiB, Go heap objects %+d MiB",
		st.Size()>>20, ost.PackedBytes>>20, rss>>20, anon>>20, file>>20, hwm>>20, (heap1-heap0)>>20)
	// Keeping the originals resident would add the file's size again.
	assert.LessOrEqual(t, rss-rss0, ost.PackedBytes+32<<20, "RSS growth at open (before: %d MiB)", rss0>>20)
	if peakReset {
		assert.LessOrEqual(t, hwm-rss0, ost.PackedBytes+20<<20, "peak RSS growth while packing (before: %d MiB)", rss0>>20)
	} else {
		t.Log("cannot reset the peak RSS (/proc/self/clear_refs): peak not checked")
	}
	if rss0 < 48<<20 {
		assert.LessOrEqual(t, rss, st.Size()+64<<20, "RSS after open")
	} else {
		t.Logf("the process started at %d MiB (race detector?): only the growth is checked", rss0>>20)
	}
	assert.Less(t, heap1-heap0, ost.PackedBytes/8, "the packed weights are not on the Go heap")
	runtime.KeepAlive(m)
}

// cacheIn returns pack params that use a cache in dir.
func cacheIn(dir string, ks *kernels.Set) ModelParams {
	return ModelParams{Threads: 2, Pack: PackOn, PackedCache: PackedCacheParams{Mode: CacheOn, Dir: dir}, Kernels: ks}
}

// cacheEntries lists the entry files in dir.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".ok") { // an entry's stamp (internal/packcache)
			out = append(out, filepath.Join(dir, de.Name()))
		}
	}
	return out
}

// packedBytes opens path with p and returns a copy of its packed block and
// the open stats.
func packedBytes(t *testing.T, path string, p ModelParams) ([]byte, OpenStats) {
	t.Helper()
	m, err := Open(path, p)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	require.NotNil(t, m.packed)
	var src []byte
	if m.packed.entry != nil {
		src = m.packed.entry.Data
	} else {
		src = m.packed.mem
	}
	return append([]byte(nil), src...), m.OpenStats()
}

// TestPackedCacheColdWarm: the first open packs and publishes, the second
// maps the entry; the bytes are identical to packing in memory and the
// logits to the unpacked and packed paths.
func TestPackedCacheColdWarm(t *testing.T) {
	_, ks := withFakeLayout(t)
	dir := filepath.Join(t.TempDir(), "cache")
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)

	mem, st := packedBytes(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})
	require.Equal(t, PackSourcePacked, st.PackSource)
	require.Empty(t, cacheEntries(t, dir), "cache off writes nothing")

	m, err := Open(path, cacheIn(dir, ks))
	require.NoError(t, err)
	require.NoError(t, m.WaitPacked())
	require.Len(t, cacheEntries(t, dir), 1, "WaitPacked waited for the publish")
	require.NoError(t, m.Close())
	require.NoError(t, os.RemoveAll(dir))
	cold, st := packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)
	require.Len(t, cacheEntries(t, dir), 1, "Close waited for the publish")
	warm, st := packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheHit, st.PackSource)
	require.Equal(t, mem, cold)
	require.Equal(t, cold, warm, "packed bytes cold vs warm")
	require.Len(t, cacheEntries(t, dir), 1)

	offToks, offLogits, _ := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOff, PackedCache: noCache})
	toks, logits, _ := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})
	requireSameLogits(t, "packed vs generic", offToks, toks, offLogits, logits)
	ctoks, clogits, st := runLogits(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheHit, st.PackSource)
	require.Equal(t, toks, ctoks)
	require.Equal(t, logits, clogits, "cached and in-memory packed weights compute the same")

	// Decoding on the mapped entry (through the fault-watching layouts)
	// allocates nothing.
	m, err = Open(path, cacheIn(dir, ks))
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, PackSourceCacheHit, m.OpenStats().PackSource)
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	out := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 403}, out))
	allocs := testing.AllocsPerRun(10, func() {
		if err := s.Decode(407, out); err != nil {
			panic(err)
		}
	})
	if raceEnabled {
		t.Logf("race detector: %v allocations per token not checked (sync.Pool drops items at random)", allocs)
	} else {
		assert.Zero(t, allocs, "allocations per decoded token")
	}
}

// TestPackedCacheInvalidation: a changed model file gets a new entry.
func TestPackedCacheInvalidation(t *testing.T) {
	_, ks := withFakeLayout(t)
	dir := filepath.Join(t.TempDir(), "cache")
	mdir := t.TempDir()
	path := writeSynthModel(t, mdir, "m.gguf", smallShape, 1)
	_, st := packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)

	// Same size and header, other weights; the modification time moves.
	old, err := os.Stat(path)
	require.NoError(t, err)
	writeSynthModel(t, mdir, "m.gguf", smallShape, 2)
	now, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, old.Size(), now.Size())
	require.NoError(t, os.Chtimes(path, now.ModTime(), old.ModTime().Add(time.Second)))
	b, st := packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource, "the old entry is not used for the new file")
	require.Len(t, cacheEntries(t, dir), 2)
	mem, _ := packedBytes(t, path, ModelParams{Kernels: ks, Threads: 1, Pack: PackOn, PackedCache: noCache})
	require.Equal(t, mem, b)
	_, st = packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheHit, st.PackSource)

	// A different layout (name) is another entry too.
	fl := newFakeLayout()
	fl.Name = "test.q8_0.reversed.v2"
	ks2, err := kernels.Detect().WithPacked(gguf.Q8_0, &fl.PackedLayout)
	require.NoError(t, err)
	_, st = packedBytes(t, path, cacheIn(dir, ks2))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)
	require.Len(t, cacheEntries(t, dir), 3)
}

// TestPackedCacheCorruptEntry: a damaged entry (bytes flipped at random
// offsets, or truncated) is a miss: the model packs in memory, computes
// the same logits and rewrites the entry.
func TestPackedCacheCorruptEntry(t *testing.T) {
	w := newWarmEntry(t)
	ks, dir, path, wantToks, wantLogits, good := w.ks, w.dir, w.path, w.toks, w.logits, w.good
	entries := []string{w.entry}
	r := rand.New(rand.NewPCG(5, 5))
	damage := map[string]func(b []byte) []byte{
		"flip": func(b []byte) []byte {
			b = append([]byte(nil), b...)
			for i := 0; i < 3; i++ {
				b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			}
			return b
		},
		"truncate": func(b []byte) []byte { return b[:r.IntN(len(b))] },
	}
	for _, name := range []string{"flip", "truncate"} {
		for round := 0; round < 3; round++ {
			require.NoError(t, os.WriteFile(entries[0], damage[name](good), 0o644))
			toks, logits, st := runLogits(t, path, cacheIn(dir, ks))
			require.Equal(t, PackSourceCacheWrite, st.PackSource, "%s %d: the damaged entry is not used", name, round)
			require.Equal(t, wantToks, toks)
			require.Equal(t, wantLogits, logits)
			got, err := os.ReadFile(entries[0])
			require.NoError(t, err)
			require.Equal(t, good, got, "%s %d: the entry was rewritten", name, round)
		}
	}
}

// TestPackedCacheUnwritable: a cache folder that cannot be written falls
// back to the in-memory copy; the model opens, computes and closes.
func TestPackedCacheUnwritable(t *testing.T) {
	_, ks := withFakeLayout(t)
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)
	wantToks, wantLogits, _ := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})

	// Below a regular file: no one, not even root, can create it.
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	toks, logits, st := runLogits(t, path, cacheIn(filepath.Join(blocker, "cache"), ks))
	assert.Equal(t, PackSourceCacheWrite, st.PackSource, "the publish was attempted")
	require.Equal(t, wantToks, toks)
	require.Equal(t, wantLogits, logits)

	// A read-only folder (permissions do not bind root).
	ro := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(ro, 0o555))
	t.Cleanup(func() { os.Chmod(ro, 0o755) })
	if f, err := os.Create(filepath.Join(ro, "probe")); err == nil {
		f.Close()
		t.Logf("running as a user who can write a 0555 folder (root?): the read-only case is covered by the file-blocked folder above")
		return
	}
	toks, logits, _ = runLogits(t, path, cacheIn(ro, ks))
	require.Equal(t, wantToks, toks)
	require.Equal(t, wantLogits, logits)
	require.Empty(t, cacheEntries(t, ro))
}

// TestPackedCacheParamsOnly: the cache follows its parameters alone. The
// default mode uses the folder it is given and no folder means no cache,
// whatever MOONLM_PACKED_CACHE and MOONLM_PACKED_CACHE_DIR say; CacheOff
// writes nothing.
func TestPackedCacheParamsOnly(t *testing.T) {
	_, ks := withFakeLayout(t)
	envDir := filepath.Join(t.TempDir(), "env-cache")
	dir := filepath.Join(t.TempDir(), "cache")
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)
	t.Setenv("MOONLM_PACKED_CACHE_DIR", envDir)
	t.Setenv("MOONLM_PACKED_CACHE", "1")
	_, st := packedBytes(t, path, ModelParams{Kernels: ks, Threads: 1})
	assert.Equal(t, PackSourcePacked, st.PackSource, "no folder: no cache")
	_, st = packedBytes(t, path, ModelParams{Kernels: ks, Threads: 1, PackedCache: PackedCacheParams{Mode: CacheOn}})
	assert.Equal(t, PackSourcePacked, st.PackSource, "CacheOn without a folder: no cache")
	_, err := os.Stat(envDir)
	assert.True(t, os.IsNotExist(err), "the environment's folder is not used: %v", err)

	t.Setenv("MOONLM_PACKED_CACHE", "0")
	_, st = packedBytes(t, path, ModelParams{Kernels: ks, Threads: 1, PackedCache: PackedCacheParams{Mode: CacheOff, Dir: dir}})
	assert.Equal(t, PackSourcePacked, st.PackSource)
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "CacheOff creates no cache folder: %v", err)
	_, st = packedBytes(t, path, ModelParams{Kernels: ks, Threads: 1, PackedCache: PackedCacheParams{Dir: dir}})
	assert.Equal(t, PackSourceCacheWrite, st.PackSource, "the default mode uses the folder given")
	assert.Len(t, cacheEntries(t, dir), 1)
}

// TestPackedCacheTruncatedWhileOpen truncates the entry a model maps: the
// next evaluation faults on the lost pages, which must be ErrIO (not a
// crash); the fault starts the repair, which packs in memory in place of
// the entry, and the model computes the same logits again.
func TestPackedCacheTruncatedWhileOpen(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("replacing the lost pages needs mremap (Linux)")
	}
	_, ks := withFakeLayout(t)
	dir := filepath.Join(t.TempDir(), "cache")
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)
	_, st := packedBytes(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)
	entries := cacheEntries(t, dir)
	require.Len(t, entries, 1)

	for _, threads := range []int{1, 2} {
		m, err := Open(path, ModelParams{Kernels: ks, Threads: threads, Pack: PackOn, PackedCache: PackedCacheParams{Mode: CacheOn, Dir: dir}})
		require.NoError(t, err)
		require.Equal(t, PackSourceCacheHit, m.OpenStats().PackSource)
		prompt := []int32{1, 403, 407, 261}
		want := make([]float32, m.Info().VocabSize)
		s, err := m.NewSession(SessionParams{NCtx: 32})
		require.NoError(t, err)
		require.NoError(t, s.Prefill(prompt, want))
		ok, err := m.RecoverPackedCache()
		require.NoError(t, err)
		require.False(t, ok, "an intact entry needs no recovery")

		good, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		require.NoError(t, os.Truncate(entries[0], 4096))
		require.NoError(t, s.Rewind(0))
		got := make([]float32, len(want))
		err = s.Prefill(prompt, got)
		require.ErrorIs(t, err, ErrIO, "threads %d", threads)

		// The fault started the repair in the background.
		require.Eventually(t, func() bool { return m.OpenStats().PackSource == PackSourcePacked },
			10*time.Second, time.Millisecond, "threads %d: the model switched to in-memory packing", threads)
		ok, err = m.RecoverPackedCache()
		require.NoError(t, err)
		require.False(t, ok, "already repaired")
		require.NoError(t, s.Rewind(0))
		require.NoError(t, s.Prefill(prompt, got))
		require.Equal(t, want, got, "threads %d: logits after recovery", threads)
		s.Close()
		require.NoError(t, m.Close())
		require.NoError(t, os.WriteFile(entries[0], good, 0o644))
	}
}

// TestPackedAllocationFailure: when the packed block cannot be allocated
// the model opens unpacked and computes as PackOff does.
func TestPackedAllocationFailure(t *testing.T) {
	_, ks := withFakeLayout(t)
	path := writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)
	wantToks, wantLogits, _ := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOff, PackedCache: noCache})
	prev := mapPacked
	mapPacked = func(n int) ([]byte, error) { return nil, unix.ENOMEM }
	t.Cleanup(func() { mapPacked = prev })
	toks, logits, st := runLogits(t, path, ModelParams{Kernels: ks, Threads: 2, Pack: PackOn, PackedCache: noCache})
	assert.Equal(t, PackSourceOff, st.PackSource)
	assert.Zero(t, st.PackedBytes)
	require.Equal(t, wantToks, toks)
	require.Equal(t, wantLogits, logits)
}

// TestPackedRealLayouts runs the layouts the kernels register (not the
// fake one) through the engine on a synthetic model of each packable type:
// packed in memory and mapped from the cache they give the greedy tokens of
// the pure-Go kernels, and logits no further from those than the unpacked
// SIMD kernels are (this random model amplifies rounding: the unpacked
// AVX-512 kernels already differ from pure Go by up to ~0.1); cached and
// in-memory packing are bit-identical.
func TestPackedRealLayouts(t *testing.T) {
	best := kernels.Detect()
	generic, err := kernels.New("generic")
	require.NoError(t, err)
	maxDiff := func(a, b [][]float32) float64 {
		m := 0.0
		for i := range a {
			for j := range a[i] {
				m = math.Max(m, math.Abs(float64(a[i][j]-b[i][j])))
			}
		}
		return m
	}
	for _, qt := range []gguf.Type{gguf.Q8_0, gguf.Q4_K, gguf.Q6_K} {
		t.Run(qt.String(), func(t *testing.T) {
			if best.Packed(qt) == nil {
				t.Skipf("the %s kernels have no packed %s layout", best, qt)
			}
			sh := synthShape{dim: 256, layers: 2, heads: 4, kvHeads: 2, ff: 512, quant: qt}
			path := writeSynthModel(t, t.TempDir(), "m.gguf", sh, 11)
			dir := filepath.Join(t.TempDir(), "cache")

			genToks, genLogits, st := runLogits(t, path, ModelParams{Threads: 2, Pack: PackOn, PackedCache: noCache, Kernels: generic})
			require.Equal(t, PackSourceNone, st.PackSource, "the pure-Go kernels have no packed layouts")

			_, simdLogits, _ := runLogits(t, path, ModelParams{Threads: 2, Pack: PackOff, PackedCache: noCache})
			toks, logits, st := runLogits(t, path, ModelParams{Threads: 2, Pack: PackOn, PackedCache: noCache})
			require.Equal(t, PackSourcePacked, st.PackSource)
			require.Equal(t, 7*sh.layers+1, st.PackedMatrices)
			require.Equal(t, genToks, toks, "greedy tokens, packed vs pure Go")
			d0, d := maxDiff(genLogits, simdLogits), maxDiff(genLogits, logits)
			t.Logf("largest logit difference from pure Go: unpacked %s %.4f, packed %.4f", best, d0, d)
			assert.LessOrEqual(t, d, 2*d0+0.05, "packed logits stray further from pure Go than the unpacked SIMD kernels")

			_, _, st = runLogits(t, path, cacheIn(dir, nil))
			require.Equal(t, PackSourceCacheWrite, st.PackSource)
			ctoks, clogits, st := runLogits(t, path, cacheIn(dir, nil))
			require.Equal(t, PackSourceCacheHit, st.PackSource)
			require.Equal(t, toks, ctoks)
			require.Equal(t, logits, clogits, "cached vs in-memory packing")
		})
	}
}

// TestCacheConfig: the cache's configuration comes from the parameters
// alone: a folder turns it on unless CacheOff, the budget defaults, and
// only DebugCache logs its fallbacks.
func TestCacheConfig(t *testing.T) {
	t.Setenv("MOONLM_PACKED_CACHE_DIR", t.TempDir())
	t.Setenv("MOONLM_DEBUG", "all")
	c := cacheConfig(PackedCacheParams{}, 0)
	assert.True(t, c.Disabled, "no folder: no cache")
	assert.Empty(t, c.Dir)
	assert.Equal(t, int64(packcache.DefaultMaxBytes), c.MaxBytes)
	assert.Nil(t, c.Logf)
	c = cacheConfig(PackedCacheParams{Dir: "d", MaxBytes: 7}, DebugPack)
	assert.False(t, c.Disabled)
	assert.Equal(t, "d", c.Dir)
	assert.Equal(t, int64(7), c.MaxBytes)
	assert.Nil(t, c.Logf, "DebugPack logs packing, not the cache")
	c = cacheConfig(PackedCacheParams{Mode: CacheOff, Dir: "d"}, DebugCache)
	assert.True(t, c.Disabled)
	assert.NotNil(t, c.Logf)
}

// TestPackedCacheLazyVerify: a warm open maps the entry after checking its
// header, key and length only; one flipped byte in the data is caught by
// the background checksum before the first forward pass reads it: the
// logits are the intact model's, the damaged entry is replaced by the
// repacked weights, and the next open is a clean hit.
func TestPackedCacheLazyVerify(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("replacing the entry's pages needs mremap (Linux)")
	}
	w := newWarmEntry(t)
	ks, dir, path, wantToks, wantLogits, good := w.ks, w.dir, w.path, w.toks, w.logits, w.good
	entries := []string{w.entry}

	hold := make(chan struct{})
	beforeVerify = func() { <-hold }
	t.Cleanup(func() { beforeVerify = func() {} })
	for _, at := range []int{len(good) - 1, len(good) - len(good)/3, len(good) - 4096} {
		bad := append([]byte(nil), good...)
		bad[at] ^= 0x10
		require.NoError(t, os.WriteFile(entries[0], bad, 0o644))
		m, err := Open(path, cacheIn(dir, ks))
		require.NoError(t, err)
		require.Equal(t, PackSourceCacheHit, m.OpenStats().PackSource, "byte %d: the open does not read the data", at)
		hold <- struct{}{} // the verification may start
		s, err := m.NewSession(SessionParams{NCtx: 64})
		require.NoError(t, err)
		logits := make([]float32, m.Info().VocabSize)
		require.NoError(t, s.Prefill([]int32{1, 403, 407, 261, 300, 11, 29, 75}, logits))
		require.Equal(t, wantLogits[0], logits, "byte %d: the first logits come from verified weights", at)
		assert.Equal(t, PackSourceCacheWrite, m.OpenStats().PackSource, "byte %d: repacked and republished", at)
		s.Close()
		require.NoError(t, m.Close())
		got, err := os.ReadFile(entries[0])
		require.NoError(t, err)
		require.Equal(t, good, got, "byte %d: the entry was rewritten", at)
	}
	beforeVerify = func() {}
	toks, logits, st := runLogits(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheHit, st.PackSource)
	require.Equal(t, wantToks, toks)
	require.Equal(t, wantLogits, logits)
}

// TestPackedCacheLazyVerifyRepairFails: when a damaged entry cannot be
// replaced, every forward pass fails with ErrIO (never runs on the damaged
// bytes), and the next open packs afresh.
func TestPackedCacheLazyVerifyRepairFails(t *testing.T) {
	w := newWarmEntry(t)
	ks, dir, path, wantLogits := w.ks, w.dir, w.path, w.logits
	entries := []string{w.entry}
	b := append([]byte(nil), w.good...)
	b[len(b)-100] ^= 1
	require.NoError(t, os.WriteFile(entries[0], b, 0o644))

	old := repairPages
	repairPages = func(int) ([]byte, error) { return nil, errors.New("test: no pages") }
	t.Cleanup(func() { repairPages = old })
	m, err := Open(path, cacheIn(dir, ks))
	require.NoError(t, err)
	require.ErrorIs(t, m.WaitPacked(), packcache.ErrCorrupt, "WaitPacked gives the verdict")
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	logits := make([]float32, m.Info().VocabSize)
	for range 2 {
		err = s.Prefill([]int32{1, 403}, logits)
		require.ErrorIs(t, err, ErrIO)
		require.ErrorIs(t, err, packcache.ErrCorrupt)
	}
	s.Close()
	require.NoError(t, m.Close())
	repairPages = old
	_, err = os.Stat(entries[0])
	require.True(t, os.IsNotExist(err), "the damaged entry was removed: %v", err)

	_, logits2, st := runLogits(t, path, cacheIn(dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)
	require.Equal(t, wantLogits, logits2)
}

// warmEntry is a synthetic model with a fake packed layout, opened once
// with a cache in a new folder: its one entry's path and bytes, and the
// tokens and logits of runLogits.
type warmEntry struct {
	ks               *kernels.Set
	dir, path, entry string
	toks             []int32
	logits           [][]float32
	good             []byte
}

func newWarmEntry(t *testing.T) warmEntry {
	t.Helper()
	_, ks := withFakeLayout(t)
	w := warmEntry{ks: ks, dir: filepath.Join(t.TempDir(), "cache"),
		path: writeSynthModel(t, t.TempDir(), "m.gguf", smallShape, 1)}
	var st OpenStats
	w.toks, w.logits, st = runLogits(t, w.path, cacheIn(w.dir, ks))
	require.Equal(t, PackSourceCacheWrite, st.PackSource)
	entries := cacheEntries(t, w.dir)
	require.Len(t, entries, 1)
	w.entry = entries[0]
	var err error
	w.good, err = os.ReadFile(w.entry)
	require.NoError(t, err)
	return w
}

// TestPackedCacheTrusted: an entry stamped as verified (the publish stamps
// what it wrote) is used without reading its data first; the background
// prefault of its page tables on or off gives the same logits as the
// packing that wrote it. A byte changed in place afterwards voids the
// stamp: the next open verifies, catches it before the first forward pass,
// repacks and republishes.
func TestPackedCacheTrusted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("stamps need the file's change time (Linux)")
	}
	w := newWarmEntry(t)
	for _, prefault := range []bool{true, false} {
		old := prefaultPacked
		prefaultPacked = prefault
		m, err := Open(w.path, cacheIn(w.dir, w.ks))
		require.NoError(t, err)
		require.Equal(t, PackSourceCacheHit, m.OpenStats().PackSource)
		require.True(t, m.packed.entry.Trusted(), "prefault %v: the entry the publish stamped is trusted", prefault)
		require.True(t, m.packed.verified.Load(), "prefault %v: nothing to wait for", prefault)
		require.NoError(t, m.Close())
		toks, logits, st := runLogits(t, w.path, cacheIn(w.dir, w.ks))
		prefaultPacked = old
		require.Equal(t, PackSourceCacheHit, st.PackSource)
		require.Equal(t, w.toks, toks, "prefault %v", prefault)
		require.Equal(t, w.logits, logits, "prefault %v: the same logits as the packing that wrote the entry", prefault)
	}

	f, err := os.OpenFile(w.entry, os.O_RDWR, 0)
	require.NoError(t, err)
	b := []byte{w.good[len(w.good)-777] ^ 0x20}
	_, err = f.WriteAt(b, int64(len(w.good)-777))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	m, err := Open(w.path, cacheIn(w.dir, w.ks))
	require.NoError(t, err)
	require.False(t, m.packed.entry.Trusted(), "a file changed in place is not trusted")
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 403, 407, 261, 300, 11, 29, 75}, logits))
	require.Equal(t, w.logits[0], logits, "the first logits come from verified weights")
	require.Equal(t, PackSourceCacheWrite, m.OpenStats().PackSource, "the damaged entry was repacked")
	s.Close()
	require.NoError(t, m.Close())
	got, err := os.ReadFile(w.entry)
	require.NoError(t, err)
	require.Equal(t, w.good, got, "the entry was rewritten")
	m, err = Open(w.path, cacheIn(w.dir, w.ks))
	require.NoError(t, err)
	assert.True(t, m.packed.entry.Trusted(), "the rewritten entry is stamped again")
	require.NoError(t, m.Close())
}
