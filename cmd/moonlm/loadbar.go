package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// loadBar draws a model open's progress on one terminal line of stderr, but
// only once the open has taken longer than delay: quick opens print
// nothing. Done clears the line it drew.
type loadBar struct {
	w     io.Writer
	now   func() time.Time
	start time.Time
	delay time.Duration
	drawn bool
}

const loadBarWidth = 30

func newLoadBar(w io.Writer, now func() time.Time) *loadBar {
	return &loadBar{w: w, now: now, start: now(), delay: time.Second}
}

// update is an engine.ModelParams.Progress: it never cancels.
func (b *loadBar) update(fraction float32) bool {
	if !b.drawn && b.now().Sub(b.start) < b.delay {
		return true
	}
	fraction = min(max(fraction, 0), 1)
	n := int(fraction * loadBarWidth)
	fmt.Fprintf(b.w, "\rloading model [%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(" ", loadBarWidth-n), 100*fraction)
	b.drawn = true
	return true
}

// done erases the bar, if one was drawn.
func (b *loadBar) done() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}
