//go:build !unix

package packcache

import (
	"errors"
	"os"
)

// Without mmap support here the cache is off: Get misses and Put reports
// errors.ErrUnsupported.
const mmapSupported = false

func openNoFollow(path string) (*os.File, error) { return os.Open(path) }

func mapFile(*os.File, int64, bool) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmap([]byte) error { return nil }

func fileSize(uintptr) (int64, error) { return 0, errors.ErrUnsupported }

func readStart(*os.File, []byte) int { return 0 }
