package engine

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/moonlm/moonlm/engine/pool"
)

// BatchEntry is one session's part of a batched step: the tokens it
// evaluates (one to decode, or several: a chunk of its prompt) and where
// the last token's logits go.
type BatchEntry struct {
	// Session is a session of the batcher's model, with the batcher's KV
	// cache type; at most one entry per session in a step.
	Session *Session
	// Tokens are evaluated at the session's next positions.
	Tokens []int32
	// Logits, when not nil, receives the last token's logits (len >= the
	// vocabulary size).
	Logits []float32
	// Continues says a later step goes on with the same evaluation (a
	// prompt fed in chunks over several steps). A hybrid model's session
	// takes its checkpoints of the recurrent state as if each evaluation
	// were one Prefill (more than one token) or Decode call on it alone
	// (SessionParams.CheckpointEvery): the entries marked Continues and
	// the next one not marked are one evaluation, checkpointed at its
	// end only. Other models ignore it.
	Continues bool
	// Err is the entry's outcome, set by Step: nil when its tokens were
	// evaluated (the session then holds them), else why not (the session
	// is unchanged).
	Err error
}

// multiSeq describes a step holding tokens of several sessions: per batch
// token, its session, its offset among that session's tokens in the step,
// that session's token count and the row of its logits (-1: none).
type multiSeq struct {
	seq       []*Session
	off, n    []int32
	outRow    []int32
	nOut      int
	maxCap    int // the largest KV cache capacity among the step's sessions
	scratchAt int // the capacity the scratch buffers were sized for
}

// Batcher advances several sessions of one model in shared forward steps:
// the matrix products take the tokens of all of them as one batch, so the
// weights stream from memory once per step instead of once per session,
// while attention runs for each token over its own session's KV cache.
//
// A session's results do not depend on what else is in the step: the
// products are batch-invariant (kernels.MatMul) and everything else is per
// token, or, for a hybrid model's recurrent layers, per session (each
// session's convolution and DeltaNet state advanced over its own tokens
// in order), so a session's logits are bit for bit those it would get
// alone (decoding one token, or prefilling the same chunk) in the fast
// numerics. Layers of different shapes (gemma4) run as alone too: the
// step's buffers are as wide as the widest layer's and each layer reads
// its own plan, parameters and KV cache layer.
// The llama.cpp and ik_llama.cpp numerics modes reproduce those engines,
// whose products round by batch size, so there a batched step may differ
// from a lone one by float rounding.
//
// A Batcher must not be used by two goroutines at once (Step returns
// ErrBusy); the sessions it steps are busy for the step's duration.
type Batcher struct {
	m      *Model
	s      *Session // the step's scratch: buffers for MaxTokens tokens
	ms     multiSeq
	tokens []int32
	logits []float32 // MaxTokens x vocabulary
	live   []int     // the entries taking part in the current step
	// entered[k]: Step marked live entry k's session busy (not when its
	// Generate lent it).
	entered []bool
	busy    atomic.Bool
	closed  atomic.Bool
	// step numbers the steps; a session taking part in one records it
	// (Session.inStep), so a lent session is not admitted twice.
	step uint64
}

// NewBatcher makes a batcher for sessions made with parameters like p: its
// KVType, KVF32 and Threads (the pool the steps run on) count; NCtx and
// the checkpoint parameters do not (each session keeps its own context
// and, for a hybrid model, its own recurrent state and checkpoints).
func (m *Model) NewBatcher(p SessionParams) (*Batcher, error) {
	if m.encoder {
		return nil, fmt.Errorf("engine: new batcher: %w: %s is an embedding model (it has no logits)", ErrUnsupported, m.cfg.Arch)
	}
	p.NCtx = 0
	// The step's scratch keeps no checkpoints: the recurrent layers
	// read and update each session's own state.
	p.CheckpointEvery, p.CheckpointBytes = -1, -1
	s, err := m.NewSession(p)
	if err != nil {
		return nil, fmt.Errorf("engine: new batcher: %w", err)
	}
	b := &Batcher{m: m, s: s}
	nb := s.nb
	b.ms = multiSeq{seq: make([]*Session, nb), off: make([]int32, nb), n: make([]int32, nb), outRow: make([]int32, nb)}
	b.tokens = make([]int32, nb)
	b.logits = make([]float32, nb*m.output.Rows)
	b.live = make([]int, 0, nb)
	b.entered = make([]bool, nb)
	b.ms.scratchAt = s.cache.cap
	return b, nil
}

// MaxTokens is the most tokens one step evaluates, over all its entries.
func (b *Batcher) MaxTokens() int { return b.s.nb }

// Close releases the batcher's buffers. Its sessions are not affected.
func (b *Batcher) Close() {
	if b.closed.Swap(true) {
		return
	}
	for !b.busy.CompareAndSwap(false, true) {
		b.s.Cancel()
	}
	b.s.Close()
}

// Step evaluates every entry's tokens in one forward pass and sets each
// entry's Err. An entry that cannot take part (a closed or busy session,
// another model or cache type, a token outside the vocabulary, a full
// context, a pending Cancel, which it consumes, or more tokens than the
// step has room for after the entries before it) gets its error and the
// others go on. The result is an error only when the step as a whole
// failed (the batcher is busy or closed, or the forward pass failed: then
// every taking part entry has that error and no session changed; a hybrid
// model's session goes back to its last checkpoint and evaluates the
// positions after it again, and if that fails too its entry's error says
// which positions it then holds).
// Step allocates nothing unless a session's KV cache grows or a hybrid
// session's checkpoint needs new memory.
func (b *Batcher) Step(entries []BatchEntry) (err error) {
	if b.closed.Load() {
		return fmt.Errorf("engine: batch step: %w: batcher is closed", ErrInvalidArgument)
	}
	if !b.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("engine: batch step: %w: another step is running on this batcher", ErrBusy)
	}
	defer b.busy.Store(false)
	b.step++
	b.live = b.live[:0]
	total, nOut := 0, 0
	for i := range entries {
		e := &entries[i]
		var entered bool
		entered, e.Err = b.admit(e, total)
		if e.Err != nil {
			continue
		}
		b.entered[len(b.live)] = entered
		b.live = append(b.live, i)
		total += len(e.Tokens)
		if e.Logits != nil {
			nOut++
		}
	}
	if len(b.live) == 0 {
		return nil
	}
	defer func() {
		for k, i := range b.live {
			if b.entered[k] {
				entries[i].Session.leave()
			}
		}
	}()
	// Lay the tokens out entry after entry.
	ms := &b.ms
	t, row := 0, 0
	ms.maxCap = 0
	for _, i := range b.live {
		e := &entries[i]
		n := len(e.Tokens)
		ms.maxCap = max(ms.maxCap, e.Session.cache.cap)
		for k := range n {
			ms.seq[t], ms.off[t], ms.n[t], ms.outRow[t] = e.Session, int32(k), int32(n), -1
			b.tokens[t] = e.Tokens[k]
			t++
		}
		if e.Logits != nil {
			ms.outRow[t-1] = int32(row)
			row++
		}
	}
	ms.nOut = nOut
	if err := b.run(total, nOut); err != nil {
		clear(ms.seq[:total]) // hold no session past the step
		for _, i := range b.live {
			e := &entries[i]
			e.Err = err
			if s := e.Session; s.rec != nil {
				// The recurrent layers may have advanced the state part
				// of the way: back to a checkpoint and forward again.
				if terr := s.truncate("batch step", s.pos); terr != nil {
					e.Err = fmt.Errorf("%w; %w", err, terr)
				}
			}
		}
		return err
	}
	clear(ms.seq[:total])
	vocab := b.m.output.Rows
	row = 0
	for _, i := range b.live {
		e := &entries[i]
		s := e.Session
		s.hist = append(s.hist, e.Tokens...)
		s.pos += len(e.Tokens)
		s.stats.Evaluated += int64(len(e.Tokens))
		if e.Logits != nil {
			copy(e.Logits[:vocab], b.logits[row*vocab:(row+1)*vocab])
			row++
		}
		if s.rec != nil {
			// The checkpoints due after the evaluation this entry ends,
			// as after a Prefill or Decode call of its tokens alone.
			s.stepRun += len(e.Tokens)
			if !e.Continues {
				s.rec.checkpointAfter(s.stepRun, s.pos)
				s.stepRun = 0
			}
		}
	}
	b.m.dropLookupPages()
	return nil
}

// admit checks entry e and, when it can take part in a step that already
// holds total tokens, marks its session busy (entered; unless a Generate
// lent it) and makes room in its cache.
func (b *Batcher) admit(e *BatchEntry, total int) (entered bool, err error) {
	err = b.check(e, total)
	if err != nil {
		return false, err
	}
	s := e.Session
	if !s.lent {
		if err := s.enter("batch step"); err != nil {
			return false, err
		}
	} else if s.inStep == b.step {
		return false, fmt.Errorf("engine: batch step: %w: the session is in this step already", ErrBusy)
	}
	if err := b.prepare(s, len(e.Tokens)); err != nil {
		if !s.lent {
			s.leave()
		}
		return false, err
	}
	s.inStep = b.step
	return !s.lent, nil
}

// check is admit's checks of e's arguments.
func (b *Batcher) check(e *BatchEntry, total int) error {
	const what = "batch step"
	s := e.Session
	if s == nil {
		return fmt.Errorf("engine: %s: %w: no session", what, ErrInvalidArgument)
	}
	if s.m != b.m {
		return fmt.Errorf("engine: %s: %w: the session belongs to another model", what, ErrInvalidArgument)
	}
	if len(e.Tokens) == 0 {
		return fmt.Errorf("engine: %s: %w: no tokens", what, ErrInvalidArgument)
	}
	if total+len(e.Tokens) > b.s.nb {
		return fmt.Errorf("engine: %s: %w: %d tokens do not fit after %d (at most %d per step)", what, ErrInvalidArgument, len(e.Tokens), total, b.s.nb)
	}
	if e.Logits != nil && len(e.Logits) < b.m.output.Rows {
		return fmt.Errorf("engine: %s: %w: logits buffer of %d for a vocabulary of %d", what, ErrInvalidArgument, len(e.Logits), b.m.output.Rows)
	}
	vocab := int32(b.m.embd.Rows)
	for i, t := range e.Tokens {
		if t < 0 || t >= vocab {
			return fmt.Errorf("engine: %s: %w: token %d at %d is outside the vocabulary of %d", what, ErrInvalidArgument, t, i, vocab)
		}
	}
	return nil
}

// prepare checks that s (held) can take n more tokens in this step and
// makes room in its cache.
func (b *Batcher) prepare(s *Session, n int) error {
	const what = "batch step"
	if s.closed.Load() {
		return fmt.Errorf("engine: %s: %w: session is closed", what, ErrInvalidArgument)
	}
	if s.cache.f32 != b.s.cache.f32 || s.cache.q8 != b.s.cache.q8 {
		return fmt.Errorf("engine: %s: %w: the session's KV cache type differs from the batcher's", what, ErrInvalidArgument)
	}
	if s.cancelled() {
		return fmt.Errorf("engine: %s: %w", what, ErrCancelled)
	}
	if s.pos+n > s.nCtx {
		return fmt.Errorf("engine: %s: %w: %d positions used + %d tokens > context %d", what, ErrContextFull, s.pos, n, s.nCtx)
	}
	if err := b.m.numerics.CheckPositions(s.pos + n); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	if err := s.cache.ensure(s.pos+n, s.pos); err != nil {
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	s.fitScratch()
	return nil
}

// run is the forward pass of the laid-out step, with eval's recovery of
// panics and memory faults.
func (b *Batcher) run(total, nOut int) (err error) {
	s := b.s
	ms := &b.ms
	if ms.maxCap > ms.scratchAt {
		// Attention scratch for the largest cache in the step.
		for i := range s.scores {
			s.scores[i], s.w16[i] = s.attnScratchFor(ms.maxCap)
		}
		ms.scratchAt = ms.maxCap
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		s.multi = nil
		if r := recover(); r != nil {
			err = panicError("engine: batch step", r)
		}
	}()
	s.multi = ms
	var out []float32
	if nOut > 0 {
		out = b.logits[:nOut*b.m.output.Rows]
	}
	if err := s.forward(b.tokens[:total], out, 0); err != nil {
		if pe := (*pool.PanicError)(nil); errors.As(err, &pe) {
			return panicError("engine: batch step", pe)
		}
		return fmt.Errorf("engine: batch step: %w", err)
	}
	return nil
}

// Params are the parameters the session was made with, NCtx resolved (a
// batcher for it takes the same).
func (s *Session) Params() SessionParams { return s.params }
