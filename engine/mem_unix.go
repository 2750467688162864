//go:build unix

package engine

import (
	"os"

	"golang.org/x/sys/unix"
)

// The engine's memory and file-mapping calls, one place per platform: here
// with mmap; mem_other.go does without it (WebAssembly).

// openFlags are added to O_RDONLY when opening a model file: O_NONBLOCK so
// that a path swapped for a FIFO between stat and open does not block.
const openFlags = unix.O_NONBLOCK | unix.O_CLOEXEC

// anonMap returns n zeroed bytes of private anonymous memory outside the Go
// heap (n must be at least 1).
func anonMap(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// unmap releases memory from anonMap or mapFile.
func unmap(b []byte) error { return unix.Munmap(b) }

// mapFile maps size bytes of fd read-only and shared.
func mapFile(fd *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(fd.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

// mapFilePrivate maps size bytes of fd read-only and private.
func mapFilePrivate(fd *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(fd.Fd()), 0, size, unix.PROT_READ, unix.MAP_PRIVATE)
}

// dropPages tells the kernel the pages of b are not needed (they come back
// from the page cache on demand).
func dropPages(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
