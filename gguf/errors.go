package gguf

import (
	"errors"
	"strconv"
)

// Sentinel errors, for errors.Is: every error about the content of a file
// wraps exactly one of them.
var (
	// ErrFormat means the file is not a well-formed GGUF file (truncated,
	// inconsistent, or hostile).
	ErrFormat = errors.New("malformed GGUF")
	// ErrUnsupported means the file may be valid but uses something this
	// package does not handle (a newer version, big-endian, an unknown
	// tensor type).
	ErrUnsupported = errors.New("unsupported GGUF")
	// ErrMapping means reading a mapped file faulted: it was truncated or
	// replaced while mapped (an I/O error, not a property of its content).
	ErrMapping = errors.New("gguf: the mapped file could not be read (truncated while open?)")
	// ErrClosed is returned by value accessors after File.Close.
	ErrClosed = errors.New("gguf: file closed")
)

// FormatError describes a problem with a file's content: where (the key or
// tensor it concerns and the byte offset) and what.
type FormatError struct {
	Path        string // file path, when opened by path
	Context     string // `key "general.name"`, `tensor "output.weight"`, "header"; may be empty
	Off         int64  // byte offset in the file where the problem was found, or -1
	Msg         string
	Unsupported bool // wraps ErrUnsupported rather than ErrFormat
}

func (e *FormatError) Error() string {
	b := make([]byte, 0, 64+len(e.Context)+len(e.Msg))
	b = append(b, "gguf: "...)
	if e.Path != "" {
		b = append(b, e.Path...)
		b = append(b, ": "...)
	}
	if e.Context != "" {
		b = append(b, e.Context...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	if e.Off >= 0 {
		b = append(b, " (at offset "...)
		b = strconv.AppendInt(b, e.Off, 10)
		b = append(b, ')')
	}
	return string(b)
}

// Unwrap returns ErrFormat or ErrUnsupported.
func (e *FormatError) Unwrap() error {
	if e.Unsupported {
		return ErrUnsupported
	}
	return ErrFormat
}

// pathError records path in a FormatError (others are returned as they are).
func pathError(path string, err error) error {
	if fe, ok := err.(*FormatError); ok {
		fe.Path = path
	}
	return err
}
