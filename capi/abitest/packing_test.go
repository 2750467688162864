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
			if len(ten.Shape) == 2 && strings.HasPrefix(ten.Name, "blk.") && kernels.Packed(ten.Type) != nil {
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

// openPacked opens rel with the given packing settings, freed at cleanup.
func openPacked(t *testing.T, l *Lib, rel string, pack, cache int32, dir string, budget uint64) uintptr {
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
	t.Cleanup(func() { l.ModelFree(m) })
	return m
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

// packedLogits prefills a few tokens and returns the last logits.
func packedLogits(t *testing.T, l *Lib, m uintptr) []float32 {
	t.Helper()
	s := newSession(t, l, m, 32, 0)
	toks := []int32{1, 40, 90, 200, 7, 311}
	logits := make([]float32, modelInfo(t, l, m).NVocab)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], uintptr(len(toks)), &logits[0], uintptr(len(logits))), "prefill")
	return logits
}

// The packing settings reach the engine: packed_cache_dir receives an
// entry, a second open reuses it, and packed_cache or pack off write none;
// the logits are the same on every path.
func TestPackedCacheParamsReachEngine(t *testing.T) {
	l := lib(t)
	rel := packableModel(t)
	const on, off = 1, 2

	dir := t.TempDir()
	cold := packedLogits(t, l, openPacked(t, l, rel, on, on, dir, 0))
	n := cacheFiles(t, dir)
	require.Positive(t, n, "packed_cache_dir %s has no entry after a cold open with the cache on", dir)
	warm := packedLogits(t, l, openPacked(t, l, rel, on, on, dir, 0))
	assert.Equal(t, n, cacheFiles(t, dir), "a warm open adds no entry")
	assert.Equal(t, cold, warm, "warm (cached) open gives the cold open's logits")

	noCache := t.TempDir()
	mem := packedLogits(t, l, openPacked(t, l, rel, on, off, noCache, 0))
	assert.Zero(t, cacheFiles(t, noCache), "packed_cache off writes nothing to packed_cache_dir")
	assert.Equal(t, cold, mem, "packing in memory gives the cached path's logits")

	noPack := t.TempDir()
	plain := packedLogits(t, l, openPacked(t, l, rel, off, on, noPack, 0))
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
	openPacked(t, l, first, on, on, both, 0)
	n1 := cacheFiles(t, both)
	openPacked(t, l, second, on, on, both, 0)
	n2 := cacheFiles(t, both)
	require.Greater(t, n2, n1, "a second model adds entries under the default budget")

	tight := t.TempDir()
	openPacked(t, l, first, on, on, tight, 1)
	openPacked(t, l, second, on, on, tight, 1)
	got := cacheFiles(t, tight)
	assert.Positive(t, got, "the newest entry stays even when alone over budget")
	assert.Less(t, got, n2, "a one-byte packed_cache_bytes evicts the older model's entry")
}
