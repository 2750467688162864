//go:build !linux

package grammar

import "time"

// threadCPU is not available here: the benchmark reports wall time only.
func threadCPU() time.Duration { return 0 }
