//go:build !unix

package tokenizer

import "time"

const haveCPUTime = false

// cpuTime is unavailable here; build-speed tests rely on the wall clock.
func cpuTime() time.Duration { return 0 }
