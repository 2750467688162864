//go:build unix

package tokenizer

import (
	"syscall"
	"time"
)

const haveCPUTime = true

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
