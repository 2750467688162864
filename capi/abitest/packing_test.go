package abitest

import (
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The packing members of moonlm_model_params: defaults, validation, and a
// caller built before they existed.
func TestModelParamsPacking(t *testing.T) {
	l := lib(t)
	missing := filepath.Join(t.TempDir(), "missing.gguf")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	var def ModelParams
	def.Pack, def.PackedCache, def.PackedCacheBytes = 7, 7, 7 // overwritten
	l.ModelParamsDefault(&def)
	assert.Equal(t, unsafe.Sizeof(def), def.Size)
	assert.Equal(t, int32(0), def.Pack, "MOONLM_PACK_DEFAULT")
	assert.Equal(t, int32(0), def.PackedCache, "MOONLM_PACKED_CACHE_DEFAULT")
	assert.Nil(t, def.PackedCacheDir)
	assert.Equal(t, uint64(0), def.PackedCacheBytes)

	var out uintptr
	for _, c := range []struct {
		name   string
		set    func(p *ModelParams)
		member string
	}{
		{"pack -1", func(p *ModelParams) { p.Pack = -1 }, "pack"},
		{"pack 3", func(p *ModelParams) { p.Pack = 3 }, "pack"},
		{"packed_cache -1", func(p *ModelParams) { p.PackedCache = -1 }, "packed_cache"},
		{"packed_cache 3", func(p *ModelParams) { p.PackedCache = 3 }, "packed_cache"},
		{"packed_cache_bytes 2^63", func(p *ModelParams) { p.PackedCacheBytes = 1 << 63 }, "packed_cache_bytes"},
		{"packed_cache_bytes -1", func(p *ModelParams) { p.PackedCacheBytes = math.MaxUint64 }, "packed_cache_bytes"},
	} {
		p := def
		c.set(&p)
		out = 99
		requireStatus(t, l, InvalidArg, l.ModelOpen(missing, &p, &out), c.name)
		assert.Contains(t, l.LastError(), "moonlm_model_params."+c.member+" is", c.name)
		assert.Zero(t, out, "%s: *out cleared", c.name)
	}

	// Every valid combination gets past validation to the file (missing).
	dir := cstr(t.TempDir())
	for pack := int32(0); pack <= 2; pack++ {
		for cache := int32(0); cache <= 2; cache++ {
			p := def
			p.Pack, p.PackedCache, p.PackedCacheDir, p.PackedCacheBytes = pack, cache, dir, math.MaxInt64
			requireStatus(t, l, IOErr, l.ModelOpen(missing, &p, &out), "valid packing settings")
		}
	}
	runtime.KeepAlive(dir)

	// A caller built before the packing members passes the old size; the
	// library must not read beyond it (here: garbage that would be
	// rejected if it were read).
	old := def
	old.Size = modelParamsV1Size
	old.Pack, old.PackedCache, old.PackedCacheBytes = 99, -5, math.MaxUint64
	requireStatus(t, l, IOErr, l.ModelOpen(missing, &old, &out), "old-size params")
	old.Size = modelParamsV1Size - 1
	requireStatus(t, l, InvalidArg, l.ModelOpen(missing, &old, &out), "smaller than the first version")
	assert.Contains(t, l.LastError(), "size")

	model := shareddata.Path(t, stories)
	old.Size = modelParamsV1Size
	requireStatus(t, l, OK, l.ModelOpen(model, &old, &out), "old-size params, real model")
	require.NotZero(t, out)
	assert.Equal(t, OK, l.ModelFree(out))
}

// packableModel returns a shared synth model some of whose matrices have a
// packed layout with this CPU's kernels (the library picks the same kernel
// set: same CPU, same MOONLM_KERNELS), skipping the test if none has.
func packableModel(t *testing.T, skip ...string) string {
	t.Helper()
	tried := []string{}
next:
	for _, rel := range []string{"synth/synth-llama-Q8_0.gguf", "synth/synth-llama-Q4_K_M.gguf", "synth/synth-qwen3-Q8_0.gguf", "synth/synth-qwen3-Q4_K_M.gguf"} {
		for _, s := range skip {
			if s == rel {
				continue next
			}
		}
		path := shareddata.Path(t, rel)
		f, err := gguf.Open(path)
		require.NoError(t, err)
		for _, ten := range f.Tensors() {
			if len(ten.Shape) == 2 && strings.HasPrefix(ten.Name, "blk.") && kernels.Detect().Packed(ten.Type) != nil {
				f.Close()
				return rel
			}
		}
		f.Close()
		tried = append(tried, rel)
	}
	t.Skipf("no packed layout for the block matrices of %v with this CPU's kernels: nothing to pack or cache", tried)
	return ""
}

// openUse opens rel with the given packing settings, reads its open
// stats and the logits of a short prompt, and frees it, which waits for
// the engine to finish writing the cache entry (it writes in the
// background while the model is in use).
func openUse(t *testing.T, l *Lib, rel string, pack, cache int32, dir string, budget uint64) (OpenStats, []float32) {
	t.Helper()
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.NThreads = 2
	p.Pack, p.PackedCache, p.PackedCacheBytes = pack, cache, budget
	if dir != "" {
		p.PackedCacheDir = cstr(dir)
	}
	var m uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, OK, l.ModelOpen(shareddata.Path(t, rel), &p, &m), "opening "+rel)
	defer func() { requireStatus(t, l, OK, l.ModelFree(m), "model_free") }()
	st := openStats(t, l, m)

	var sp SessionParams
	l.SessionParamsDefault(&sp)
	sp.NCtx = 32
	var s uintptr
	requireStatus(t, l, OK, l.SessionNew(m, &sp, &s), "session_new")
	defer func() { requireStatus(t, l, OK, l.SessionFree(s), "session_free") }()
	toks := []int32{1, 40, 90, 200, 7, 311}
	logits := make([]float32, modelInfo(t, l, m).NVocab)
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(len(logits))), "prefill")
	return st, logits
}

// cacheFiles counts the regular files below dir.
func cacheFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	require.NoError(t, err)
	return n
}

// openStats returns moonlm_model_open_stats of m.
func openStats(t *testing.T, l *Lib, m uintptr) OpenStats {
	t.Helper()
	var s OpenStats
	s.Size = unsafe.Sizeof(s)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, OK, l.ModelOpenStats(m, &s), "model_open_stats")
	return s
}

// The packing settings reach the engine: packed_cache_dir receives an
// entry, a second open reuses it, and packed_cache or pack off write none;
// moonlm_model_open_stats says which path each open took, and the logits
// are the same on every path.
func TestPackedCacheParamsReachEngine(t *testing.T) {
	l := lib(t)
	rel := packableModel(t)
	const on, off = 1, 2

	dir := t.TempDir()
	st, cold := openUse(t, l, rel, on, on, dir, 0)
	assert.Equal(t, PackSourceCacheWrite, st.PackSource, "cold open with the cache on: %+v", st)
	assert.Positive(t, st.PackedMatrices)
	assert.Positive(t, st.PackedBytes)
	n := cacheFiles(t, dir)
	require.Positive(t, n, "packed_cache_dir %s has no entry after a cold open with the cache on", dir)

	warmStats, warm := openUse(t, l, rel, on, on, dir, 0)
	assert.Equal(t, PackSourceCacheHit, warmStats.PackSource, "warm open: %+v", warmStats)
	assert.Equal(t, st.PackedBytes, warmStats.PackedBytes)
	assert.Equal(t, st.PackedMatrices, warmStats.PackedMatrices)
	assert.Equal(t, n, cacheFiles(t, dir), "a warm open adds no entry")
	assert.Equal(t, cold, warm, "warm (cached) open gives the cold open's logits")

	noCache := t.TempDir()
	memStats, mem := openUse(t, l, rel, on, off, noCache, 0)
	assert.Equal(t, PackSourcePacked, memStats.PackSource, "packed_cache off")
	assert.Zero(t, cacheFiles(t, noCache), "packed_cache off writes nothing to packed_cache_dir")
	assert.Equal(t, cold, mem, "packing in memory gives the cached path's logits")

	noPack := t.TempDir()
	offStats, plain := openUse(t, l, rel, off, on, noPack, 0)
	assert.Equal(t, PackSourceOff, offStats.PackSource, "pack off")
	assert.Zero(t, offStats.PackedBytes)
	assert.Zero(t, cacheFiles(t, noPack), "pack off caches nothing")
	for i := range plain {
		require.InDelta(t, plain[i], cold[i], 1e-3*(1+math.Abs(float64(plain[i]))), "logit %d packed vs unpacked", i)
	}
}

// packed_cache_bytes reaches the engine: with a one-byte budget only the
// newest entry survives a second model's open.
func TestPackedCacheBudgetReachesEngine(t *testing.T) {
	l := lib(t)
	first := packableModel(t)
	second := packableModel(t, first)
	const on = 1

	both := t.TempDir()
	openUse(t, l, first, on, on, both, 0)
	n1 := cacheFiles(t, both)
	openUse(t, l, second, on, on, both, 0)
	n2 := cacheFiles(t, both)
	require.Greater(t, n2, n1, "a second model adds entries under the default budget")

	tight := t.TempDir()
	openUse(t, l, first, on, on, tight, 1)
	openUse(t, l, second, on, on, tight, 1)
	got := cacheFiles(t, tight)
	assert.Positive(t, got, "the newest entry stays even when alone over budget")
	assert.Less(t, got, n2, "a one-byte packed_cache_bytes evicts the older model's entry")
}

// moonlm_model_open_stats: a model without packable matrices, and misuse.
func TestOpenStats(t *testing.T) {
	l := lib(t)
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.Pack, p.PackedCache, p.PackedCacheDir = 1, 1, cstr(t.TempDir())
	var m uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, OK, l.ModelOpen(shareddata.Path(t, stories), &p, &m), "open stories260K")
	defer l.ModelFree(m)
	s := openStats(t, l, m)
	// stories260K is all F32, which has no packed layout.
	assert.Equal(t, PackSourceNone, s.PackSource, "%+v", s)
	assert.Zero(t, s.PackedMatrices)
	assert.Zero(t, s.PackedBytes)
	for _, ms := range []float64{s.MapMs, s.ParseMs, s.TensorsMs, s.PackMs} {
		assert.True(t, ms >= 0 && ms < 600e3, "phase time %v ms", ms)
	}
	assert.Positive(t, s.MapMs+s.ParseMs+s.TensorsMs, "opening took some time")

	requireStatus(t, l, InvalidArg, l.ModelOpenStats(m, nil), "stats NULL")
	small := OpenStats{Size: 8}
	requireStatus(t, l, InvalidArg, l.ModelOpenStats(m, &small), "stats too small")
	assert.Contains(t, l.LastError(), "size")
	for _, h := range append([]uintptr{0}, foreignHandles...) {
		st := OpenStats{Size: unsafe.Sizeof(OpenStats{})}
		requireStatus(t, l, InvalidArg, l.ModelOpenStats(h, &st), "foreign handle")
	}
	// A caller with a newer, larger struct: its unknown tail is left alone.
	type newer struct {
		OpenStats
		Extra uint64
	}
	q := newer{Extra: 0xfeed}
	q.Size = unsafe.Sizeof(q)
	requireStatus(t, l, OK, l.ModelOpenStats(m, &q.OpenStats), "larger struct")
	assert.Equal(t, uint64(0xfeed), q.Extra)
	assert.Equal(t, unsafe.Sizeof(q), q.Size, "size left as given")
	assert.Equal(t, PackSourceNone, q.PackSource)
}
