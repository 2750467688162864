package abitest

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// While one thread is inside a call on a session (held in a generate
// callback), other threads get BUSY on that session and its sampler, cancel
// still works, and other sessions of the model are unaffected.
func TestBusyConcurrent(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 0, 0)
	g := greedySampler(t, l)
	inside := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	rec := &genRecorder{hook: func(int32) bool {
		once.Do(func() { close(inside); <-release })
		return false
	}}
	done := make(chan int32)
	go func() {
		prompt := []int32{info.BOS}
		var n uintptr
		done <- l.Generate(s, g, &prompt[0], 1, 4, callback(), register(rec), &n)
	}()
	<-inside
	runtime.LockOSThread()
	requireStatus(t, l, Busy, l.Decode(s, 5, nil, 0), "decode on a session in use")
	assert.Contains(t, l.LastError(), "in use by another thread")
	var pos uintptr
	requireStatus(t, l, Busy, l.Position(s, &pos), "position of a session in use")
	requireStatus(t, l, Busy, l.Rewind(s, 0), "rewind of a session in use")
	requireStatus(t, l, Busy, l.SamplerAccept(g, 5), "accept on a sampler in use")
	runtime.UnlockOSThread()

	other := newSession(t, l, m, 0, 0)
	toks := []int32{info.BOS, 403}
	requireStatus(t, l, OK, l.Prefill(other, &toks[0], 2, nil, 0), "another session of the model")
	close(release)
	requireStatus(t, l, OK, <-done, "the generate that held the session")
	requireStatus(t, l, OK, l.Decode(s, 5, nil, 0), "the session is free again")

	// Freeing a session in use cancels the running call; the handle is dead
	// at once, the memory goes when the call returns.
	inside2 := make(chan struct{})
	release2 := make(chan struct{})
	var once2 sync.Once
	rec2 := &genRecorder{hook: func(int32) bool {
		once2.Do(func() { close(inside2); <-release2 })
		return false
	}}
	go func() {
		prompt := []int32{info.BOS}
		var n uintptr
		done <- l.Generate(s, g, &prompt[0], 1, 50, callback(), register(rec2), &n)
	}()
	<-inside2
	requireStatus(t, l, OK, l.SessionFree(s), "free a session in use")
	var pos2 uintptr
	requireStatus(t, l, InvalidArg, l.Position(s, &pos2), "the freed handle")
	close(release2)
	requireStatus(t, l, Cancelled, <-done, "the call running during the free")
	assert.Len(t, rec2.tokens, 1, "generation stopped after the free")
}

// Cancellation: from another thread during a run, before a call, and from
// inside a generate callback.
func TestCancelConcurrent(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 0, 0)
	toks := []int32{info.BOS, 403, 407, 261, 378}

	// Pending cancel: the next call is cancelled, with no effect, and only it.
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], 5, nil, 0), "prefill")
	requireStatus(t, l, OK, l.Cancel(s), "cancel")
	requireStatus(t, l, Cancelled, l.Decode(s, 403, nil, 0), "decode after cancel")
	assert.Equal(t, uintptr(5), position(t, l, s), "cancelled call left no trace")
	requireStatus(t, l, OK, l.Decode(s, 403, nil, 0), "the request was consumed")

	// From another thread while decoding in a loop.
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
	result := make(chan int32)
	started := make(chan struct{})
	go func() {
		requireStatus(t, l, OK, l.Prefill(s, &toks[0], 1, nil, 0), "prefill BOS")
		close(started)
		for {
			var pos uintptr
			if st := l.Position(s, &pos); st != OK {
				result <- st
				return
			}
			if pos > 400 {
				if st := l.Rewind(s, 1); st != OK {
					result <- st
					return
				}
			}
			if st := l.Decode(s, 403, nil, 0); st != OK {
				result <- st
				return
			}
		}
	}()
	<-started
	time.Sleep(20 * time.Millisecond)
	requireStatus(t, l, OK, l.Cancel(s), "cancel from another thread")
	select {
	case st := <-result:
		requireStatus(t, l, Cancelled, st, "the decode loop's last call")
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled session did not stop within 10 s")
	}
	requireStatus(t, l, OK, l.Decode(s, 403, nil, 0), "decode after the cancelled one")

	// From inside a generate callback: generation stops with CANCELLED.
	g := greedySampler(t, l)
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
	rec := &genRecorder{}
	rec.hook = func(int32) bool {
		if len(rec.tokens) == 3 {
			l.Cancel(s)
		}
		return false
	}
	var n uintptr
	prompt := []int32{info.BOS}
	requireStatus(t, l, Cancelled, l.Generate(s, g, &prompt[0], 1, 50, callback(), register(rec), &n), "generate cancelled by its callback")
	assert.Equal(t, uintptr(2), n, "two tokens fully generated before the third's decode was cancelled")
	assert.Equal(t, 1+n, position(t, l, s))
}

// Sessions of one model decode in parallel and agree with a lone run.
func TestParallelSessionsConcurrent(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	run := func() ([]int32, int32) {
		var p SessionParams
		l.SessionParamsDefault(&p)
		p.NThreads = 1
		var s uintptr
		if st := l.SessionNew(m, &p, &s); st != OK {
			return nil, st
		}
		defer l.SessionFree(s)
		logits := make([]float32, info.NVocab)
		tok := info.BOS
		var out []int32
		for i := 0; i < 48; i++ {
			if st := l.Decode(s, tok, &logits[0], uintptr(len(logits))); st != OK {
				return nil, st
			}
			tok = argmax(logits)
			out = append(out, tok)
		}
		return out, OK
	}
	want, st := run()
	requireStatus(t, l, OK, st, "lone run")
	const workers = 4
	var wg sync.WaitGroup
	results := make([][]int32, workers)
	stats := make([]int32, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[w], stats[w] = run()
		}()
	}
	wg.Wait()
	for w := 0; w < workers; w++ {
		requireStatus(t, l, OK, stats[w], "worker "+strconv.Itoa(w))
		assert.Equal(t, want, results[w], "worker %d", w)
	}
}

// Many threads hammering handles: opening, freeing, and misusing them at
// once must neither crash nor confuse handles.
func TestHandlesConcurrent(t *testing.T) {
	l := lib(t)
	path := shareddata.Path(t, stories)
	_ = openModel(t, l, stories)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				var m, s uintptr
				if st := l.ModelOpen(path, nil, &m); st != OK {
					errs <- "open: " + l.StatusString(st)
					return
				}
				if st := l.SessionNew(m, nil, &s); st != OK {
					errs <- "session: " + l.StatusString(st)
					return
				}
				// Free the model first, the session after: both orders are fine.
				if st := l.ModelFree(m); st != OK {
					errs <- "free model: " + l.StatusString(st)
				}
				if st := l.ModelFree(m); st != InvalidArg {
					errs <- "double free model: " + l.StatusString(st)
				}
				if st := l.SessionFree(s); st != OK {
					errs <- "free session: " + l.StatusString(st)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// rss reads this process's resident set size in bytes.
func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("cannot read /proc/self/statm: %v", err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// 10,000 open/free cycles (with a session and a decode in some) leave
// resident memory and open files flat.
func TestOpenFreeNoLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 open/free cycles: skipped in -short mode")
	}
	l := lib(t)
	path := shareddata.Path(t, stories)
	_ = openModel(t, l, stories)
	cycle := func(i int) {
		var m uintptr
		requireStatus(t, l, OK, l.ModelOpen(path, nil, &m), "open")
		if i%100 == 0 {
			var s uintptr
			requireStatus(t, l, OK, l.SessionNew(m, nil, &s), "session")
			requireStatus(t, l, OK, l.Decode(s, 1, nil, 0), "decode")
			requireStatus(t, l, OK, l.SessionFree(s), "free session")
		}
		requireStatus(t, l, OK, l.ModelFree(m), "free")
	}
	for i := 0; i < 500; i++ { // warm up: heaps and caches reach their steady size
		cycle(i)
	}
	runtime.GC()
	before, fdsBefore := rss(t), openFDs(t)
	for i := 0; i < 10000; i++ {
		cycle(i)
	}
	runtime.GC()
	after, fdsAfter := rss(t), openFDs(t)
	t.Logf("RSS %.1f MiB -> %.1f MiB over 10,000 cycles", float64(before)/(1<<20), float64(after)/(1<<20))
	assert.Less(t, after-before, int64(16<<20), "resident memory grew by %d bytes", after-before)
	assert.LessOrEqual(t, fdsAfter, fdsBefore, "open file descriptors")
}
