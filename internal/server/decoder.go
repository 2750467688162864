package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/moonlm/moonlm/engine"
)

// Sequence is one generation: a whole prompt, how to generate, and where
// the text goes.
type Sequence struct {
	// Prompt is the whole prompt. A Decoder that keeps a slot's KV cache
	// between sequences may evaluate only what the cache lacks (prefix
	// reuse); the result's PromptTokens then counts what it evaluated.
	Prompt []int32
	Params engine.GenerateParams
	// Emit receives the text as engine.PieceFunc describes; false stops
	// the sequence.
	Emit engine.PieceFunc
	// Reused is set by the Decoder: the prompt tokens it did not evaluate
	// because the slot's KV cache held them.
	Reused int
}

// Decoder runs sequences on a fixed number of slots. The scheduler calls
// Run from one goroutine per slot, so Run calls on different slots overlap
// and calls on one slot never do.
//
// The decode step is this interface's business: sessionDecoder runs each
// slot's sequence with its own engine.Session.Generate, whose evaluations
// go, with more than one slot, through a shared step loop (stepLoop) that
// advances every generating slot in one batched forward pass. Nothing
// above this interface changes.
// Prefix reuse belongs here too: Run gets the whole prompt and chooses
// what to evaluate.
type Decoder interface {
	// Slots is how many sequences run at once.
	Slots() int
	// Run generates seq on slot and returns when it ends. When ctx is
	// done the sequence must stop at once (during the prefill too) and Run
	// return with engine.FinishCancelled.
	Run(ctx context.Context, slot int, seq *Sequence) (engine.GenerateResult, error)
	// KVUsage is the KV cache positions in use and the capacity, summed
	// over the slots (for /metrics; safe from any goroutine).
	KVUsage() (used, capacity int64)
	// Close releases the slots; no Run may be running.
	Close()
}

// sessionDecoder is the Decoder on one engine.Session per slot. With more
// than one slot the slots' generations evaluate their tokens through one
// stepLoop, which advances them all in shared batched forward steps.
type sessionDecoder struct {
	m      *engine.Model
	slots  []*sessionSlot
	nCtx   int
	reuse  bool
	closed bool
	loop   *stepLoop // nil: each slot evaluates on its own
}

// sessionSlot is one slot's session and what its KV cache holds.
type sessionSlot struct {
	s      *engine.Session
	req    *stepReq     // the slot's evaluations through the step loop (nil: none)
	cached []int32      // the tokens in the session's KV cache, in order
	used   atomic.Int64 // positions in use, for KVUsage

	mu         sync.Mutex
	current    *Sequence // the sequence running, nil between sequences
	cancelSent bool      // Session.Cancel was called for current
}

// newSessionDecoder makes slots sessions of nCtx positions each. reuse
// keeps each slot's KV cache between sequences and evaluates only the part
// of a prompt after the longest prefix it shares with the cache.
func newSessionDecoder(m *engine.Model, slots int, sp engine.SessionParams, reuse bool) (*sessionDecoder, error) {
	if slots < 1 {
		return nil, fmt.Errorf("server: %d slots: want at least one", slots)
	}
	d := &sessionDecoder{m: m, reuse: reuse}
	for i := range slots {
		s, err := m.NewSession(sp)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("server: slot %d: %w", i, err)
		}
		d.slots = append(d.slots, &sessionSlot{s: s})
		d.nCtx = s.NCtx()
	}
	if slots > 1 {
		b, err := m.NewBatcher(sp)
		switch {
		case errors.Is(err, engine.ErrUnsupported):
			// The slots decode side by side, each on its own session.
		case err != nil:
			d.Close()
			return nil, fmt.Errorf("server: batched steps: %w", err)
		default:
			d.loop = newStepLoop(b, slots)
			for _, sl := range d.slots {
				sl.req = d.loop.newReq()
			}
		}
	}
	return d, nil
}

// Steps is the number of forward steps the slots shared (0 without a step
// loop).
func (d *sessionDecoder) Steps() int64 {
	if d.loop == nil {
		return 0
	}
	return d.loop.steps.Load()
}

func (d *sessionDecoder) Slots() int { return len(d.slots) }

func (d *sessionDecoder) KVUsage() (used, capacity int64) {
	for _, sl := range d.slots {
		used += sl.used.Load()
	}
	return used, int64(len(d.slots)) * int64(d.nCtx)
}

func (d *sessionDecoder) Close() {
	if d.closed {
		return
	}
	d.closed = true
	if d.loop != nil {
		d.loop.close()
	}
	for _, sl := range d.slots {
		sl.s.Close()
	}
}

func (d *sessionDecoder) Run(ctx context.Context, slot int, seq *Sequence) (engine.GenerateResult, error) {
	if slot < 0 || slot >= len(d.slots) {
		return engine.GenerateResult{LastToken: -1}, fmt.Errorf("server: slot %d of %d", slot, len(d.slots))
	}
	sl := d.slots[slot]
	prompt := seq.Prompt
	keep := 0
	if d.reuse {
		// Keep at least one prompt token to evaluate: the first generated
		// token needs its logits.
		for keep < len(sl.cached) && keep < len(prompt)-1 && sl.cached[keep] == prompt[keep] {
			keep++
		}
	}
	if err := sl.s.Rewind(keep); err != nil {
		sl.reset()
		return engine.GenerateResult{LastToken: -1}, err
	}
	sl.cached = append(sl.cached[:keep], prompt[keep:]...)
	base := int64(len(sl.cached))
	sl.used.Store(int64(keep))

	sl.mu.Lock()
	sl.current, sl.cancelSent = seq, false
	sl.mu.Unlock()
	// Cancel the session when ctx ends, also in the middle of the prefill.
	stop := context.AfterFunc(ctx, func() {
		sl.mu.Lock()
		if sl.current == seq {
			sl.s.Cancel()
			sl.cancelSent = true
		}
		sl.mu.Unlock()
	})
	n := int64(0)
	params := seq.Params
	if d.loop != nil {
		params.Stepper = sl.req
		d.loop.enter()
	}
	res, err := sl.s.Generate(prompt[keep:], params, func(text []byte, tok int32) bool {
		if tok >= 0 {
			n++
			sl.used.Store(base + n)
		}
		if ctx.Err() != nil {
			return false
		}
		return seq.Emit(text, tok)
	})
	if d.loop != nil {
		d.loop.leave()
	}
	stop()
	sl.mu.Lock()
	sl.current = nil
	sent := sl.cancelSent
	sl.mu.Unlock()
	pending := sent && !errors.Is(err, engine.ErrCancelled)
	if errors.Is(err, engine.ErrCancelled) {
		res.Finish, err = engine.FinishCancelled, nil
	}
	// Keep the cache bookkeeping exact whatever happened.
	if res.PromptTokens == 0 {
		sl.cached = sl.cached[:keep]
	}
	gen := res.Generated
	if len(gen) > 0 && !res.LastTokenCached {
		gen = gen[:len(gen)-1]
	}
	sl.cached = append(sl.cached, gen...)
	if len(sl.cached) != sl.s.Pos() {
		sl.reset()
	}
	sl.used.Store(int64(sl.s.Pos()))
	if pending {
		// The cancel request arrived after Generate's last check: it is
		// still pending and would stop the slot's next sequence.
		sl.consumeCancel()
	}
	if !d.reuse {
		sl.reset()
	}
	if res.PromptTokens > 0 {
		res.PromptTokens = len(prompt)
		seq.Reused = keep
	}
	return res, err
}

// consumeCancel clears a pending Session.Cancel and empties the cache: a
// one-token prefill on the empty cache either returns ErrCancelled (the
// request consumed) or runs and is dropped.
func (sl *sessionSlot) consumeCancel() {
	bos := sl.s.Model().Info().BOS
	if bos < 0 {
		bos = 0
	}
	_ = sl.s.Rewind(0)
	_ = sl.s.Prefill([]int32{bos}, nil)
	sl.reset()
}

// reset empties the slot's KV cache.
func (sl *sessionSlot) reset() {
	sl.cached = sl.cached[:0]
	_ = sl.s.Rewind(0)
	sl.used.Store(0)
}
