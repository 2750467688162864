//go:build !unix

package engine

import (
	"fmt"
	"io"
	"os"
)

// Without mmap (WebAssembly, Windows): memory comes from the Go heap, a
// model file is read into it, and releasing or dropping pages is left to
// the collector.
//
// On Windows a file mapping (CreateFileMapping + MapViewOfFile, with
// VirtualAlloc for anonMap) would be better: the weights would be shared
// with the page cache instead of copied into the heap, opening would not
// read the whole file up front, and a model could exceed the heap's
// comfortable size. Reading the file is correct, only slower and heavier.

const openFlags = 0

// anonMap returns n zeroed bytes (n must be at least 1).
func anonMap(n int) ([]byte, error) { return make([]byte, n), nil }

// unmap does nothing: the collector frees the slice once unreferenced.
func unmap(b []byte) error { return nil }

// mapFile reads the first size bytes of fd into memory.
func mapFile(fd *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(fd, 0, int64(size)), b); err != nil {
		return nil, fmt.Errorf("reading %d bytes: %w", size, err)
	}
	return b, nil
}

// mapFilePrivate reads size bytes of fd into memory.
func mapFilePrivate(fd *os.File, size int) ([]byte, error) { return mapFile(fd, size) }

// dropPages does nothing: heap memory has no page cache behind it.
func dropPages(b []byte) error { return nil }
