package chat

import "unicode/utf8"

// sbuf is the interpreter's string builder: strings.Builder's methods
// without its inlined copy check and growth code at each of the ~150
// places that write output, which made up a noticeable part of the
// package's size in the shared library. Its methods are not inlined.
type sbuf struct{ buf []byte }

// Write appends p (io.Writer, for fmt.Fprintf).
//
//go:noinline
func (b *sbuf) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// WriteString appends s.
//
//go:noinline
func (b *sbuf) WriteString(s string) (int, error) {
	b.buf = append(b.buf, s...)
	return len(s), nil
}

// WriteByte appends c.
//
//go:noinline
func (b *sbuf) WriteByte(c byte) error {
	b.buf = append(b.buf, c)
	return nil
}

// WriteRune appends r in UTF-8 (U+FFFD for an invalid rune).
//
//go:noinline
func (b *sbuf) WriteRune(r rune) (int, error) {
	n := len(b.buf)
	b.buf = utf8.AppendRune(b.buf, r)
	return len(b.buf) - n, nil
}

// Len is the number of bytes written.
func (b *sbuf) Len() int { return len(b.buf) }

// String returns a copy of the bytes written.
//
//go:noinline
func (b *sbuf) String() string { return string(b.buf) }
