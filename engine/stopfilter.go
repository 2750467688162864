package engine

import (
	"bytes"
	"unicode/utf8"
)

// stopFilter cuts generated text before the first stop string. Text that
// may be the start of a stop string is held back until later text decides,
// and so is an incomplete UTF-8 character, so no part of a stop string and
// no partial character is ever released. It allocates only when its buffer
// grows (held-back text is shorter than the longest stop string plus one
// piece).
type stopFilter struct {
	stops   [][]byte
	pending []byte // text not yet released
	out     []byte // the last release; valid until the next call
	stopped bool
}

// reset starts a generation with the given stop strings (empty ones are
// ignored).
func (f *stopFilter) reset(stops []string) {
	f.stops = f.stops[:0]
	for _, s := range stops {
		if s != "" {
			f.stops = append(f.stops, []byte(s))
		}
	}
	f.pending = f.pending[:0]
	f.stopped = false
}

// push adds text and returns what may be released now, and whether a stop
// string was completed; then the release is the text before it, and the
// filter releases nothing more.
func (f *stopFilter) push(text []byte) ([]byte, bool) {
	if f.stopped {
		return nil, true
	}
	f.pending = append(f.pending, text...)
	if i := f.earliest(); i >= 0 {
		f.stopped = true
		return f.release(i), true
	}
	return f.release(completeUTF8Prefix(f.pending[:len(f.pending)-f.holdBack()])), false
}

// finish adds the last text and releases everything held back, or the text
// before a stop string it completes.
func (f *stopFilter) finish(text []byte) ([]byte, bool) {
	if f.stopped {
		return nil, true
	}
	f.pending = append(f.pending, text...)
	if i := f.earliest(); i >= 0 {
		f.stopped = true
		return f.release(i), true
	}
	return f.release(len(f.pending)), false
}

// earliest is where the first stop string in pending begins, or -1.
// Released text never ends with the start of a stop string, so a match can
// only begin in the pending text.
func (f *stopFilter) earliest() int {
	best := -1
	for _, s := range f.stops {
		if i := bytes.Index(f.pending, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// release moves pending[:n] to out and drops it from pending; after a stop
// the rest of pending is dropped too.
func (f *stopFilter) release(n int) []byte {
	f.out = append(f.out[:0], f.pending[:n]...)
	if f.stopped {
		f.pending = f.pending[:0]
	} else {
		f.pending = f.pending[:copy(f.pending, f.pending[n:])]
	}
	return f.out
}

// holdBack is the length of the longest suffix of pending that is a proper
// prefix of a stop string.
func (f *stopFilter) holdBack() int {
	p := f.pending
	keep := 0
	for _, s := range f.stops {
		for l := min(len(s)-1, len(p)); l > keep; l-- {
			if bytes.Equal(p[len(p)-l:], s[:l]) {
				keep = l
				break
			}
		}
	}
	return keep
}

// completeUTF8Prefix is the length of b without a trailing incomplete UTF-8
// sequence (a lead byte lacking some of its continuation bytes). Invalid
// bytes count as complete: holding them back would not help.
func completeUTF8Prefix(b []byte) int {
	for back := 1; back < utf8.UTFMax && back <= len(b); back++ {
		c := b[len(b)-back]
		if utf8.RuneStart(c) {
			if c >= utf8.RuneSelf && !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			break
		}
	}
	return len(b)
}
