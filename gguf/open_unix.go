//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Open maps the file at path read-only and parses it. Tensor data is not
// read until used; Close unmaps it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size < 4 {
		return nil, pathError(path, &FormatError{Context: "header", Off: 0, Msg: fmt.Sprintf("file too short (%d bytes) for the magic", size)})
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: size %d too large to map: %w", path, size, ErrUnsupported)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: mmap %s: %w", path, err)
	}
	f, err := parse(data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, pathError(path, err)
	}
	f.release = unix.Munmap
	return f, nil
}
