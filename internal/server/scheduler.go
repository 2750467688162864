package server

import (
	"context"
	"net/http"
	"sync"

	"github.com/moonlm/moonlm/engine"
)

// job is one sequence waiting for or running on a slot.
type job struct {
	ctx context.Context
	seq Sequence
	// done is called once with the result when the sequence ends, is
	// cancelled while queued, or the scheduler closes.
	done func(res engine.GenerateResult, err error)

	queued   bool // in the scheduler's queue (under scheduler.mu)
	stopWait func() bool
}

// scheduler hands queued jobs to a Decoder's slots: one goroutine per slot
// takes the oldest waiting job and runs it. The queue is bounded: a
// request whose sequences do not all fit is refused whole.
type scheduler struct {
	dec      Decoder
	met      *metrics
	maxQueue int

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*job
	closed bool
	wg     sync.WaitGroup
}

func newScheduler(dec Decoder, maxQueue int, met *metrics) *scheduler {
	s := &scheduler{dec: dec, met: met, maxQueue: maxQueue}
	s.cond = sync.NewCond(&s.mu)
	for slot := range dec.Slots() {
		s.wg.Add(1)
		go s.work(slot)
	}
	return s
}

// submit queues jobs, all or none: a full queue is a 503 with Retry-After.
// A job whose context ends while it waits leaves the queue at once.
func (s *scheduler) submit(jobs []*job) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return serverError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
	if len(s.queue)+len(jobs) > s.maxQueue {
		e := serverError(http.StatusServiceUnavailable, "queue_full",
			"the server's queue is full (%d waiting sequences); retry later", len(s.queue))
		e.RetryAfter = 1
		return e
	}
	for _, j := range jobs {
		j.queued = true
		s.queue = append(s.queue, j)
		j.stopWait = context.AfterFunc(j.ctx, func() { s.dequeue(j) })
	}
	s.met.queueDepth.Store(int64(len(s.queue)))
	for range jobs {
		s.cond.Signal()
	}
	return nil
}

// dequeue drops a job whose context ended while it waited.
func (s *scheduler) dequeue(j *job) {
	s.mu.Lock()
	if !j.queued {
		s.mu.Unlock()
		return
	}
	j.queued = false
	for i, q := range s.queue {
		if q == j {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	s.met.queueDepth.Store(int64(len(s.queue)))
	s.mu.Unlock()
	j.done(engine.GenerateResult{Finish: engine.FinishCancelled, LastToken: -1}, nil)
}

// next waits for the oldest job; nil once the scheduler is closed and the
// queue empty.
func (s *scheduler) next() *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) == 0 && !s.closed {
		s.cond.Wait()
	}
	if len(s.queue) == 0 {
		return nil
	}
	j := s.queue[0]
	s.queue[0] = nil
	s.queue = s.queue[1:]
	j.queued = false
	s.met.queueDepth.Store(int64(len(s.queue)))
	return j
}

func (s *scheduler) work(slot int) {
	defer s.wg.Done()
	for {
		j := s.next()
		if j == nil {
			return
		}
		j.stopWait()
		if j.ctx.Err() != nil {
			j.done(engine.GenerateResult{Finish: engine.FinishCancelled, LastToken: -1}, nil)
			continue
		}
		s.met.active.Add(1)
		res, err := s.dec.Run(j.ctx, slot, &j.seq)
		s.met.active.Add(-1)
		j.done(res, err)
	}
}

// close stops taking jobs, lets the slots finish the queued and running
// ones, and waits for them.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}
