package engine

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/numerics"
	"github.com/moonlm/moonlm/engine/pool"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// SessionParams configure NewSession.
type SessionParams struct {
	// NCtx is the most positions the session holds; 0 means the model's
	// training context.
	NCtx int
	// KVType is the KV cache element type: gguf.F16 (the default, as
	// llama.cpp), gguf.F32 or gguf.Q8_0. Because gguf.F32 is the zero
	// value, an F32 cache is requested with KVF32 (or KVType F32 together
	// with KVF32). A Q8_0 cache (about half of F16's memory, as llama.cpp's
	// -ctk q8_0 -ctv q8_0) computes attention as llama.cpp's flash
	// attention does over it; it needs a head dimension that is a multiple
	// of 32 and the fast or llama.cpp numerics.
	KVType gguf.Type
	// KVF32 selects an F32 KV cache (no f16 rounding in attention).
	KVF32 bool
	// Threads is the number of threads; 0 uses the model's shared pool.
	// Another count gives the session a pool of its own.
	Threads int
	// CheckpointEvery and CheckpointBytes, for a hybrid model (recurrent
	// layers, whose state cannot be cut back to a position), say how often
	// the session keeps a copy of that state while decoding (every so many
	// positions; 0 is 32, negative never) and how much memory those
	// copies may take (0 is 128 MiB, negative none; at least two are
	// kept otherwise). A copy is also kept at the end of every prefill.
	// Rewinding goes back to the last copy at or before the position and
	// evaluates the tokens after it again (recurrent.go).
	CheckpointEvery int
	CheckpointBytes int64
}

// maxBatch is how many tokens one forward pass processes at once in the
// fast mode; longer prompts are prefilled in chunks of this size (the
// reference modes take numerics.Ops.Batch).
const maxBatch = 64

// Session is one sequence's state: its KV cache, position and scratch
// buffers. A Session must not be used by two goroutines at once: a call
// that overlaps another returns ErrBusy.
type Session struct {
	m       *Model
	kern    *kernels.Set // the model's kernel set
	c       *config
	pool    *pool.Pool
	ownPool bool
	nCtx    int
	params  SessionParams // as given to NewSession, with NCtx resolved (for Fork)
	cache   *kvCache
	pos     int
	// hist is the token at each position held (len(hist) == pos), so that
	// PrefillReuse can find the prefix it shares with a new sequence and a
	// saved state can name its tokens. Its capacity follows the cache's,
	// so appending to it allocates only when the cache grows.
	hist []int32
	// stats counts the work done, for SessionStats.
	stats SessionStats

	busy   atomic.Bool
	cancel atomic.Bool
	// lent: the Generate holding busy has handed the session to its
	// Stepper, so a Batcher step may use it without entering it.
	lent   bool
	inStep uint64 // the Batcher step the session last took part in
	// stepRun is the tokens of the session's current evaluation that
	// earlier Batcher steps took (BatchEntry.Continues), for its
	// checkpoints.
	stepRun int
	closed  atomic.Bool
	workers int

	// scratch, sized for maxBatch tokens
	nb       int                     // batch capacity
	bufs     [arch.NumBufs][]float32 // nb x plan.width per buffer
	q, att   []float32               // bufs[Q] and bufs[Att], for attention
	acts     map[gguf.Type][]byte    // activations in each vec-dot type used
	actTypes []gguf.Type             // keys of acts, fixed order
	rope     []float32               // nb x nRot cos/sin, global layers
	ropeFreq []float32               // the RoPE frequency divisors for this context, or nil
	ropeSWA  []float32               // nb x RotSWA cos/sin, sliding layers
	pli      []float32               // nb x PerLayerDim*Layers: each token's per-layer inputs, or nil
	pleRow   [][]float32             // per thread: one token's per_layer_token_embd row, dequantized
	scores   [][]float32             // per thread, cache capacity
	alibi    []float32               // per head, ALiBi's slope (Params.AlibiMaxBias)
	q16      [][]uint16              // per thread, head dim
	w16      [][]uint16              // per thread, cache capacity: f16 softmax weights
	q8q      [][]byte                // per thread, Q8_0 cache: its query heads in Q8_0
	vrow     [][]float32             // per thread, Q8_0 cache: one head's values, dequantized
	tokens   []int32                 // Decode's one-token batch
	batch    []int32                 // the tokens of the current forward pass

	// the current operation's parameters, read by the pool tasks
	nTok     int     // tokens in the batch
	p0       int     // position of the first
	il       int     // layer
	pl       *plan   // layer il's plan (its buffers' widths)
	lc       *config // layer il's parameters
	kvl      int     // layer il's KV cache layer
	stage    int
	phase    int  // stLayer: the token phase of the plan
	chain    bool // stLayer: also run phase 0 of layer il+1
	outFirst int  // first token of the batch whose logits are wanted
	jobs     [maxProj]mmJob
	nJobs    int
	fnMat    pool.Task
	fnAttn   pool.Task
	fnDecQ8  pool.Task // decodeQ8
	fnStage  pool.Task
	fnDelta  pool.Task

	// A decode step's attention in two passes (attn_decode.go): every
	// query head's scores (decScores; nil where it would not fit
	// headScoresMax), then the outputs by KV head.
	fnDecScores, fnDecOut pool.Task
	decScores             []float32

	// embed is Embed's pooling state (embed.go), nil until the first Embed.
	embed *embedState
	// packed: the batch holds several texts of an encoder (EmbedBatch);
	// per batch token, its text, its position in it and the batch indices
	// of the text's first and last tokens.
	packed                                 bool
	packText, packPos, packFirst, packLast []int32
	// multi, when not nil, says the batch holds tokens of several sessions
	// (a Batcher's step): this session is then only the step's scratch.
	multi *multiSeq
	// moe is the MoE step's scratch, nil for a dense model.
	moe *moeScratch
	// rec is the recurrent layers' state and checkpoints, nil for a model
	// without recurrent layers.
	rec *recurrent
	// dn is the default numerics' DeltaNet scratch (deltanet_chunk.go),
	// nil without recurrent layers or in a reference numerics mode, whose
	// recurrence runs token by token in ggml's order.
	dn *deltaNetScratch

	// gen is Generate's scratch, reused so that generating allocates
	// nothing per token.
	gen genScratch
	// testAfterChunk, when set (by tests), runs after each chunk of an
	// evaluation.
	testAfterChunk func()
	// testAfterLayer, when set (by tests), runs after each layer of a
	// forward pass.
	testAfterLayer func(il int)

	// ops are the numerics mode's building blocks.
	ops numerics.Ops
	// attend computes one head of one token's attention (attendHead, or
	// attendMode when the numerics mode has its own).
	attend func(t, h, worker int)
	// cacheCleanup unmaps the KV cache if the session is dropped unclosed.
	cacheCleanup runtime.Cleanup
}

// mmJob is one matrix product of an operation.
type mmJob struct {
	m  *kernels.Matrix
	xq []byte
	y  []float32
}

// NewSession creates a session with an empty KV cache.
func (m *Model) NewSession(p SessionParams) (*Session, error) {
	c := &m.cfg
	nCtx := p.NCtx
	if nCtx == 0 {
		nCtx = c.CtxTrain
	}
	if err := checkThreads("session threads", p.Threads); err != nil {
		return nil, fmt.Errorf("engine: new session: %w", err)
	}
	if nCtx < 0 {
		return nil, fmt.Errorf("engine: new session: %w: context %d, threads %d", ErrInvalidArgument, p.NCtx, p.Threads)
	}
	if m.encoder && nCtx > c.CtxTrain {
		// Learned position embeddings end at the training context.
		return nil, fmt.Errorf("engine: new session: %w: context %d > the encoder's %d positions", ErrInvalidArgument, nCtx, c.CtxTrain)
	}
	if m.encoder && nCtx > maxEncoderCtx {
		// An encoder's batch is its context: bound the scratch it sizes.
		return nil, fmt.Errorf("engine: new session: %w: an encoder context of %d (at most %d)", ErrInvalidArgument, nCtx, maxEncoderCtx)
	}
	f32 := p.KVF32 || m.encoder // encoders attend in f32, as llama.cpp's cacheless attention
	kind := kvF16
	switch {
	case f32:
		kind = kvF32
	case p.KVType == gguf.F16, p.KVType == gguf.F32:
	case p.KVType == gguf.Q8_0:
		kind = kvQ8
		if c.Shapes != nil {
			return nil, fmt.Errorf("engine: new session: %w: a Q8_0 KV cache for layers of different shapes (%s)", ErrUnsupported, c.Arch)
		}
		if c.HeadDim%32 != 0 {
			return nil, fmt.Errorf("engine: new session: %w: a Q8_0 KV cache needs a head dimension that is a multiple of 32, this model's is %d", ErrUnsupported, c.HeadDim)
		}
		if m.numerics == NumericsIk {
			return nil, fmt.Errorf("engine: new session: %w: a Q8_0 KV cache with the ik numerics", ErrUnsupported)
		}
	default:
		return nil, fmt.Errorf("engine: new session: %w: KV cache type %s (want f16, f32 or q8_0)", ErrUnsupported, p.KVType)
	}
	// A make() too large for memory is a fatal runtime error, not a panic
	// we could recover, so refuse absurd caches up front. (Sizes in
	// eighths of a byte per value: Q8_0 is 34 bytes per 32 values.)
	eighths := map[kvKind]int64{kvF16: 16, kvF32: 32, kvQ8: 34 * 8 / 32}[kind]
	kvWidth := int64(0)
	for _, d := range m.kvDims {
		kvWidth += int64(d)
	}
	if full := int64(nCtx) * kvWidth * 2 * eighths / 8; nCtx > 1<<26 || full > 1<<40 {
		return nil, fmt.Errorf("engine: new session: %w: a context of %d needs a %d-byte KV cache", ErrOutOfMemory, nCtx, full)
	}
	if err := m.numerics.CheckSession(f32); err != nil {
		return nil, fmt.Errorf("engine: new session: %w", err)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("engine: new session: %w: model is closed", ErrInvalidArgument)
	}
	m.sessions++
	m.mu.Unlock()

	s := &Session{m: m, kern: m.kern, c: c, nCtx: nCtx, pool: m.pool}
	s.params = p
	s.params.NCtx = nCtx
	s.ops = m.numerics.Ops(m.kern, numerics.SessionShape{HeadDim: m.headDimGCD(), KVF32: f32, GGMLDecode: m.ggmlDecodeOrder})
	if s.ops.Batch == 0 {
		s.ops.Batch = maxBatch
	}
	s.attend = s.attendHead
	if s.ops.Attend != nil {
		s.attend = s.attendMode
	}
	if c.AlibiMaxBias > 0 {
		if s.ops.Attend != nil || !f32 {
			return nil, fmt.Errorf("engine: new session: %w: ALiBi with an f16 or quantized cache or the %s numerics' attention", ErrUnsupported, m.numerics)
		}
		s.alibi = alibiSlopes(c.Heads, c.AlibiMaxBias)
	}
	if p.Threads != 0 && p.Threads != m.pool.Threads() {
		s.pool, s.ownPool = pool.New(p.Threads, m.poolOpts...), true
	}
	if err := s.alloc(kind); err != nil {
		s.release()
		return nil, fmt.Errorf("engine: new session: %w", err)
	}
	return s, nil
}

// attnScratch makes one worker's attention buffers for the cache's
// capacity: scores for the query heads of a KV head (attendGroup), at
// least what the numerics mode's attention needs (attendMode), and one
// head's f16 weights (attendHead).
func (s *Session) attnScratch() ([]float32, []uint16) {
	return s.attnScratchFor(s.cache.cap)
}

// attnScratchFor is attnScratch for a cache of capacity positions.
func (s *Session) attnScratchFor(capacity int) ([]float32, []uint16) {
	g := 0
	for i := range s.m.layers {
		g = max(g, s.m.layers[i].c.Heads/s.m.layers[i].c.KVHeads)
	}
	return make([]float32, max(capacity*g, s.ops.AttendScratch)), make([]uint16, capacity)
}

func (s *Session) alloc(kind kvKind) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: session buffers: %v", ErrOutOfMemory, r)
		}
	}()
	c := s.c
	m := s.m
	s.cache, err = newKVCacheDims(m.kvDims, s.nCtx, kind)
	if err != nil {
		return err
	}
	if c.Hybrid() {
		s.cache.unused = c.SSM.Recurrent
	}
	// The cache is mapped outside the Go heap: unmap it if the session is
	// dropped without Close (Close unmaps it at once and stops the cleanup,
	// so a closed session costs the collector nothing later, which could
	// otherwise run it, and allocate, in the middle of another session's
	// decode).
	s.cacheCleanup = runtime.AddCleanup(s, (*kvCache).free, s.cache)
	nb := min(s.ops.Batch, s.nCtx)
	if m.encoder {
		nb = s.nCtx // a sequence is computed in one pass (non-causal attention)
	}
	s.nb = nb
	// Each buffer as wide as the widest layer's.
	var width [arch.NumBufs]int
	maxIn, moe := 0, false
	for _, pl := range m.plans {
		for b, w := range pl.width {
			width[b] = max(width[b], w)
		}
		maxIn, moe = max(maxIn, pl.maxIn), moe || pl.moe
	}
	for b, w := range width {
		if w > 0 {
			s.bufs[b] = make([]float32, nb*w)
		}
	}
	s.q, s.att = s.bufs[arch.Q], s.bufs[arch.Att]
	s.rope = make([]float32, nb*c.Rot)
	s.ropeFreq = m.ropeFactors(s.nCtx)
	if c.SWAWindow > 0 && c.RopeSWA != 0 {
		s.ropeSWA = make([]float32, nb*c.RotSWA)
	}
	if m.pleProj != nil {
		s.pli = make([]float32, nb*m.pleProj.Rows)
	}
	s.tokens = make([]int32, nb)
	// One activation buffer per vec-dot type, big enough for the widest input.
	s.acts = map[gguf.Type][]byte{}
	maxCols := max(c.Dim, maxIn)
	add := func(mt *kernels.Matrix) {
		t := kernels.ActType(mt)
		if _, ok := s.acts[t]; !ok && mt.Data != nil {
			s.acts[t] = make([]byte, nb*kernels.ActBytes(mt, maxCols))
			s.actTypes = append(s.actTypes, t)
		}
	}
	add(m.output)
	if m.pleProj != nil {
		add(m.pleProj)
	}
	mats := blockMatrices(m.fam)
	for i := range m.layers {
		for _, t := range mats {
			add(&m.layers[i].mats[t.Role])
		}
	}
	s.workers = s.pool.Threads()
	s.scores = make([][]float32, s.workers)
	s.q16 = make([][]uint16, s.workers)
	s.w16 = make([][]uint16, s.workers)
	maxHead := 0
	for i := range m.layers {
		maxHead = max(maxHead, m.layers[i].c.HeadDim)
	}
	for i := range s.scores {
		s.scores[i], s.w16[i] = s.attnScratch()
		s.q16[i] = make([]uint16, maxHead)
	}
	if m.pleProj != nil {
		s.pleRow = make([][]float32, s.workers)
		for i := range s.pleRow {
			s.pleRow[i] = make([]float32, m.pleProj.Rows)
		}
	}
	if kind == kvQ8 {
		s.cache.rotK, s.cache.rotV = kvRotation(c.HeadDim)
		s.q8q = make([][]byte, s.workers)
		s.vrow = make([][]float32, s.workers)
		h := 1 // the most query heads of a layer (decodeQ8's queries)
		for i := range m.layers {
			h = max(h, m.layers[i].c.Heads)
		}
		for i := range s.q8q {
			s.q8q[i] = make([]byte, h*c.HeadDim/32*q8Block)
			s.vrow[i] = make([]float32, c.HeadDim)
		}
	}
	if moe {
		s.moe = s.newMoEScratch(nb)
	}
	L0 := &m.layers[0]
	s.pl, s.lc, s.kvl = L0.plan, L0.c, L0.kv
	if s.rec, err = newRecurrent(c, s.params.CheckpointEvery, s.params.CheckpointBytes); err != nil {
		return err
	}
	if s.rec != nil && !m.numerics.Reference() {
		s.dn = newDeltaNetScratch(s.workers, c.SSM.State, c.SSM.ConvDim(), deltaChunk)
	}
	s.fnMat = s.runMatrices
	s.fnDelta = s.runDeltaNet
	s.fnAttn = s.runAttention
	s.fnDecScores, s.fnDecOut, s.fnDecQ8 = s.decodeScores, s.decodeOutputs, s.decodeQ8
	if kind == kvF16 || kind == kvQ8 && !m.numerics.Reference() {
		s.fitHeadScores()
	}
	s.fnStage = s.runStage
	return nil
}

// NCtx is the session's context size in positions.
func (s *Session) NCtx() int { return s.nCtx }

// Pos is the number of positions in the KV cache (the next token's position).
func (s *Session) Pos() int { return s.pos }

// Model is the session's model.
func (s *Session) Model() *Model { return s.m }

// Cancel makes the running Prefill, Decode or Generate return ErrCancelled
// at its next layer boundary, or, if none is running (or the running one is
// past its last check), the next one. The request is one flag owned by the
// session: the call that returns ErrCancelled consumes it, and later calls
// run normally. It is safe from any goroutine.
func (s *Session) Cancel() { s.cancel.Store(true) }

// cancelled consumes a pending Cancel: true means the caller must return
// ErrCancelled. Checking and clearing in one step means no Cancel is lost
// between them (a request that arrives after it waits for the next check).
func (s *Session) cancelled() bool { return s.cancel.CompareAndSwap(true, false) }

// enter marks the session busy for one call.
func (s *Session) enter(what string) error {
	if s.closed.Load() {
		return fmt.Errorf("engine: %s: %w: session is closed", what, ErrInvalidArgument)
	}
	if !s.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("engine: %s: %w: another call is running on this session", what, ErrBusy)
	}
	return nil
}

func (s *Session) leave() { s.busy.Store(false) }

// Close releases the session. A call running on another goroutine is
// cancelled and waited for.
func (s *Session) Close() {
	if s.closed.Swap(true) {
		return
	}
	for !s.busy.CompareAndSwap(false, true) {
		s.cancel.Store(true)
		runtime.Gosched()
	}
	s.release()
}

func (s *Session) release() {
	if s.ownPool {
		s.pool.Close()
	}
	if s.cache != nil {
		s.cacheCleanup.Stop()
		s.cache.free()
	}
	s.cache = nil
	if s.rec != nil {
		s.rec.free()
		s.rec = nil
	}
	s.m.mu.Lock()
	s.m.sessions--
	s.m.mu.Unlock()
}

// Rewind drops every position from nKeep on, so the next token is at
// position nKeep (for example to regenerate, or to reuse a shared prefix).
// A hybrid model's session restores its last checkpoint at or before
// nKeep and evaluates the tokens after it again (see SessionParams); if
// that fails the error says which positions the session then holds.
func (s *Session) Rewind(nKeep int) error {
	if err := s.enter("rewind"); err != nil {
		return err
	}
	defer s.leave()
	if nKeep < 0 || nKeep > s.pos {
		return fmt.Errorf("engine: rewind: %w: keep %d of %d positions", ErrInvalidArgument, nKeep, s.pos)
	}
	if nKeep == s.pos {
		return nil
	}
	return s.truncate("rewind", nKeep)
}

// setPos drops the positions from n on (n <= s.pos), as positions of the
// KV cache; a hybrid model's recurrent state goes back with truncate
// (setPos(0) empties it).
func (s *Session) setPos(n int) {
	if n == 0 && s.rec != nil {
		s.rec.reset()
	}
	s.pos = n
	s.stepRun = 0
	s.hist = s.hist[:n]
}

// Prefill evaluates tokens after the session's current position and writes
// the last position's logits into logits (len >= the vocabulary size), or
// skips computing them when logits is nil.
func (s *Session) Prefill(tokens []int32, logits []float32) error {
	if err := s.enter("prefill"); err != nil {
		return err
	}
	defer s.leave()
	if logits != nil && len(logits) < s.m.output.Rows {
		return fmt.Errorf("engine: prefill: %w: logits buffer of %d for a vocabulary of %d", ErrInvalidArgument, len(logits), s.m.output.Rows)
	}
	from := len(tokens) - 1
	if logits == nil {
		from = len(tokens)
	}
	return s.eval("prefill", tokens, logits, from)
}

// PrefillAll is Prefill writing the logits of every position: len(tokens)
// rows of the vocabulary size, for perplexity and tests.
func (s *Session) PrefillAll(tokens []int32, logits []float32) error {
	return s.PrefillFrom(tokens, 0, logits)
}

// PrefillFrom is Prefill writing the logits of tokens[from:]: one row of
// the vocabulary size per position, so perplexity can score the second
// half of a chunk without holding logits for the first.
func (s *Session) PrefillFrom(tokens []int32, from int, logits []float32) error {
	if err := s.enter("prefill"); err != nil {
		return err
	}
	defer s.leave()
	if from < 0 || from > len(tokens) {
		return fmt.Errorf("engine: prefill: %w: logits from %d of %d tokens", ErrInvalidArgument, from, len(tokens))
	}
	if need := (len(tokens) - from) * s.m.output.Rows; len(logits) < need {
		return fmt.Errorf("engine: prefill: %w: logits buffer of %d for %d positions x %d", ErrInvalidArgument, len(logits), len(tokens)-from, s.m.output.Rows)
	}
	return s.eval("prefill", tokens, logits, from)
}

// Decode evaluates one token and writes its logits (len >= the vocabulary
// size). It allocates nothing.
func (s *Session) Decode(token int32, logits []float32) error {
	if err := s.enter("decode"); err != nil {
		return err
	}
	defer s.leave()
	if len(logits) < s.m.output.Rows {
		return fmt.Errorf("engine: decode: %w: logits buffer of %d for a vocabulary of %d", ErrInvalidArgument, len(logits), s.m.output.Rows)
	}
	s.tokens[0] = token
	return s.eval("decode", s.tokens[:1], logits, 0)
}

// fitScratch sizes the buffers that follow the cache's capacity (the
// attention scratch and the token history) after the cache grew.
func (s *Session) fitScratch() {
	if len(s.w16[0]) < s.cache.cap {
		for i := range s.scores {
			s.scores[i], s.w16[i] = s.attnScratch()
		}
	}
	if s.decScores != nil {
		s.fitHeadScores()
	}
	if cap(s.hist) < s.cache.cap {
		h := make([]int32, len(s.hist), s.cache.cap)
		copy(h, s.hist)
		s.hist = h
	}
}

// eval runs tokens through the model in chunks, writing the logits of
// tokens[from:] into logits, one row each. On error the session's position
// is unchanged.
func (s *Session) eval(what string, tokens []int32, logits []float32, from int) (err error) {
	if len(tokens) == 0 {
		return fmt.Errorf("engine: %s: %w: no tokens", what, ErrInvalidArgument)
	}
	if s.m.encoder && !s.embedding() {
		return fmt.Errorf("engine: %s: %w: %s is an embedding model (it has no logits; use Embed)", what, ErrUnsupported, s.m.cfg.Arch)
	}
	vocab := int32(s.m.embd.Rows)
	for i, t := range tokens {
		if t < 0 || t >= vocab {
			return fmt.Errorf("engine: %s: %w: token %d at %d is outside the vocabulary of %d", what, ErrInvalidArgument, t, i, vocab)
		}
	}
	if s.pos+len(tokens) > s.nCtx {
		return fmt.Errorf("engine: %s: %w: %d positions used + %d tokens > context %d", what, ErrContextFull, s.pos, len(tokens), s.nCtx)
	}
	if err := s.m.numerics.CheckPositions(s.pos + len(tokens)); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	if err := s.m.numerics.CheckBatch(min(s.nb, len(tokens))); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	if err := s.cache.ensure(s.pos+len(tokens), s.pos); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	s.fitScratch()
	start := s.pos
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = panicError("engine: "+what, r)
		}
		if err != nil {
			if s.rec != nil && s.pos >= start {
				// The recurrent state went past start, perhaps half
				// way through a chunk: go back to a checkpoint.
				if terr := s.truncate(what, start); terr != nil {
					err = fmt.Errorf("%w; %w", err, terr)
				}
				return
			}
			s.setPos(start)
		}
	}()
	vocabOut := s.m.output.Rows
	for done := 0; done < len(tokens); {
		n := min(s.nb, len(tokens)-done)
		chunk := tokens[done : done+n]
		var out []float32
		first := max(from-done, 0)
		if first < n {
			out = logits[(done+first-from)*vocabOut : (done+n-from)*vocabOut]
		}
		if err := s.forward(chunk, out, first); err != nil {
			// A task that panicked on a pool worker comes back as an error,
			// not a panic: classify it as the recover above would.
			if pe := (*pool.PanicError)(nil); errors.As(err, &pe) {
				return panicError(fmt.Sprintf("engine: %s at position %d", what, s.pos), pe)
			}
			return fmt.Errorf("engine: %s at position %d: %w", what, s.pos, err)
		}
		if s.embedding() {
			s.embedChunk(done, n)
		}
		s.hist = append(s.hist, chunk...)
		s.pos += n
		s.stats.Evaluated += int64(n)
		done += n
		if s.testAfterChunk != nil {
			s.testAfterChunk()
		}
		s.m.dropLookupPages()
	}
	if s.rec != nil {
		s.rec.checkpointAfter(len(tokens), s.pos)
		s.stepRun = 0 // a batched evaluation left unfinished ends here
	}
	return nil
}
