//go:build linux

package grammar

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time of the calling OS thread (the caller
// locks its goroutine to the thread), so timings on a busy machine count
// the work done, not the waits.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
