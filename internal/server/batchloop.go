package server

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/moonlm/moonlm/engine"
)

// stepLoop advances the slots' generations in shared forward steps: each
// slot's Generate hands its evaluations to the loop (as its
// engine.Stepper), and the loop runs one engine.Batcher step with every
// waiting slot's next token, and a chunk of each waiting prompt, so the
// weights stream once per step for all the slots. A step waits until every
// generating slot has asked (they ask within microseconds of the last step:
// sampling and streaming a token is all they do in between), or at most
// gather, so that a slot busy elsewhere does not hold the others.
type stepLoop struct {
	b      *engine.Batcher
	gather time.Duration
	reqs   chan *stepReq
	wake   chan struct{}
	quit   chan struct{}
	done   chan struct{}
	// active counts the slots inside Generate (they will ask again).
	active atomic.Int64
	// steps counts the forward steps run (tests and metrics).
	steps atomic.Int64

	// the loop goroutine's state
	pending []*stepReq
	entries []engine.BatchEntry
	inStep  []*stepReq
}

// stepReq is one slot's evaluation: tokens to feed (fed so far) and where
// the last one's logits go. Each slot owns one, reused for every call.
type stepReq struct {
	loop   *stepLoop
	s      *engine.Session
	toks   []int32
	logits []float32
	fed    int
	err    error
	reply  chan struct{}
}

func newStepLoop(b *engine.Batcher, slots int) *stepLoop {
	l := &stepLoop{
		b: b, gather: 2 * time.Millisecond,
		reqs: make(chan *stepReq, slots), wake: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}),
		pending: make([]*stepReq, 0, slots),
		entries: make([]engine.BatchEntry, 0, slots),
		inStep:  make([]*stepReq, 0, slots),
	}
	go l.run()
	return l
}

// newReq makes a slot's request, for its Generate calls.
func (l *stepLoop) newReq() *stepReq { return &stepReq{loop: l, reply: make(chan struct{}, 1)} }

// Eval is engine.Stepper: it queues the evaluation and waits for the steps
// that run it.
func (r *stepReq) Eval(s *engine.Session, toks []int32, logits []float32) error {
	r.s, r.toks, r.logits, r.fed, r.err = s, toks, logits, 0, nil
	select {
	case r.loop.reqs <- r:
	case <-r.loop.quit:
		return fmt.Errorf("server: %w: the step loop is closed", engine.ErrCancelled)
	}
	<-r.reply
	return r.err
}

// enter and leave bracket a slot's Generate (the loop waits for entered
// slots to ask).
func (l *stepLoop) enter() { l.active.Add(1) }

func (l *stepLoop) leave() {
	l.active.Add(-1)
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *stepLoop) close() {
	close(l.quit)
	<-l.done
	l.b.Close()
}

func (l *stepLoop) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		// Wait for the first request, then for the other generating slots.
		if len(l.pending) == 0 {
			select {
			case r := <-l.reqs:
				l.pending = append(l.pending, r)
			case <-l.wake:
				continue
			case <-l.quit:
				return
			}
		}
		timer.Reset(l.gather)
	gather:
		for int64(len(l.pending)) < l.active.Load() {
			select {
			case r := <-l.reqs:
				l.pending = append(l.pending, r)
			case <-l.wake:
			case <-timer.C:
				break gather
			case <-l.quit:
				l.failPending(fmt.Errorf("server: %w: the step loop is closed", engine.ErrCancelled))
				return
			}
		}
		timer.Stop()
		l.step()
	}
}

// step runs one forward step over the pending requests: every decode
// token, then prompt chunks sharing the rest of the step's room, and
// replies to the requests it finished.
func (l *stepLoop) step() {
	room := l.b.MaxTokens()
	l.entries, l.inStep = l.entries[:0], l.inStep[:0]
	nPrompt := 0
	for _, r := range l.pending {
		if len(r.toks)-r.fed > 1 {
			nPrompt++
		}
	}
	for pass := range 2 {
		for _, r := range l.pending {
			left := len(r.toks) - r.fed
			if (pass == 0) != (left == 1) || room == 0 {
				continue
			}
			n := left
			if pass == 1 {
				n = min(left, max(1, room/nPrompt))
				nPrompt--
			}
			n = min(n, room)
			e := engine.BatchEntry{Session: r.s, Tokens: r.toks[r.fed : r.fed+n]}
			if r.fed+n == len(r.toks) {
				e.Logits = r.logits
			} else {
				e.Continues = true // one evaluation for a hybrid model's checkpoints
			}
			room -= n
			l.entries = append(l.entries, e)
			l.inStep = append(l.inStep, r)
		}
	}
	err := l.b.Step(l.entries)
	l.steps.Add(1)
	for k, r := range l.inStep {
		e := &l.entries[k]
		switch {
		case err != nil:
			r.err = err
		case e.Err != nil:
			r.err = e.Err
		default:
			r.fed += len(e.Tokens)
		}
	}
	clear(l.entries)
	// Reply to the finished and failed requests; keep the others.
	kept := l.pending[:0]
	for _, r := range l.pending {
		if r.err != nil || r.fed == len(r.toks) {
			r.reply <- struct{}{}
			continue
		}
		kept = append(kept, r)
	}
	clear(l.pending[len(kept):])
	l.pending = kept
}

func (l *stepLoop) failPending(err error) {
	for _, r := range l.pending {
		r.err = err
		r.reply <- struct{}{}
	}
	l.pending = l.pending[:0]
	for {
		select {
		case r := <-l.reqs:
			r.err = err
			r.reply <- struct{}{}
		default:
			return
		}
	}
}
