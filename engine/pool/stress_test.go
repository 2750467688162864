package pool

import (
	"math/rand"
	"runtime"
	"testing"
	"time"
)

// TestPoolStressWakeups hammers the spin/park hand-offs with tasks and
// pauses of random lengths, so workers and the caller park and wake in
// every order. A longer run of it found two wake-up races (a stale
// completion signal and a stale worker wake-up); a regression hangs.
func TestPoolStressWakeups(t *testing.T) {
	p := New(2)
	defer p.Close()
	done := make(chan struct{})
	var runs, shares int
	go func() {
		defer close(done)
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 20000; i++ {
			r := rng.Intn(100)
			pause := time.Duration(rng.Intn(200)) * time.Microsecond
			count := [2]int{}
			if err := p.Run(func(i, n int) {
				count[i]++
				switch {
				case r < 3:
					time.Sleep(pause)
				case r < 10:
					runtime.Gosched()
				}
			}); err != nil {
				t.Error(err)
				return
			}
			runs++
			shares += count[0] + count[1]
			if r == 50 {
				time.Sleep(10 * pause)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("pool hung after %d runs\n%s", runs, buf[:n])
	}
	if shares != 2*runs {
		t.Errorf("%d runs executed %d shares, want %d", runs, shares, 2*runs)
	}
}
