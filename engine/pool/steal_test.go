package pool

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goroutineID parses the current goroutine's number from its stack header.
func goroutineID() int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// TestRunStealsUnstartedShares: with one OS thread and the worker parked,
// the worker cannot start before the caller finished share 0, so the caller
// runs share 1 itself instead of waiting for the worker to be scheduled.
// Every share still runs exactly once.
func TestRunStealsUnstartedShares(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	p := New(2)
	defer p.Close()
	stolen := 0
	for range 20 {
		time.Sleep(2 * time.Millisecond) // let the worker spin out and park
		var who [2]int
		var runs [2]int
		require.NoError(t, p.Run(func(i, n int) {
			who[i] = goroutineID()
			runs[i]++
		}))
		require.Equal(t, [2]int{1, 1}, runs)
		if who[0] == who[1] {
			stolen++
		}
	}
	require.Positive(t, stolen, "the caller never ran a parked worker's share")
}
