package sample

import (
	"bytes"
	"unicode/utf8"
)

// StopMatcher watches streamed text for stop strings. Text that could be
// the start of a stop string is held back until the next pieces show
// whether it is, so a caller never emits part of a stop string. An
// incomplete UTF-8 sequence at the end is held back too, so emitted text
// always ends on a character boundary.
type StopMatcher struct {
	stops   [][]byte
	pending []byte
	stopped bool
}

// NewStopMatcher returns a matcher for the given stop strings; empty ones
// are ignored.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, []byte(s))
		}
	}
	return m
}

// Push adds a piece of generated text. It returns the text that is now
// safe to emit and whether a stop string was completed; on a stop, emit
// is the text before the stop string, and later pushes return nothing.
func (m *StopMatcher) Push(piece string) (emit string, stopped bool) {
	if m.stopped {
		return "", true
	}
	m.pending = append(m.pending, piece...)
	// Only a stop string that overlaps the new piece can be new, but the
	// held-back text is short, so search it all: earliest match wins.
	best := -1
	for _, s := range m.stops {
		if i := bytes.Index(m.pending, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best >= 0 {
		m.stopped = true
		emit = string(m.pending[:best])
		m.pending = m.pending[:0]
		return emit, true
	}
	keep := m.holdBack()
	cut := len(m.pending) - keep
	emit = string(m.pending[:cut])
	m.pending = append(m.pending[:0], m.pending[cut:]...)
	return emit, false
}

// holdBack is how many trailing bytes of pending must wait: the longest
// suffix that is a proper prefix of a stop string, or an unfinished UTF-8
// sequence, whichever is longer.
func (m *StopMatcher) holdBack() int {
	p := m.pending
	keep := 0
	for _, s := range m.stops {
		n := min(len(s)-1, len(p))
		for l := n; l > keep; l-- {
			if bytes.Equal(p[len(p)-l:], s[:l]) {
				keep = l
				break
			}
		}
	}
	return max(keep, incompleteUTF8(p))
}

// incompleteUTF8 returns the length of a UTF-8 sequence cut short at the
// end of p (0 if p ends on a boundary or with invalid bytes).
func incompleteUTF8(p []byte) int {
	for i := 1; i <= 3 && i <= len(p); i++ {
		b := p[len(p)-i]
		if b < 0x80 {
			return 0 // ASCII: complete
		}
		if b >= 0xC0 { // a leading byte: is its sequence complete?
			need := 2
			switch {
			case b >= 0xF0:
				need = 4
			case b >= 0xE0:
				need = 3
			}
			if need > i && !utf8.FullRune(p[len(p)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// Flush returns the held-back text at the end of generation (nothing if a
// stop string was hit) and resets the matcher.
func (m *StopMatcher) Flush() string {
	out := ""
	if !m.stopped {
		out = string(m.pending)
	}
	m.Reset()
	return out
}

// Reset clears the matcher for a new generation, keeping its stop strings.
func (m *StopMatcher) Reset() {
	m.pending = m.pending[:0]
	m.stopped = false
}

// Stopped reports whether a stop string was hit.
func (m *StopMatcher) Stopped() bool { return m.stopped }
