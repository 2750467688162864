//go:build unix

package packcache

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const mmapSupported = true

// openNoFollow opens an entry for reading without following a symlink, so
// a link planted under an entry's name is never read or removed.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// mapFile maps the first n bytes of f read-only and shared. With prefault
// it populates the page tables and asks the kernel to read the file ahead
// (validation reads every byte right away); without, mapping costs no more
// than a system call and pages come in as they are read.
func mapFile(f *os.File, n int64, prefault bool) ([]byte, error) {
	flags := unix.MAP_SHARED
	if prefault {
		flags |= mapPopulate
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, flags)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	if prefault {
		_ = unix.Madvise(m, unix.MADV_WILLNEED) // a hint; failure changes nothing
	} else {
		hugePages(m)
	}
	return m, nil
}

func unmap(m []byte) error {
	if err := unix.Munmap(m); err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}

// fileSize is the size of the open file fd; one fstat, no allocation.
func fileSize(fd uintptr) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// readStart reads the start of f into b with one pread (a stamp is one
// short read) and returns how many bytes it got.
func readStart(f *os.File, b []byte) int {
	n, err := unix.Pread(int(f.Fd()), b, 0)
	if err != nil {
		return 0
	}
	return n
}
