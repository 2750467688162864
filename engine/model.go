// Package engine runs GGUF language models on the CPU: it loads a model's
// weights in place from the file mapping, and runs sessions (a KV cache plus
// scratch buffers) that prefill prompts and decode tokens.
//
// A Model is safe for concurrent use; each Session is used by one goroutine
// at a time (a concurrent call gets ErrBusy). Sessions of one model share its
// worker pool, whose operations are serialized, so concurrent sessions
// interleave at the granularity of one matrix product.
package engine

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/engine/tokenizer"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// ModelParams configure Open.
type ModelParams struct {
	// Threads is the size of the model's worker pool; 0 means all cores.
	Threads int
	// Pack says whether weight matrices are repacked into the kernels'
	// faster layouts at open; the zero value is PackDefault.
	Pack PackMode
	// PackedCache configures the on-disk cache of packed weights; its zero
	// value is no cache.
	PackedCache PackedCacheParams
	// Numerics selects fast kernels or llama.cpp's exact summation order
	// (see Numerics); the zero value is NumericsFast.
	Numerics Numerics
	// Debug chooses the debug topics logged to standard error; none by
	// default.
	Debug DebugTopics
	// WorkerPanic, when not empty, makes the first task on each of the
	// model's worker pools panic on a worker goroutine with this value: a
	// test hook for the path that turns a worker's panic into an error (the
	// C library sets it for MOONLM_DEBUG_PANIC=worker).
	WorkerPanic string
	// Kernels is the kernel set the model computes with and packs for;
	// nil means kernels.Detect(), the best set of this CPU.
	Kernels *kernels.Set
	// Progress, when set, is called on the opening goroutine with the
	// fraction of the open done, in [0, 1]: never decreasing, in steps of
	// at least a hundredth, ending with 1 on success. Returning false
	// stops the open, which then fails with ErrCancelled having released
	// everything it took.
	Progress func(fraction float32) bool
}

// Info describes a model. Token ids are -1 where the model has none.
type Info struct {
	Arch          string // general.architecture
	Name          string // general.name
	VocabSize     int    // logits per position
	ContextLength int    // training context
	EmbeddingSize int
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int
	FFNSize       int
	ChatTemplate  string // tokenizer.chat_template, "" if absent
	BOS, EOS, EOT int32
	AddBOS        bool // whether Tokenize with addSpecial prepends BOS
	Threads       int  // worker pool size
}

// weights holds tensors by their architecture role. Matrices alias the
// mapping; the small vectors (norms, biases) are copied to float32. An
// absent optional tensor is a zero Matrix or a nil vector.
type weights struct {
	mats [arch.NumRoles]kernels.Matrix
	vecs [arch.NumRoles][]float32
	exps [arch.NumRoles][]kernels.Matrix // per-expert matrices (PerExpert tensors), one per expert
}

// layer holds one transformer block's weights and what it runs with.
type layer struct {
	weights
	sliding bool
	noRope  bool    // the block's RoPE step is skipped (Params.Rotates)
	c       *config // the model's parameters with this layer's shape (Params.Layer)
	plan    *plan   // the block compiled for this layer's shape
	kv      int     // the KV cache layer it stores into and attends over
}

// Model is a loaded model. Its weights are views into the file mapping.
type Model struct {
	f          *gguf.File
	ownsFile   bool
	fam        *arch.Family
	cfg        config
	plan       *plan   // the block as phases, compiled from fam.Block (layer 0's)
	plans      []*plan // every layer's plan, each once (one unless layers differ in shape)
	kvDims     []int   // per KV cache layer, its width (KV heads times head size)
	tok        *tokenizer.Tokenizer
	glob       weights         // the tensors outside the blocks
	embd       *kernels.Matrix // token_embd: vocab rows of dim
	output     *kernels.Matrix // output head (a copy of token_embd's when tied)
	outputNorm []float32
	ropeFreqs  []float32 // llama3 per-pair frequency divisors, or nil
	ropeLong   []float32 // LongRoPE's divisors beyond the original context, or nil
	ropeShort  []float32 // LongRoPE's divisors within it, or nil
	// Per-layer inputs (Gemma 4), nil without: each token's rows of
	// per_layer_token_embd, the projection of its embedding and that
	// projection's norm.
	pleEmbd, pleProj *kernels.Matrix
	pleNorm          []float32
	yarnCorr         [2]float32 // YaRN's correction dimensions (Params.YarnExt)
	encoder          bool       // non-causal, no output head: embeddings only (encoder.go)
	layers           []layer
	pool             *pool.Pool
	info             Info
	template         string

	dryBreakers *sample.BreakerCache // DRY breaker lists resolved against tok (SamplerVocab)

	numerics Numerics                         // resolved at open
	logf     func(format string, args ...any) // debug log of packing fallbacks (ModelParams.Debug)
	poolOpts []pool.Option                    // options of every worker pool (ModelParams.WorkerPanic)
	kern     *kernels.Set                     // the kernel set, chosen at open
	// ggmlDecodeOrder makes a one-token batch of the fast mode sum its f16
	// attention products in ggml_vec_dot_f16's order, as llama.cpp's
	// decode does, instead of the tinyBLAS order llama.cpp uses for bigger
	// batches (and we use always). The two orders differ in float32
	// rounding, which can move a logit by a few thousandths after 100
	// positions (stories260K), so it is off to keep decode and prefill
	// identical; the llama.cpp reference tests set it before making a
	// session to reproduce llama.cpp's decode bit for bit.
	ggmlDecodeOrder bool

	mapping []byte     // the file mapping when Open made it
	packed  *packState // packed weights, nil when none
	stats   OpenStats  // guarded by statsMu after Open returns
	statsMu sync.Mutex // not mu: Close holds mu while it waits for a background repack that updates stats

	mu       sync.Mutex
	sessions int
	closed   bool

	fpOnce sync.Once // computes fp, the saved-state fingerprint, on first use
	fp     [32]byte
}

// Open maps the GGUF file at path and loads the model from it. An
// unsupported architecture or a missing required tensor is an error naming
// it.
func Open(path string, p ModelParams) (*Model, error) {
	t0 := time.Now()
	prog := &progress{fn: p.Progress}
	if err := prog.report(0); err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	data, id, err := mapModel(path)
	if err != nil {
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	if testHookMapped != nil {
		testHookMapped(path)
	}
	if err := prog.report(progressMapped); err != nil {
		_ = unmap(data)
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	t1 := time.Now()
	f, err := parseMapped(data)
	if err != nil {
		_ = unmap(data)
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	t2 := time.Now()
	if err := prog.report(progressParsed); err != nil {
		f.Close()
		_ = unmap(data)
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	id.header = data[:min(f.DataOffset, int64(len(data)))]
	m, err := openFile(f, p, id, prog)
	if err != nil {
		f.Close()
		_ = unmap(data)
		return nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	m.ownsFile = true
	m.mapping = data
	m.stats.MapMs = float64(t1.Sub(t0).Nanoseconds()) / 1e6
	m.stats.ParseMs = float64(t2.Sub(t1).Nanoseconds()) / 1e6
	return m, nil
}

// fileIdentity is what the packed-weight cache keys a model file by.
type fileIdentity struct {
	path    string // absolute
	size    int64
	modTime int64  // ns
	header  []byte // the GGUF bytes before the tensor data, hashed into the key
}

// mapModel maps path read-only (as gguf.Open does; done here so mapping and
// parsing are timed apart) and returns the file's identity from the same
// descriptor. Only regular files are opened: opening a FIFO for reading
// blocks until a writer comes, and a device or directory cannot be mapped.
// Errors do not repeat the path (Open's message names it once).
func mapModel(path string) ([]byte, *fileIdentity, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, nil, classifyGGUF(unwrapPath(err))
	}
	if err := regularFile(st); err != nil {
		return nil, nil, err
	}
	// O_NONBLOCK: if the path was swapped for a FIFO since the stat, the
	// open returns at once and the fstat below refuses it.
	fd, err := os.OpenFile(abs, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, nil, classifyGGUF(unwrapPath(err))
	}
	defer fd.Close()
	st, err = fd.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrIO, unwrapPath(err))
	}
	if err := regularFile(st); err != nil {
		return nil, nil, err
	}
	if st.Size() < 4 {
		return nil, nil, fmt.Errorf("%w: not a GGUF file: too short (%d bytes) for a GGUF header", ErrBadFile, st.Size())
	}
	if st.Size() > math.MaxInt {
		return nil, nil, fmt.Errorf("%w: size %d too large to map", ErrUnsupported, st.Size())
	}
	data, err := mapFile(fd, int(st.Size()))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: mmap: %w", ErrIO, err)
	}
	return data, &fileIdentity{path: abs, size: st.Size(), modTime: st.ModTime().UnixNano()}, nil
}

// regularFile refuses what is not a regular file, saying what it is.
func regularFile(st os.FileInfo) error {
	mode := st.Mode()
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		return fmt.Errorf("%w: is a directory", ErrIO)
	case mode&os.ModeNamedPipe != 0:
		return fmt.Errorf("%w: is a FIFO (named pipe), not a regular file", ErrIO)
	case mode&os.ModeSocket != 0:
		return fmt.Errorf("%w: is a socket, not a regular file", ErrIO)
	case mode&os.ModeDevice != 0:
		return fmt.Errorf("%w: is a device, not a regular file", ErrIO)
	}
	return fmt.Errorf("%w: not a regular file (mode %v)", ErrIO, mode)
}

// unwrapPath drops an *os.PathError's operation and path, keeping its
// cause (the caller's message names the path once).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// testHookMapped, when set by a test, runs between mapping a model file
// and parsing it (to change the file under the mapping).
var testHookMapped func(path string)

// classifyGGUF maps a gguf error onto the engine's sentinels, keeping it.
func classifyGGUF(err error) error {
	switch {
	case errors.Is(err, gguf.ErrFormat):
		return fmt.Errorf("%w: %w", ErrBadFile, err)
	case errors.Is(err, gguf.ErrUnsupported):
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	case errors.Is(err, gguf.ErrMapping):
		return fmt.Errorf("%w: %w", ErrIO, err)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	return fmt.Errorf("%w: %w", ErrBadFile, err)
}

// OpenFile loads a model from an open GGUF file. The file must stay open
// while the model is in use; Model.Close does not close it. Weights are
// packed in memory as p says, but never cached: without the file's path
// there is no identity to key the cache by.
func OpenFile(f *gguf.File, p ModelParams) (m *Model, err error) {
	prog := &progress{fn: p.Progress}
	if err := prog.report(progressParsed); err != nil {
		return nil, fmt.Errorf("engine: open: %w", err)
	}
	return openFile(f, p, nil, prog)
}

// openFile is OpenFile with the file's identity when Open mapped it (nil
// otherwise), reporting to prog.
func openFile(f *gguf.File, p ModelParams, id *fileIdentity, prog *progress) (m *Model, err error) {
	t0 := time.Now()
	if err := checkThreads("model threads", p.Threads); err != nil {
		return nil, err
	}
	// Reading norms and metadata touches the mapping: a truncated file must
	// be an error, not a crash (SetPanicOnFault turns the SIGBUS into a
	// panic recovered here).
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if m != nil && m.pool != nil {
				m.pool.Close()
			}
			m, err = nil, panicError("loading model", r)
		}
	}()
	fam, cfg, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	if err := checkFileLimits(f, fam, &cfg); err != nil {
		return nil, err
	}
	numerics, err := resolveNumerics(p.Numerics)
	if err != nil {
		return nil, fmt.Errorf("engine: open: %w", err)
	}
	if err := numerics.CheckModel(numericsFeatures(&cfg)); err != nil {
		return nil, fmt.Errorf("engine: open: %w", err)
	}
	p = applyNumerics(p, numerics)
	kern := p.Kernels
	if kern == nil {
		kern = kernels.Detect()
	}
	m = &Model{f: f, fam: fam, cfg: cfg, numerics: numerics, kern: kern, dryBreakers: sample.NewBreakerCache(dryBreakerLists)}
	if err := m.compileLayers(); err != nil {
		return nil, err
	}
	if cfg.YarnExt != 0 {
		m.yarnCorr = kernels.RoPEYarnCorrDims(cfg.Rot, cfg.CtxOrig, cfg.RopeBase, cfg.YarnBetaFast, cfg.YarnBetaSlow)
	}
	// The tokenizer (tens of milliseconds for a large vocabulary) is built
	// on its own goroutine while the tensors are laid out and the packed
	// weights looked up, so that a cache entry's background verification
	// starts that much earlier. Every return joins it.
	type tokResult struct {
		tok *tokenizer.Tokenizer
		err error
	}
	tokDone := make(chan tokResult, 1)
	go func() {
		var tok *tokenizer.Tokenizer
		var err error
		defer func() { tokDone <- tokResult{tok, err} }()
		defer func() {
			if r := recover(); r != nil {
				err = panicError("loading the tokenizer", r)
			}
		}()
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		tok, err = tokenizer.FromGGUF(f)
	}()
	mm := m                  // m is the named result, which a failed return sets to nil
	tokErr := func() error { // once: the goroutine sends one value
		r, ok := <-tokDone
		if !ok {
			return nil
		}
		close(tokDone)
		mm.tok = r.tok
		err := r.err
		switch {
		case err == nil:
			return nil
		case errors.Is(err, tokenizer.ErrUnsupported):
			return fmt.Errorf("%w: tokenizer: %w", ErrUnsupported, err)
		case errors.Is(err, ErrIO):
			return err
		}
		return fmt.Errorf("%w: tokenizer: %w", ErrBadFile, err)
	}
	defer func() { _ = tokErr() }()
	if err := m.loadTensors(); err != nil {
		if terr := tokErr(); terr != nil {
			return nil, terr // a bad tokenizer is reported first, as it is read first
		}
		return nil, err
	}
	if err := m.checkNumericsWeights(); err != nil {
		return nil, fmt.Errorf("engine: open: %w", err)
	}
	if v, ok := f.Lookup("tokenizer.chat_template"); ok {
		m.template, _ = v.String()
	}
	m.logf = debugLog(p.Debug)
	if p.WorkerPanic != "" {
		m.poolOpts = []pool.Option{pool.PanicOnce(p.WorkerPanic)}
	}
	m.pool = pool.New(p.Threads, m.poolOpts...)
	m.stats.TensorsMs = msSince(t0)
	if err := prog.report(progressTensors); err != nil {
		m.pool.Close()
		return nil, fmt.Errorf("engine: open: %w", err)
	}
	if m.packed != nil {
		m.packed.prog = nil // a later repair packs again: not part of the open
	}
	err = m.pack(p, id, prog)
	if err == nil {
		err = tokErr()
		if err == nil {
			err = m.checkVocab()
		}
	}
	if err == nil {
		err = prog.report(1)
	}
	if err != nil {
		// A cancelled open, or a tokenizer that failed or does not fit
		// the embeddings: undo the packing and the pool.
		if m.packed != nil {
			_ = m.packed.close()
		}
		m.pool.Close()
		if errors.Is(err, ErrCancelled) {
			return nil, fmt.Errorf("engine: open: %w", err)
		}
		return nil, err
	}
	m.info = Info{
		Arch: cfg.Arch, Name: cfg.Name, VocabSize: m.output.Rows,
		ContextLength: cfg.CtxTrain, EmbeddingSize: cfg.Dim, Layers: cfg.Layers,
		Heads: cfg.Heads, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, FFNSize: cfg.FF,
		ChatTemplate: m.template,
		BOS:          m.tok.BOS(), EOS: m.tok.EOS(), EOT: m.tok.EOT(), AddBOS: m.tok.AddBOS(),
		Threads: m.pool.Threads(),
	}
	return m, nil
}

// tensorLoader fetches and checks tensors by name.
type tensorLoader struct {
	f     *gguf.File
	c     *config
	vocab int // token_embd's rows once loaded, else -1
}

// load reads tensor t (named prefix+t.Name) into w, checking its shape:
// an absent tensor is left zero when optional, replaced by the tensor it
// is tied to when it has one, and an error naming it otherwise.
func (l *tensorLoader) load(t *arch.Tensor, prefix string, w *weights, list []arch.Tensor) error {
	if w.mats[t.Role].Data != nil || w.vecs[t.Role] != nil || t.Name == "" || inFusedExperts(t.Role, list, w) {
		return nil // a part already cut from its fused tensor, or one that exists only there
	}
	name := prefix + t.Name
	tt, ok := l.f.Tensor(name)
	if !ok {
		switch {
		case t.TiedTo != arch.NoRole:
			w.mats[t.Role], w.vecs[t.Role] = w.mats[t.TiedTo], w.vecs[t.TiedTo]
			return nil
		case t.Optional:
			return nil
		}
		return fmt.Errorf("%w: missing tensor %s", ErrBadFile, name)
	}
	cols := l.c.Of(t.Cols, l.vocab)
	if len(t.Fused) > 0 && !fusedShape(tt, t, l.c, cols) && partNamed(list, t) {
		return nil // a part of the same name (an older conversion's unfused tensor): its parts load by name
	}
	if t.PerExpert && !t.Matrix() {
		v, err := asExpertVectors(tt, cols, l.c.MoE.Experts)
		w.vecs[t.Role] = v
		return err
	}
	if t.PerExpert {
		exps, err := asExperts(tt, cols, l.c.Of(t.Rows, l.vocab), l.c.MoE.Experts)
		w.exps[t.Role] = exps
		return err
	}
	if t.Table {
		v, err := asTable(tt, cols, l.c.Of(t.Rows, l.vocab))
		w.vecs[t.Role] = v
		return err
	}
	if !t.Matrix() {
		v, err := asVector(tt, cols)
		w.vecs[t.Role] = v
		if err == nil {
			err = l.split(t, list, w)
		}
		return err
	}
	mt, err := asMatrix(tt, cols, l.c.Of(t.Rows, l.vocab))
	if err != nil {
		return err
	}
	w.mats[t.Role] = mt
	if t.Role == arch.TokenEmbd {
		l.vocab = mt.Rows
	}
	return l.split(t, list, w)
}

// split fills the parts of fused tensor t (already in w) with views of its
// consecutive row ranges (value ranges for a vector), each as its part's
// declaration in list sizes it.
func (l *tensorLoader) split(t *arch.Tensor, list []arch.Tensor, w *weights) error {
	if len(t.Fused) == 0 {
		return nil
	}
	off := 0
	for _, r := range t.Fused {
		d := declOf(list, r)
		if d == nil {
			return fmt.Errorf("%w: %w: part %d of %s is not declared", ErrInternal, errArchDescription, r, t.Name)
		}
		if t.Matrix() {
			whole := w.mats[t.Role]
			n := l.c.Of(d.Rows, l.vocab)
			if n < 0 || off+n > whole.Rows {
				return fmt.Errorf("%w: %w: parts of %s exceed its %d rows", ErrInternal, errArchDescription, t.Name, whole.Rows)
			}
			rb := whole.RowBytes()
			w.mats[r] = kernels.Matrix{Type: whole.Type, Rows: n, Cols: whole.Cols, Data: whole.Data[off*rb : (off+n)*rb]}
			off += n
			continue
		}
		whole := w.vecs[t.Role]
		n := l.c.Of(d.Cols, l.vocab)
		if n < 0 || off+n > len(whole) {
			return fmt.Errorf("%w: %w: parts of %s exceed its %d values", ErrInternal, errArchDescription, t.Name, len(whole))
		}
		w.vecs[r] = whole[off : off+n : off+n]
		off += n
	}
	return nil
}

// fusedShape reports whether tt has fused tensor t's shape (cols values
// per row; its rows, or for a vector its values).
func fusedShape(tt *gguf.Tensor, t *arch.Tensor, c *config, cols int) bool {
	if !t.Matrix() {
		return tt.NumElements() == int64(cols)
	}
	return len(tt.Shape) == 2 && tt.Shape[0] == int64(cols) && tt.Shape[1] == int64(c.Of(t.Rows, -1))
}

// partNamed reports whether a part of fused tensor t has t's own name: a
// tensor that older conversions write unfused under the same name (told
// apart by its shape).
func partNamed(list []arch.Tensor, t *arch.Tensor) bool {
	for _, r := range t.Fused {
		if d := declOf(list, r); d != nil && d.Name == t.Name {
			return true
		}
	}
	return false
}

// inFusedExperts reports whether role r is a part of a per-expert fused
// tensor w holds: such a tensor is kept whole (the MoE step multiplies
// its parts in one product), so the part is neither cut nor looked up.
func inFusedExperts(r arch.Role, list []arch.Tensor, w *weights) bool {
	for i := range list {
		if f := &list[i]; f.PerExpert && w.exps[f.Role] != nil && slices.Contains(f.Fused, r) {
			return true
		}
	}
	return false
}

// declOf is role r's declaration in list, or nil.
func declOf(list []arch.Tensor, r arch.Role) *arch.Tensor {
	for i := range list {
		if list[i].Role == r {
			return &list[i]
		}
	}
	return nil
}

// missingMatrix names, for a block matrix the plan multiplies by that the
// file did not give, the tensor (or tensors) that would have.
func missingMatrix(fam *arch.Family, prefix string, r arch.Role) error {
	d := declOf(fam.Layer, r)
	var names []string
	if d != nil && d.Name != "" {
		names = append(names, prefix+d.Name)
	}
	for _, f := range fam.Layer {
		if slices.Contains(f.Fused, r) && !slices.Contains(names, prefix+f.Name) {
			names = append(names, prefix+f.Name)
		}
	}
	if len(names) > 1 {
		return fmt.Errorf("%w: missing tensor %s (or %s)", ErrBadFile, names[0], strings.Join(names[1:], ", "))
	}
	return fmt.Errorf("%w: missing tensor %s", ErrBadFile, strings.Join(names, ""))
}

func asMatrix(t *gguf.Tensor, cols, rows int) (kernels.Matrix, error) {
	if len(t.Shape) != 2 || t.Shape[0] != int64(cols) || (rows >= 0 && t.Shape[1] != int64(rows)) {
		want := fmt.Sprintf("[%d %d]", cols, rows)
		if rows < 0 {
			want = fmt.Sprintf("[%d any]", cols)
		}
		return kernels.Matrix{}, fmt.Errorf("%w: %s: shape %v, want %s", ErrBadFile, t.Name, t.Shape, want)
	}
	if !kernels.Supported(t.Type) {
		return kernels.Matrix{}, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, t.Name, t.Type)
	}
	if cols%t.Type.BlockSize() != 0 {
		return kernels.Matrix{}, fmt.Errorf("%w: tensor %s: row of %d is not a whole number of %s blocks", ErrBadFile, t.Name, cols, t.Type)
	}
	m := kernels.Matrix{Type: t.Type, Rows: int(t.Shape[1]), Cols: cols, Data: t.Data}
	if want := m.RowBytes() * m.Rows; len(t.Data) < want {
		return kernels.Matrix{}, fmt.Errorf("%w: tensor %s has %d bytes, want %d", ErrBadFile, t.Name, len(t.Data), want)
	}
	return m, nil
}

// asVector returns tensor t (n values) converted to float32.
func asVector(t *gguf.Tensor, n int) ([]float32, error) {
	if t.NumElements() != int64(n) || (len(t.Shape) > 1 && t.Shape[0] != int64(n)) {
		return nil, fmt.Errorf("%w: %s: shape %v, want [%d]", ErrBadFile, t.Name, t.Shape, n)
	}
	if !kernels.Supported(t.Type) || n%t.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, t.Name, t.Type)
	}
	rb, err := t.Type.RowBytes(int64(n))
	if err != nil || int64(len(t.Data)) < rb {
		return nil, fmt.Errorf("%w: tensor %s is truncated", ErrBadFile, t.Name)
	}
	out := make([]float32, n)
	kernels.DequantizeRow(t.Type, t.Data[:rb], out)
	return out, nil
}

// asTable returns the 2-D tensor t (rows of cols values) converted to
// float32, row after row.
func asTable(t *gguf.Tensor, cols, rows int) ([]float32, error) {
	if len(t.Shape) != 2 || t.Shape[0] != int64(cols) || t.Shape[1] != int64(rows) {
		return nil, fmt.Errorf("%w: %s: shape %v, want [%d %d]", ErrBadFile, t.Name, t.Shape, cols, rows)
	}
	if !kernels.Supported(t.Type) || cols%t.Type.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: tensor %s has type %s", ErrUnsupported, t.Name, t.Type)
	}
	rb, err := t.Type.RowBytes(int64(cols))
	if err != nil || int64(len(t.Data)) < rb*int64(rows) {
		return nil, fmt.Errorf("%w: tensor %s is truncated", ErrBadFile, t.Name)
	}
	out := make([]float32, cols*rows)
	for r := range rows {
		kernels.DequantizeRow(t.Type, t.Data[int64(r)*rb:int64(r+1)*rb], out[r*cols:(r+1)*cols])
	}
	return out, nil
}

// checkVocab checks that the embeddings have a row for every token.
func (m *Model) checkVocab() error {
	if m.embd.Rows < m.tok.VocabSize() {
		return fmt.Errorf("%w: token_embd.weight has %d rows for a vocabulary of %d", ErrBadFile, m.embd.Rows, m.tok.VocabSize())
	}
	return nil
}

// loadTensors loads and checks every tensor the architecture declares.
func (m *Model) loadTensors() error {
	c := &m.cfg
	l := &tensorLoader{f: m.f, c: c, vocab: -1}
	for i := range m.fam.Model {
		if err := l.load(&m.fam.Model[i], "", &m.glob, m.fam.Model); err != nil {
			return err
		}
	}
	m.embd, m.output = &m.glob.mats[arch.TokenEmbd], &m.glob.mats[arch.Output]
	m.outputNorm, m.ropeFreqs = m.glob.vecs[arch.OutputNorm], m.glob.vecs[arch.RopeFreqs]
	m.ropeLong, m.ropeShort = m.glob.vecs[arch.RopeLong], m.glob.vecs[arch.RopeShort]
	if c.PerLayerDim > 0 {
		m.pleEmbd, m.pleProj = &m.glob.mats[arch.PerLayerTokEmbd], &m.glob.mats[arch.PerLayerModelProj]
		m.pleNorm = m.glob.vecs[arch.PerLayerProjNorm]
		if m.pleEmbd.Data == nil || m.pleProj.Data == nil || m.pleNorm == nil {
			return descriptionError(m.fam, "per-layer inputs without their tensors")
		}
		if m.pleEmbd.Rows != m.embd.Rows {
			return fmt.Errorf("%w: per_layer_token_embd.weight has %d rows, token_embd.weight %d", ErrBadFile, m.pleEmbd.Rows, m.embd.Rows)
		}
	}
	m.encoder = c.NonCausal
	if m.encoder {
		if err := m.checkEncoder(); err != nil {
			return err
		}
	} else if m.embd.Data == nil || m.output.Data == nil || m.outputNorm == nil {
		return descriptionError(m.fam, "token_embd, output and output_norm are required")
	}
	for i := range m.layers {
		L := &m.layers[i]
		p := "blk." + strconv.Itoa(i) + "."
		l.c = L.c
		for j := range m.fam.Layer {
			if m.fam.Layer[j].KV && L.plan.sharedKV {
				continue // another layer's keys and values
			}
			if !m.fam.Layer[j].Only.Has(c, i) {
				continue // a tensor of the other kind of layer (hybrid models)
			}
			if err := l.load(&m.fam.Layer[j], p, &L.weights, m.fam.Layer); err != nil {
				return err
			}
		}
		for _, ph := range L.plan.phases {
			if !ph.only.Has(c, i) {
				continue
			}
			for _, pr := range ph.proj {
				if L.mats[pr.W].Data == nil {
					return missingMatrix(m.fam, p, pr.W)
				}
			}
		}
		if L.plan.moe {
			if err := checkExperts(m.fam, p, &L.weights); err != nil {
				return err
			}
		}
	}
	return nil
}

// headDimGCD is the greatest common divisor of the layers' head sizes
// (the head size when they all have one): what a numerics mode's
// conditions on the head size (a multiple of 16) hold for in every layer.
func (m *Model) headDimGCD() int {
	g := m.cfg.HeadDim
	for i := range m.layers {
		for a := m.layers[i].c.HeadDim; a != 0; {
			g, a = a, g%a
		}
	}
	return g
}

// compileLayers gives each layer its parameters, its plan (one per
// distinct layer shape) and its KV cache layer.
func (m *Model) compileLayers() error {
	c := &m.cfg
	m.layers = make([]layer, c.Layers)
	type shape struct {
		heads, kvHeads, headDim, ff int
		sharedKV                    bool
	}
	plans := map[shape]*plan{}
	var own []config
	if c.Shapes != nil {
		own = make([]config, c.Layers)
	}
	for il := range m.layers {
		L := &m.layers[il]
		L.c = c
		if own != nil {
			own[il] = c.Layer(il)
			L.c = &own[il]
		}
		L.sliding = c.Sliding(il)
		L.noRope = !c.Rotates(il)
		shared := c.SharesKV(il)
		k := shape{L.c.Heads, L.c.KVHeads, L.c.HeadDim, L.c.FF, shared}
		if L.plan = plans[k]; L.plan == nil {
			pl, err := compilePlan(m.fam, L.c, shared)
			if err != nil {
				return err
			}
			plans[k], L.plan = pl, pl
			m.plans = append(m.plans, pl)
		}
		if shared {
			L.kv = m.layers[c.Shapes[il].KVFrom].kv
			continue
		}
		L.kv = len(m.kvDims)
		m.kvDims = append(m.kvDims, L.c.KVDim())
	}
	m.plan = m.layers[0].plan
	return nil
}

// ropeFactors are the RoPE frequency divisors of a session of nCtx
// positions: llama3's table when the file has one, else, as llama.cpp
// picks LongRoPE's, the long factors for a context beyond the one the model
// was trained with (rope.scaling.original_context_length) and the short
// ones within it; nil when the file has none.
func (m *Model) ropeFactors(nCtx int) []float32 {
	switch {
	case m.ropeFreqs != nil:
		return m.ropeFreqs
	case nCtx > m.cfg.CtxOrig:
		return m.ropeLong
	}
	return m.ropeShort
}

// Close releases the model's worker pool and, if Open mapped the file,
// unmaps it. Sessions must be closed first; closing with live sessions is an
// ErrBusy error and leaves the model open.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if m.sessions > 0 {
		return fmt.Errorf("engine: close model: %w: %d sessions still open", ErrBusy, m.sessions)
	}
	m.closed = true
	m.pool.Close()
	var errs []error
	if m.packed != nil {
		errs = append(errs, m.packed.close())
	}
	if m.ownsFile {
		errs = append(errs, m.f.Close())
		if m.mapping != nil {
			errs = append(errs, unmap(m.mapping))
			m.mapping = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine: close model: %w: %w", ErrIO, err)
	}
	return nil
}

// Info describes the model.
func (m *Model) Info() Info { return m.info }

// File is the model's GGUF file (valid until Close).
func (m *Model) File() *gguf.File { return m.f }

// Tokenizer is the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Tokenize converts text to token ids. addSpecial adds BOS/EOS as the model
// asks; parseSpecial lets special-token text (like "<|im_start|>") become
// those tokens.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	ids, err := m.tok.Encode(text, addSpecial, parseSpecial)
	if err != nil {
		return nil, fmt.Errorf("engine: tokenize: %w: %w", ErrInvalidArgument, err)
	}
	return ids, nil
}

// Detokenize converts token ids to text.
func (m *Model) Detokenize(ids []int32) string { return m.tok.Decode(ids) }

// TokenPiece is the bytes token id stands for inside a text (special tokens
// render as nothing).
func (m *Model) TokenPiece(id int32) []byte { return m.tok.Piece(id) }

// IsEOG reports whether id ends generation (EOS, EOT, <|im_end|> ...).
func (m *Model) IsEOG(id int32) bool { return m.tok.IsEOG(id) }

// ApplyChatTemplate renders msgs with the model's own chat template;
// addAssistant appends the assistant turn's opening. It is
// ApplyChatTemplateNamed with no name.
func (m *Model) ApplyChatTemplate(msgs []chat.Message, addAssistant bool) (string, error) {
	return m.ApplyChatTemplateNamed("", msgs, addAssistant)
}

// ApplyChatTemplateNamed renders msgs in the built-in format name (one of
// chat.Families; an unknown name is ErrInvalidArgument listing them), or
// with the model's own template when name is "".
//
// A model without a template is ErrUnsupported, its message naming the
// built-in formats: nothing is guessed, because a base model has no chat
// format and a guessed one silently gives rambling replies. A template
// using Jinja features the interpreter lacks is rendered in the built-in
// format of the family its marker strings name (<|im_start|> is chatml, and
// so on); one that names no family is ErrUnsupported too. An error the
// template raises itself (raise_exception) is ErrInvalidArgument.
func (m *Model) ApplyChatTemplateNamed(name string, msgs []chat.Message, addAssistant bool) (string, error) {
	bos, eos := "", ""
	if id := m.tok.BOS(); id >= 0 {
		bos = m.tok.Token(id)
	}
	if id := m.tok.EOS(); id >= 0 {
		eos = m.tok.Token(id)
	}
	if name != "" {
		f, err := chat.Family(name)
		if err != nil {
			return "", fmt.Errorf("engine: chat template: %w: %w", ErrInvalidArgument, err)
		}
		s, err := f.Render(msgs, addAssistant, bos, eos)
		if err != nil {
			return "", fmt.Errorf("engine: chat format %s: %w: %w", name, ErrInvalidArgument, err)
		}
		return s, nil
	}
	if strings.TrimSpace(m.template) == "" {
		return "", fmt.Errorf("engine: %w: the model has no chat template (tokenizer.chat_template); name a built-in template to use instead: %s",
			ErrUnsupported, m.builtinTemplateHint())
	}
	s, _, err := chat.Apply(m.template, msgs, addAssistant, bos, eos)
	if errors.Is(err, chat.ErrUnusable) {
		return "", fmt.Errorf("engine: %w: the model's chat template cannot be used (%w); name a built-in template to use instead: %s",
			ErrUnsupported, err, m.builtinTemplateHint())
	}
	if err != nil {
		return "", fmt.Errorf("engine: chat template: %w: %w", ErrInvalidArgument, err)
	}
	return s, nil
}

// builtinTemplateHint lists the built-in formats, the model's likely one
// first: "gemma (likely for this model), chatml, llama2, ...".
func (m *Model) builtinTemplateHint() string {
	guess := m.ChatFamily()
	var b strings.Builder
	b.WriteString(guess + " (likely for this model)")
	for _, n := range chat.Families() {
		if n != guess {
			b.WriteString(", " + n)
		}
	}
	return b.String()
}

// ChatFamily is the built-in chat format (a chat.Family name) most likely
// to suit the model, which errors about a missing or unusable template
// suggest first. As llama.cpp guesses it, it
// follows the architecture and vocabulary rather than always ChatML: "gemma"
// for the Gemma architectures, "llama3" for a Llama 3 vocabulary (it has
// <|start_header_id|>), else "chatml".
func (m *Model) ChatFamily() string {
	if f := m.fam.ChatFormat; f != "" {
		return f
	}
	if m.tok.ID("<|start_header_id|>") >= 0 {
		return "llama3"
	}
	return "chatml"
}
