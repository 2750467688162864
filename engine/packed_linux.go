package engine

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// replacePages atomically moves the pages of src (an anonymous mapping made
// by anonPages) over dst, which must be page-aligned: a reader of dst sees
// either the old pages or all of the new ones, never a mix, and src no
// longer exists afterwards.
func replacePages(dst, src []byte) error {
	_, err := unix.MremapPtr(unsafe.Pointer(unsafe.SliceData(src)), uintptr(len(src)),
		unsafe.Pointer(unsafe.SliceData(dst)), uintptr(len(dst)), unix.MREMAP_MAYMOVE|unix.MREMAP_FIXED)
	if err != nil {
		return fmt.Errorf("mremap of %d bytes: %w", len(dst), err)
	}
	return nil
}

// anonPages maps n bytes of private anonymous memory that the Go runtime's
// unix.Mmap bookkeeping does not track (replacePages moves it away).
func anonPages(n int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("mapping %d bytes: %w", n, err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// freeAnonPages unmaps memory from anonPages that was not moved.
func freeAnonPages(b []byte) {
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}
