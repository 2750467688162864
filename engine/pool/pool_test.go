package pool

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPoolRunsEveryShare(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		p := New(n)
		var hits [8]atomic.Int32
		for rep := 0; rep < 1000; rep++ {
			require.NoError(t, p.Run(func(i, nt int) {
				assert.Equal(t, n, nt)
				hits[i].Add(1)
			}))
		}
		for i := 0; i < n; i++ {
			assert.EqualValues(t, 1000, hits[i].Load(), "thread %d of %d", i, n)
		}
		p.Close()
	}
}

func TestPoolSplitCoversRange(t *testing.T) {
	for _, n := range []int{0, 1, 7, 32, 100, 1000} {
		for _, nt := range []int{1, 2, 3, 8} {
			for _, align := range []int{1, 4, 32} {
				next := 0
				for i := 0; i < nt; i++ {
					lo, hi := Split(n, i, nt, align)
					require.Equal(t, next, lo, "n=%d nt=%d align=%d i=%d", n, nt, align, i)
					require.LessOrEqual(t, lo, hi)
					if hi < n {
						require.Zero(t, hi%align)
					}
					next = hi
				}
				require.Equal(t, n, next)
			}
		}
	}
}

func TestPoolPanicBecomesError(t *testing.T) {
	p := New(3)
	defer p.Close()
	for _, who := range []int{0, 1, 2} {
		err := p.Run(func(i, n int) {
			if i == who {
				panic("boom")
			}
		})
		require.Error(t, err)
		assert.True(t, errors.Is(err, ErrPanic))
		var pe *PanicError
		require.True(t, errors.As(err, &pe))
		assert.Equal(t, "boom", pe.Value)
		assert.False(t, pe.Fault)
	}
	// The pool still works after a panic.
	var c atomic.Int32
	require.NoError(t, p.Run(func(i, n int) { c.Add(1) }))
	assert.EqualValues(t, 3, c.Load())
}

// TestPoolConcurrentRuns checks that Run calls from several goroutines are
// serialized and each completes with all its shares (run under -race).
func TestPoolConcurrentRuns(t *testing.T) {
	p := New(2)
	defer p.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]int, 64)
			for rep := 0; rep < 200; rep++ {
				require.NoError(t, p.Run(func(i, n int) {
					lo, hi := Split(len(buf), i, n, 1)
					for k := lo; k < hi; k++ {
						buf[k]++
					}
				}))
			}
			for _, v := range buf {
				assert.Equal(t, 200, v)
			}
		}()
	}
	wg.Wait()
}

func TestPoolRunAllocatesNothing(t *testing.T) {
	p := New(2)
	defer p.Close()
	var sink atomic.Int64
	task := Task(func(i, n int) { sink.Add(int64(i)) })
	allocs := testing.AllocsPerRun(200, func() {
		if err := p.Run(task); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestPoolRunAfterClose(t *testing.T) {
	p := New(2)
	p.Close()
	p.Close()
	assert.Error(t, p.Run(func(i, n int) {}))
}

func BenchmarkPoolRun(b *testing.B) {
	p := New(0)
	defer p.Close()
	task := Task(func(i, n int) {})
	for b.Loop() {
		_ = p.Run(task)
	}
}

// BenchmarkPoolRunOneThread is what a one-thread model pays per parallel
// region against calling the task directly (BenchmarkDirectCall): Run of a
// one-thread pool calls the task inline, under the pool's mutex and fault
// guard.
func BenchmarkPoolRunOneThread(b *testing.B) {
	p := New(1)
	defer p.Close()
	task := Task(func(i, n int) {})
	for b.Loop() {
		_ = p.Run(task)
	}
}

func BenchmarkDirectCall(b *testing.B) {
	task := Task(func(i, n int) {})
	for b.Loop() {
		task(0, 1)
	}
}
