// Package pool is a fixed-size worker pool with microsecond dispatch.
//
// A forward pass hands work to threads hundreds of times per token, so a
// channel round trip per operation would dominate on small models. Run
// publishes a task by bumping a generation counter that idle workers spin on
// for a short while before parking; completion is an atomic countdown the
// caller spins on. Channels are only used to park and wake sleeping workers.
//
// Workers run with debug.SetPanicOnFault(true) and recover panics: a fault
// on a truncated memory-mapped file, or a bug in a kernel, comes back from
// Run as a *PanicError instead of crashing the process.
package pool

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// ErrPanic classifies errors returned by Run when a task panicked.
var ErrPanic = errors.New("pool: task panicked")

// PanicError describes a panic recovered in a task.
type PanicError struct {
	Value any    // the recovered value
	Fault bool   // a memory fault (for example SIGBUS on a truncated mapping)
	Stack []byte // the stack of the panicking goroutine
}

func (e *PanicError) Error() string {
	if e.Fault {
		return fmt.Sprintf("memory fault in worker: %v", e.Value)
	}
	return fmt.Sprintf("panic in worker: %v", e.Value)
}

// Unwrap lets errors.Is(err, ErrPanic) match.
func (e *PanicError) Unwrap() error { return ErrPanic }

// Task is work split across the pool: fn(i, n) is called once for each
// i in [0, n) where n is the number of threads, concurrently.
type Task func(i, n int)

// spin is how many times a waiting goroutine polls before it parks. Polls
// are cheap atomic loads with an occasional yield, so this is on the order
// of tens of microseconds.
const spin = 1 << 14

type worker struct {
	sleeping atomic.Int32
	// claimed is the last generation whose share i was taken, by worker i
	// or by the caller stealing it (see Run).
	claimed atomic.Uint64
	wake    chan struct{}
	_       [40]byte // keep workers' hot fields on separate cache lines
}

// Pool runs tasks on a fixed number of threads: the caller of Run and
// n-1 worker goroutines. Run calls are serialized, so one pool can be shared
// by several sessions.
type Pool struct {
	mu       sync.Mutex // serializes Run
	n        int
	workers  []worker
	gen      atomic.Uint64
	pending  atomic.Int32
	task     Task
	failure  atomic.Pointer[PanicError]
	waiting  atomic.Uint64 // generation the caller parked waiting for, 0 = none
	done     chan struct{}
	quit     atomic.Bool
	closed   bool
	wg       sync.WaitGroup
	closeMu  sync.Mutex
	panicked atomic.Bool
	// debugPanic makes the next task's share 1 (normally run by worker
	// goroutine 1) panic once (MOONLM_DEBUG_PANIC=worker), so tests of the
	// C ABI can check that a panic in a worker's share reaches the caller
	// as an error.
	debugPanic atomic.Bool
}

// debugPanicEnv is the MOONLM_DEBUG_PANIC value that arms debugPanic.
const debugPanicEnv = "worker"

// errDebugPanic is the value a debugPanic task panics with.
const errDebugPanic = "MOONLM_DEBUG_PANIC=worker requested a panic on a pool worker"

// MaxThreads is the most threads a pool runs. Callers refuse larger
// counts (each thread costs a goroutine and its state); New caps n at it so
// that no count can make it allocate without bound.
const MaxThreads = 512

// New starts a pool of n threads; n <= 0 means runtime.NumCPU(), and n is
// capped at MaxThreads.
func New(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	n = min(n, MaxThreads)
	p := &Pool{n: n, workers: make([]worker, n), done: make(chan struct{}, 1)}
	p.debugPanic.Store(os.Getenv("MOONLM_DEBUG_PANIC") == debugPanicEnv)
	for i := 1; i < n; i++ {
		p.workers[i].wake = make(chan struct{}, 1)
		p.wg.Add(1)
		go p.loop(i)
	}
	return p
}

// Threads is the number of threads tasks are split over.
func (p *Pool) Threads() int { return p.n }

// Run calls t(i, n) for every share i in [0, n) and waits for all of them.
// If any call panics, Run still waits for the others and returns a
// *PanicError.
//
// The caller runs share 0, then takes every worker share that no worker
// has claimed yet: on a machine shared with other processes a worker may
// not be scheduled for milliseconds, and waiting for it at every one of a
// forward pass's hundreds of barriers made two threads slower than one.
// Each share runs exactly once, with its own index, so per-share scratch
// stays private.
func (p *Pool) Run(t Task) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("pool: run after close")
	}
	if p.n == 1 {
		return p.call(t, 0)
	}
	p.task = t
	p.failure.Store(nil)
	p.pending.Store(int32(p.n - 1))
	gen := p.gen.Add(1)
	for i := 1; i < p.n; i++ {
		w := &p.workers[i]
		if w.sleeping.CompareAndSwap(1, 0) {
			w.wake <- struct{}{}
		}
	}
	err := p.call(t, 0)
	for i := 1; i < p.n; i++ {
		if p.claim(i, gen) {
			p.runShare(i)
			p.pending.Add(-1) // the caller is not waiting: no wake-up
		}
	}
	p.waitDone(gen)
	p.task = nil
	if err != nil {
		return err
	}
	if f := p.failure.Load(); f != nil {
		return f
	}
	return nil
}

// waitDone spins, then parks, until every worker finished generation gen.
// The parked flag holds the generation so that the last worker of an
// earlier generation, still on its way out of finish, cannot wake this one.
func (p *Pool) waitDone(gen uint64) {
	for k := 0; k < spin; k++ {
		if p.pending.Load() == 0 {
			return
		}
		if k&255 == 255 {
			runtime.Gosched()
		}
	}
	p.waiting.Store(gen)
	if p.pending.Load() == 0 {
		if p.waiting.CompareAndSwap(gen, 0) {
			return
		}
		<-p.done // a worker claimed the wake-up: consume it
		return
	}
	<-p.done
}

// claim takes share i of generation gen for the calling goroutine; false
// means it was already taken (by worker i or by the caller). A worker that
// saw gen late cannot claim it after Run returned: share i of gen is then
// claimed.
func (p *Pool) claim(i int, gen uint64) bool {
	c := &p.workers[i].claimed
	old := c.Load()
	return old < gen && c.CompareAndSwap(old, gen)
}

// runShare runs share i (i >= 1) of the current task, recording a panic.
// The debug hook makes share 1 panic whoever runs it.
func (p *Pool) runShare(i int) {
	t := p.task
	if i == 1 && p.debugPanic.Load() && p.debugPanic.Swap(false) {
		t = func(int, int) { panic(errDebugPanic) }
	}
	if err := p.call(t, i); err != nil {
		var pe *PanicError
		if errors.As(err, &pe) {
			p.failure.CompareAndSwap(nil, pe)
		}
	}
}

// finish is called by a worker after its share of generation gen.
func (p *Pool) finish(gen uint64) {
	if p.pending.Add(-1) == 0 {
		if p.waiting.CompareAndSwap(gen, 0) {
			p.done <- struct{}{}
		}
	}
}

// call runs one share of a task, turning a panic or a memory fault into an
// error. The fault setting is per goroutine, so it is set here for the
// caller's own share too.
func (p *Pool) call(t Task, i int) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			pe := &PanicError{Value: r, Stack: debug.Stack()}
			if re, ok := r.(runtime.Error); ok {
				if _, ok := re.(interface{ Addr() uintptr }); ok {
					pe.Fault = true
				}
			}
			err = pe
		}
	}()
	t(i, p.n)
	return nil
}

func (p *Pool) loop(i int) {
	defer p.wg.Done()
	debug.SetPanicOnFault(true)
	w := &p.workers[i]
	var seen uint64 // generation 0 is "no task yet", even if Run already bumped it
	for {
		// Wait for a new generation: spin, then park.
		g := p.gen.Load()
		for k := 0; g == seen && k < spin; k++ {
			if k&255 == 255 {
				runtime.Gosched()
			}
			g = p.gen.Load()
		}
		// Park. A wake-up can be stale: Run may claim it after this worker
		// already saw the new generation, ran it and parked again, so the
		// generation is checked again after every wake-up.
		for g == seen {
			w.sleeping.Store(1)
			if g = p.gen.Load(); g != seen {
				if !w.sleeping.CompareAndSwap(1, 0) {
					<-w.wake // Run claimed the wake-up: consume it
				}
				break
			}
			<-w.wake
			g = p.gen.Load()
		}
		seen = g
		if p.quit.Load() {
			return
		}
		if !p.claim(i, seen) {
			continue // the caller ran this share
		}
		p.runShare(i)
		p.finish(seen)
	}
}

// Close stops the workers. It waits for a running task to finish. Run after
// Close returns an error.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.quit.Store(true)
	p.gen.Add(1)
	for i := 1; i < p.n; i++ {
		w := &p.workers[i]
		if w.sleeping.CompareAndSwap(1, 0) {
			w.wake <- struct{}{}
		}
	}
	p.wg.Wait()
}

// Split returns the share [lo, hi) of n items for thread i of nt, in chunks
// that are multiples of align (except the last), so threads touch whole
// cache lines or quant blocks.
func Split(n, i, nt, align int) (lo, hi int) {
	if align < 1 {
		align = 1
	}
	chunks := (n + align - 1) / align
	per := chunks / nt
	rem := chunks % nt
	c0 := i*per + min(i, rem)
	c1 := c0 + per
	if i < rem {
		c1++
	}
	lo, hi = c0*align, c1*align
	if lo > n {
		lo = n
	}
	if hi > n {
		hi = n
	}
	return lo, hi
}
