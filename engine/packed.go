package engine

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/internal/packcache"
	"github.com/moonlm/moonlm/kernels"
)

// PackMode says whether Open repacks weight matrices into a kernel's packed
// layout (interleaved rows that the kernels read faster than GGUF blocks).
type PackMode int

const (
	// PackDefault is PackOn; it is the zero value, which the C library and
	// the command-line tool fill from MOONLM_PACK.
	PackDefault PackMode = iota
	// PackOn packs every matrix whose type has a packed layout.
	PackOn
	// PackOff keeps every matrix in its GGUF layout.
	PackOff
)

// CacheMode says whether packed weights are kept in the on-disk cache.
type CacheMode int

const (
	// CacheDefault is CacheOn; it is the zero value, which the C library
	// and the command-line tool fill from MOONLM_PACKED_CACHE.
	CacheDefault CacheMode = iota
	// CacheOn uses the cache in PackedCacheParams.Dir (none when Dir is "").
	CacheOn
	// CacheOff never reads or writes the cache (packing happens in memory
	// at every open).
	CacheOff
)

// PackedCacheParams configure the packed-weight cache. The engine reads no
// environment: the zero value is no cache (no folder), and the C library
// and the command-line tool fill the fields from MOONLM_PACKED_CACHE,
// MOONLM_PACKED_CACHE_DIR and MOONLM_PACKED_CACHE_BYTES (internal/settings),
// whose defaults are on, in $XDG_CACHE_HOME/moonlm/packed or
// ~/.cache/moonlm/packed, 8 GiB.
type PackedCacheParams struct {
	Mode     CacheMode
	Dir      string // the cache's own folder; "" = no cache
	MaxBytes int64  // eviction budget in bytes; <= 0 = packcache.DefaultMaxBytes
}

// DebugTopics choose what Open logs to standard error (ModelParams.Debug).
type DebugTopics uint8

const (
	// DebugPack logs packing fallbacks (a matrix or a model left unpacked).
	DebugPack DebugTopics = 1 << iota
	// DebugCache logs the packed-weight cache's fallbacks and evictions,
	// and the packing fallbacks too.
	DebugCache
)

// Where the packed weights of an open model came from (OpenStats.PackSource).
const (
	PackSourceOff        = "off"                // packing disabled, or it failed and the model runs unpacked
	PackSourceNone       = "none"               // no matrix type has a packed layout on this CPU
	PackSourcePacked     = "packed"             // packed in memory at open (cache off or not writable)
	PackSourceCacheWrite = "packed+cache-write" // packed in memory, then published to the cache
	PackSourceCacheHit   = "cache-hit"          // mapped from the cache
)

// OpenStats are the phases of opening a model, each timed on its own, and
// what packing did. Times are in milliseconds.
type OpenStats struct {
	MapMs     float64 // open(2), fstat, mmap of the model file (0 for OpenFile)
	ParseMs   float64 // GGUF header, metadata index and tensor table (0 for OpenFile)
	TensorsMs float64 // config, tensor checks and norms, worker pool (the tokenizer builds alongside; the open waits for it after packing)
	PackMs    float64 // packing the weights or mapping them from the cache
	// PackSource is one of the PackSource constants.
	PackSource string
	// PackedBytes is the size of the packed copies (a layout that reads the
	// mapping in place takes none); PackedMatrices how many matrices have
	// a packed layout.
	PackedBytes    int64
	PackedMatrices int
}

// OpenStats reports how the model was opened.
func (m *Model) OpenStats() OpenStats {
	m.statsMu.Lock()
	defer m.statsMu.Unlock()
	return m.stats
}

// packTarget is one matrix to pack and where its packed form lives in the
// model's packed block.
type packTarget struct {
	name      string
	m         *kernels.Matrix
	l         *kernels.PackedLayout
	off, size int
	// inPlace: the layout's bytes are the GGUF rows, so the matrix's
	// packed form is its own mapped data and takes no room in the block.
	inPlace bool
}

// packState holds a model's packed weights: an anonymous mapping outside
// the Go heap (so the collector neither scans nor doubles it), or a cache
// entry mapped read-only.
type packState struct {
	targets []packTarget
	total   int
	mem     []byte           // anonymous mapping, nil when the data lives elsewhere
	entry   *packcache.Entry // the cache entry the matrices read, or nil
	logf    func(format string, args ...any)
	prog    *progress // the open's progress, nil after it

	put sync.WaitGroup // the background publish to the cache

	mu       sync.Mutex  // serializes recover against itself and close
	repaired bool        // the entry's pages were replaced by in-memory packing
	faulted  atomic.Bool // a kernel faulted on the entry; recovery started

	// A cache entry is mapped at open after checking only its header, key
	// and length; its data's checksum is verified in the background, and
	// no forward pass starts before that ends (ready).
	verified   atomic.Bool   // the weights may be used: verified, repaired, or not from the cache
	verifyDone chan struct{} // closed when the verification (and any repair) ended
	verifyErr  error         // set before verifyDone closes: the weights are unusable

	closing atomic.Bool // Close started: the prefault stops
}

// packAlign aligns every packed matrix to a cache line.
const packAlign = 64

// packTargets lists the matrices that have a packed layout in the current
// kernel variant and at least one whole group of rows, and the size of the
// block that holds their packed forms. token_embd is only used for row
// lookups and is never packed; a tied head is packed as its own Matrix
// value, which leaves m.embd in the GGUF layout.
func (m *Model) packTargets() ([]packTarget, int) {
	var ts []packTarget
	off := 0
	m.eachMatrix(func(name string, mt *kernels.Matrix) {
		l, inPlace := m.numerics.Layout(m.kern, mt)
		if l == nil && m.encoder && !m.numerics.Reference() {
			// An encoder's f16 products on AMX tiles, where the CPU has
			// them; a decoder's stay the row kernels' bit for bit.
			if l = m.kern.EncoderPacked(mt.Type); l != nil && mt.Rows%l.Rows != 0 {
				l = nil
			}
		}
		if l == nil || mt.Rows < l.Rows {
			return
		}
		size := l.PackedSize(mt.Rows, mt.Cols)
		if inPlace {
			ts = append(ts, packTarget{name: name, m: mt, l: l, size: size, inPlace: true})
			return
		}
		ts = append(ts, packTarget{name: name, m: mt, l: l, off: off, size: size})
		off += (size + packAlign - 1) / packAlign * packAlign
	})
	return ts, off
}

// eachMatrix calls fn with every weight matrix that is multiplied (the
// blocks' and the model's but the embeddings, which are only looked up)
// and its name.
func (m *Model) eachMatrix(fn func(name string, mt *kernels.Matrix)) {
	mats := blockMatrices(m.fam)
	for i := range m.layers {
		L := &m.layers[i]
		p := "blk." + strconv.Itoa(i) + "."
		for _, t := range mats {
			if L.mats[t.Role].Data != nil {
				fn(p+matrixName(m.fam, t), &L.mats[t.Role])
			}
			for e := range L.exps[t.Role] {
				fn(p+t.Name+"["+strconv.Itoa(e)+"]", &L.exps[t.Role][e])
			}
		}
	}
	// The model's matrices but the embeddings and the other matrices
	// whose rows are only looked up.
	for i := range m.fam.Model {
		t := &m.fam.Model[i]
		if !t.Matrix() || t.Role == arch.TokenEmbd || t.Lookup || m.glob.mats[t.Role].Data == nil {
			continue
		}
		name := t.Name
		if m.f != nil && t.TiedTo != arch.NoRole {
			if _, ok := m.f.Tensor(name); !ok {
				name = m.fam.Tensor(t.TiedTo).Name + " (tied output)"
			}
		}
		fn(name, &m.glob.mats[t.Role])
	}
}

// PackedTensor describes a matrix that Open packs.
type PackedTensor struct {
	Name   string
	Layout string // the layout's name, with its version
	Bytes  int    // packed size
}

// PackedTensors lists the matrices that are packed with the model's kernel
// set, whether or not packing happened for this model (PackOff).
func (m *Model) PackedTensors() []PackedTensor {
	ts, _ := m.packTargets()
	out := make([]PackedTensor, len(ts))
	for i, t := range ts {
		out[i] = PackedTensor{Name: t.name, Layout: t.l.Name, Bytes: t.size}
	}
	return out
}

// debugLog is the log of packing fallbacks for topics d (Model.logf):
// standard error when d names DebugPack or DebugCache, else silent.
func debugLog(d DebugTopics) func(format string, args ...any) {
	if d&(DebugPack|DebugCache) == 0 {
		return func(string, ...any) {}
	}
	return func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "moonlm: "+format+"\n", args...)
	}
}

// pack repacks the model's weights at open: it maps them from the
// packed-weight cache when a valid entry exists, else packs them in memory
// and, with the cache on, publishes them in the background. It never fails
// the open: a cache failure falls back to packing in memory and a packing
// failure to unpacked matrices, each said in the debug log. Its only error
// is ErrCancelled, from prog, with nothing left packed.
func (m *Model) pack(p ModelParams, id *fileIdentity, prog *progress) error {
	t0 := time.Now()
	defer func() { m.stats.PackMs = msSince(t0) }()
	if p.Pack == PackOff {
		m.stats.PackSource = PackSourceOff
		return nil
	}
	ts, total := m.packTargets()
	if len(ts) == 0 {
		m.stats.PackSource = PackSourceNone
		return nil
	}
	cfg := cacheConfig(p.PackedCache, p.Debug)
	cfg.LazyVerify = true // the checksum runs in the background (verifyEntry)
	if total == 0 {
		cfg.Disabled = true // nothing is copied, so nothing to cache
	}
	ps := &packState{targets: ts, total: total, logf: cfg.Logf, prog: prog}
	if ps.logf == nil {
		ps.logf = m.logf
	}
	var key packcache.Key
	if !cfg.Disabled && id == nil {
		ps.logf("packed-weight cache skipped: model opened from a gguf.File, not a path")
		cfg.Disabled = true
	}
	if !cfg.Disabled {
		key = packKey(id, ts, m.kern)
		var e *packcache.Entry
		err := guardFaults("reading the packed-weight cache", func() (err error) {
			e, err = cfg.Get(key, int64(total))
			return err
		})
		switch {
		case err != nil:
			ps.logf("packed-weight cache: %v; packing in memory", err)
		case e != nil:
			ps.entry = e
			ps.prog = nil // a repair after the open is not part of it
			ps.install(e.Data)
			ps.watchFaults(m)
			m.packed = ps
			m.stats.PackSource = PackSourceCacheHit
			m.stats.PackedBytes, m.stats.PackedMatrices = int64(total), len(ts)
			ps.verifyEntry(m, cfg, key) // after the stats: a failed verification rewrites them
			return nil
		}
	}
	err := guardFaults("packing weights", func() error { return ps.packInMemory(m) })
	if err != nil {
		ps.unpack()
		_ = ps.release()
		if errors.Is(err, ErrCancelled) {
			return err
		}
		ps.logf("packing in memory failed, the model runs unpacked: %v", err)
		m.stats.PackSource = PackSourceOff
		return nil
	}
	ps.verified.Store(true)
	m.packed = ps
	m.stats.PackSource = PackSourcePacked
	m.stats.PackedBytes, m.stats.PackedMatrices = int64(total), len(ts)
	if !cfg.Disabled {
		m.stats.PackSource = PackSourceCacheWrite
		ps.put.Add(1)
		go func() {
			defer ps.put.Done()
			// Put logs its own failures; the model keeps its in-memory copy.
			_ = cfg.Put(key, ps.mem)
		}()
	}
	return nil
}

// verifyEntry starts the background verification of the cache entry's
// data (packcache.Entry.Verify: every byte read and checksummed, on up to
// GOMAXPROCS goroutines), which keeps the open from reading the whole entry.
// Forward passes wait for it (ready). On a mismatch or a fault the entry
// file is removed, the model packs its weights in memory in place of the
// entry's pages (as RecoverPackedCache does) and publishes them as a new
// entry, so no forward pass ever reads unverified weights; if that repair
// fails, every forward pass of the model returns ErrIO.
func (ps *packState) verifyEntry(m *Model, cfg packcache.Config, key packcache.Key) {
	ps.verifyDone = make(chan struct{})
	if ps.entry.Trusted() {
		// Verified by an earlier open and unchanged since (a stamp,
		// internal/packcache): nothing to read before the first forward
		// pass but the page tables, which are filled ahead of it.
		ps.verified.Store(true)
		close(ps.verifyDone)
		if prefaultPacked {
			ps.put.Add(1) // Close waits for the prefault
			go func() {
				defer ps.put.Done()
				ps.prefault()
			}()
		}
		return
	}
	ps.put.Add(1) // Close waits for the verification
	go func() {
		defer ps.put.Done()
		beforeVerify()
		err := guardFaults("verifying the packed-weight cache entry", ps.entry.Verify)
		if err == nil {
			ps.verified.Store(true)
			close(ps.verifyDone)
			return
		}
		if !ps.repairUnverified(m, err) {
			close(ps.verifyDone)
			return
		}
		close(ps.verifyDone)
		// The repaired pages replace the removed entry; Put logs its own
		// failures.
		_ = cfg.Put(key, ps.entry.Data)
	}()
}

// prefaultPiece is how much of a trusted entry one populate call maps.
const prefaultPiece = 8 << 20

// prefaultPacked says whether a trusted entry's page tables are filled in
// the background (a variable so tests can compare with faulting).
var prefaultPacked = true

// prefault fills the page tables of a trusted entry's data in the order
// the forward pass reads it (the targets are laid out layer by layer, the
// output head last), starting during the open, whose other goroutine
// builds the tokenizer, so that the first forward pass finds the weights
// mapped rather than taking a fault per 4 KiB page (about 300,000 for a
// 1.3 GB entry in 4 KiB page-cache pages; an entry cached in 2 MiB folios
// maps in about a millisecond either way). It stops at Close, or at the
// first piece the kernel does not populate (no MADV_POPULATE_READ, or the
// file shrank: the forward pass's fault path handles that).
func (ps *packState) prefault() {
	d := ps.entry.Data
	for off := 0; off < len(d) && !ps.closing.Load(); off += prefaultPiece {
		if !packcache.Populate(d[off:min(len(d), off+prefaultPiece)]) {
			return
		}
	}
}

// repairUnverified packs the weights in memory in place of an entry that
// failed verification (why); false means the weights are unusable.
func (ps *packState) repairUnverified(m *Model, why error) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.repaired {
		if _, err := ps.repackEntry(m); err != nil {
			ps.logf("packed-weight cache entry %s failed verification (%v) and could not be replaced: %v", ps.entry.Path(), why, err)
			ps.verifyErr = fmt.Errorf("engine: packed-weight cache entry %s failed verification (%w) and could not be replaced: %w: %w (reopen the model)", ps.entry.Path(), why, ErrIO, err)
			return false
		}
	}
	ps.logf("packed-weight cache entry %s failed verification (%v); packed in memory instead", ps.entry.Path(), why)
	m.statsMu.Lock()
	m.stats.PackSource = PackSourceCacheWrite
	m.statsMu.Unlock()
	ps.verified.Store(true)
	return true
}

// WaitPacked waits for the background work on the model's packed weights:
// a cache entry's verification (and its repair after a mismatch) and the
// publish of freshly packed weights to the cache. Forward passes need not
// call it (they wait for the verification by themselves); it is for
// callers that measure (allocations of those goroutines count against the
// process) or that want the verification's verdict: its error means the
// weights failed verification and could not be repaired.
func (m *Model) WaitPacked() error {
	ps := m.packed
	if ps == nil {
		return nil
	}
	ps.put.Wait()
	return ps.ready()
}

// ready waits until the packed weights may be read: at once unless they
// come from a cache entry still being verified. Its error means they
// cannot be (the model must be reopened). One atomic load once verified,
// no allocation.
func (ps *packState) ready() error {
	if ps == nil || ps.verified.Load() {
		return nil
	}
	<-ps.verifyDone
	return ps.verifyErr
}

// cacheConfig is the packed-weight cache's configuration from p alone: on
// (CacheDefault or CacheOn) only with a folder, with debug logging when d
// names DebugCache.
func cacheConfig(p PackedCacheParams, d DebugTopics) packcache.Config {
	c := packcache.Config{
		Disabled: p.Mode == CacheOff || p.Dir == "",
		Dir:      p.Dir,
		MaxBytes: p.MaxBytes,
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = packcache.DefaultMaxBytes
	}
	if d&DebugCache != 0 {
		c.Logf = func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "moonlm: packcache: "+format+"\n", args...)
		}
	}
	return c
}

// packFormat versions how the engine arranges packed matrices in one block
// (order, alignment); part of every cache key.
const packFormat = "engine.v1"

// packKey identifies the packed block of a model: the file, its header and
// tensor table, the layouts in use and the CPU they were chosen for.
func packKey(id *fileIdentity, ts []packTarget, k *kernels.Set) packcache.Key {
	var names []string
	for _, t := range ts {
		if !slices.Contains(names, t.l.Name) {
			names = append(names, t.l.Name)
		}
	}
	return packcache.Key{
		Model: id.path, Size: id.size, ModTime: id.modTime,
		Header: packcache.Digest(id.header),
		Layout: packFormat + ";" + strings.Join(names, ","),
		CPU:    cpuString(k),
	}
}

// cpuString names the kernel set and the CPU features packed layouts may
// depend on.
func cpuString(k *kernels.Set) string {
	var f []string
	add := func(name string, ok bool) {
		if ok {
			f = append(f, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := &cpu.X86
		add("avx2", x.HasAVX2)
		add("fma", x.HasFMA)
		add("f16c", x.HasF16C)
		add("avx512f", x.HasAVX512F)
		add("avx512bw", x.HasAVX512BW)
		add("avx512vl", x.HasAVX512VL)
		add("avx512vnni", x.HasAVX512VNNI)
		add("avxvnni", x.HasAVXVNNI)
	case "arm64":
		a := &cpu.ARM64
		add("asimd", a.HasASIMD)
		add("asimddp", a.HasASIMDDP)
		add("i8mm", a.HasI8MM)
		add("sve", a.HasSVE)
	}
	return runtime.GOARCH + "/" + k.Name() + "/" + strings.Join(f, ",")
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// packInMemory allocates the packed block outside the Go heap and packs
// every target into it on the model's pool, dropping the residency of each
// original once it is packed.
func (ps *packState) packInMemory(m *Model) error {
	if ps.total == 0 { // every target reads the mapping in place
		ps.install(nil)
		return nil
	}
	mem, err := mapPacked(ps.total)
	if err != nil {
		return fmt.Errorf("%w: mapping %d bytes for packed weights: %w", ErrOutOfMemory, ps.total, err)
	}
	ps.mem = mem
	if err := ps.packAll(m, mem); err != nil {
		return err
	}
	// Install only once everything is packed: a failure leaves no matrix
	// half-switched.
	ps.install(mem)
	return nil
}

// beforeVerify runs as the background verification starts (a variable so
// tests can hold it back).
var beforeVerify = func() {}

// repairPages allocates the pages a repair packs into (a variable so tests
// can make it fail).
var repairPages = anonPages

// mapPacked allocates the in-memory packed block (a variable so tests can
// make it fail).
var mapPacked = func(n int) ([]byte, error) {
	return anonMap(n)
}

// packChunkBytes bounds the original bytes packed between two residency
// drops, so that packing the biggest matrix (a 128k-vocabulary head of
// 200+ MiB) never holds all of its original and its packed copy at once.
const packChunkBytes = 8 << 20

// packAll packs every target into block (laid out by the targets'
// offsets) on the model's pool, chunk by chunk, dropping the residency of
// each chunk's original pages once it is packed.
func (ps *packState) packAll(m *Model, block []byte) error {
	packed := 0
	for i := range ps.targets {
		t := &ps.targets[i]
		if t.inPlace {
			continue
		}
		dst := block[t.off : t.off+t.size]
		groups := t.m.Rows / t.l.Rows
		gBytes := t.l.Rows * t.m.RowBytes()
		src := t.m.Data[:groups*gBytes]
		step := max(1, packChunkBytes/gBytes)
		dropped := 0
		for g0 := 0; g0 < groups; g0 += step {
			g1 := min(groups, g0+step)
			err := m.pool.Run(func(i, n int) {
				t.l.PackRows(t.m, dst, g0+(g1-g0)*i/n, g0+(g1-g0)*(i+1)/n)
			})
			if err != nil {
				return fmt.Errorf("packing %s: %w", t.name, err)
			}
			dropped = dropResidency(src, dropped, g1*gBytes, ps.logf)
			done := float64(packed) + float64(t.size)*float64(g1)/float64(groups)
			if err := ps.prog.report(progressTensors + (1-progressTensors)*float32(done/float64(ps.total))); err != nil {
				return err
			}
		}
		packed += t.size
	}
	return nil
}

// install points every target matrix at its packed form inside block.
func (ps *packState) install(block []byte) {
	for _, t := range ps.targets {
		if t.inPlace {
			t.m.Packed = t.m.Data[:t.size:t.size]
		} else {
			t.m.Packed = block[t.off : t.off+t.size : t.off+t.size]
		}
		t.m.Layout = t.l
	}
}

// unpack makes every target use its GGUF layout again.
func (ps *packState) unpack() {
	for _, t := range ps.targets {
		t.m.Packed, t.m.Layout = nil, nil
	}
}

// close releases the packed weights when the model closes, after the
// background publish (which reads them) is done.
func (ps *packState) close() error {
	ps.closing.Store(true)
	ps.put.Wait()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	err := ps.release()
	if ps.entry != nil {
		if e := ps.entry.Close(); e != nil && err == nil {
			err = fmt.Errorf("%w: %w", ErrIO, e)
		}
		ps.entry = nil
	}
	return err
}

// release unmaps the in-memory block. The matrices must not use it anymore.
func (ps *packState) release() error {
	if ps.mem == nil {
		return nil
	}
	err := unmap(ps.mem)
	ps.mem = nil
	if err != nil {
		return fmt.Errorf("%w: unmapping packed weights: %w", ErrIO, err)
	}
	return nil
}

// dropResidency tells the kernel that the whole pages of b[from:to] (a
// view of the read-only file mapping) are not needed: a packed weight
// replaces its original in memory. The mapping stays, so b is still
// readable (pages come back from the page cache on demand), which the
// remainder rows and a fallback to unpacked matrices rely on. It returns
// where the next call should start: the end of the pages it dropped, so
// that consecutive chunks drop every page between them.
func dropResidency(b []byte, from, to int, logf func(format string, args ...any)) int {
	if to <= from {
		return from
	}
	ps := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (base + uintptr(from) + ps - 1) &^ (ps - 1)
	hi := (base + uintptr(to)) &^ (ps - 1)
	if hi <= lo {
		return from
	}
	if err := dropPages(b[lo-base : hi-base]); err != nil {
		logf("madvise(DONTNEED) of %d packed-original bytes: %v", hi-lo, err)
	}
	return int(hi - base)
}

// guardFaults runs fn with faults turned into panics and recovers them (and
// any other panic) as an error: packing reads the file mapping, which may
// have been truncated under us.
func guardFaults(what string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = panicError(what, r)
		}
	}()
	return fn()
}

// watchFaults makes the targets use copies of their layouts whose Dot
// notices a memory fault (the entry's file was truncated under us) and
// starts RecoverPackedCache in the background, then lets the fault go on
// to the session as ErrIO. Only models mapped from the cache pay for it: a
// deferred call per group Dot, no allocation.
func (ps *packState) watchFaults(m *Model) {
	watched := map[*kernels.PackedLayout]*kernels.PackedLayout{}
	for i := range ps.targets {
		t := &ps.targets[i]
		w, ok := watched[t.l]
		if !ok {
			c := *t.l
			dot := t.l.Dot
			c.Dot = func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
				defer ps.noticeFault(m)
				dot(cols, g, x, xStride, nTok, y, yStride)
			}
			w = &c
			watched[t.l] = w
		}
		t.m.Layout = w
	}
}

// noticeFault is deferred by the watched Dot: on a panic it starts the
// recovery once, then re-panics with the same value so the pool still
// reports the fault.
func (ps *packState) noticeFault(m *Model) {
	if r := recover(); r != nil {
		if ps.faulted.CompareAndSwap(false, true) {
			ps.put.Add(1) // Close waits for the recovery too
			go func() {
				defer ps.put.Done()
				if _, err := m.RecoverPackedCache(); err != nil {
					ps.logf("%v", err)
				}
			}()
		}
		panic(r)
	}
}

// RecoverPackedCache repairs a model whose packed weights are mapped from a
// cache entry that lost its pages (the file was truncated or rewritten in
// place while the model was open): reading them faults, which sessions
// report as ErrIO. It packs the weights in memory again and swaps the new
// pages in place of the entry's atomically, so the model keeps working
// without a reopen; calls running meanwhile may still fail with ErrIO. The
// first fault on the entry starts it in the background, so callers need
// not call it; it is exported for those that want to wait for the repair
// before retrying. It reports whether this call repaired anything: false
// with a nil error when the entry is intact, already repaired, or the model
// does not use one. An error means the model must be reopened.
func (m *Model) RecoverPackedCache() (bool, error) {
	ps := m.packed
	if ps == nil {
		return false, nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.entry == nil || ps.repaired || ps.entry.Valid() {
		return false, nil
	}
	ok, err := ps.repackEntry(m)
	if err != nil {
		ps.logf("packed-weight cache entry %s lost its pages and could not be replaced: %v", ps.entry.Path(), err)
		return false, fmt.Errorf("engine: packed-weight cache entry %s was truncated under the open model: %w: %w (reopen the model)", ps.entry.Path(), ErrIO, err)
	}
	ps.logf("packed-weight cache entry %s lost its pages; packed in memory instead", ps.entry.Path())
	m.statsMu.Lock()
	m.stats.PackSource = PackSourcePacked
	m.statsMu.Unlock()
	return ok, nil
}

// repackEntry packs every target into fresh anonymous pages laid out as the
// entry's data and moves them over it.
func (ps *packState) repackEntry(m *Model) (bool, error) {
	data := ps.entry.Data
	pg := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	if start%pg != 0 {
		return false, fmt.Errorf("entry data at %#x is not page-aligned", start)
	}
	n := (len(data) + int(pg) - 1) / int(pg) * int(pg)
	anon, err := repairPages(n)
	if err != nil {
		return false, err
	}
	err = guardFaults("repacking weights", func() error { return ps.packAll(m, anon) })
	if err != nil {
		freeAnonPages(anon)
		return false, err
	}
	// The entry's mapping covers whole pages, so its last partial page
	// extends to n bytes.
	if err := replacePages(unsafe.Slice(unsafe.SliceData(data), n), anon); err != nil {
		freeAnonPages(anon)
		return false, err
	}
	ps.repaired = true
	return true, nil
}
