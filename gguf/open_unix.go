//go:build unix

package gguf

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// Open maps the file at path read-only and parses it. Tensor data is not
// read until used; Close unmaps it. Only regular files are opened (a FIFO
// would block the open until a writer came).
func Open(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: %s", path, notRegular(st.Mode()))
	}
	fd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	if st, err = fd.Stat(); err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: %s", path, notRegular(st.Mode()))
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
	f, err := parseMapped(data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, pathError(path, err)
	}
	f.release = unix.Munmap
	return f, nil
}

// notRegular says what a file that is not a regular file is.
func notRegular(mode os.FileMode) string {
	switch {
	case mode.IsDir():
		return "is a directory"
	case mode&os.ModeNamedPipe != 0:
		return "is a FIFO (named pipe), not a regular file"
	case mode&os.ModeDevice != 0:
		return "is a device, not a regular file"
	case mode&os.ModeSocket != 0:
		return "is a socket, not a regular file"
	}
	return "is not a regular file"
}

// parseMapped is parse over a file mapping: a file truncated after it was
// mapped raises SIGBUS on the pages past its end, which SetPanicOnFault
// turns into a panic recovered here as an ErrMapping error.
func parseMapped(data []byte) (f *File, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("gguf: %w: %v", ErrMapping, r)
		}
	}()
	return parse(data)
}
