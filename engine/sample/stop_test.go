package sample

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type step struct {
	piece, emit string
	stopped     bool
}

func runSteps(t *testing.T, m *StopMatcher, steps []step) {
	t.Helper()
	for i, s := range steps {
		emit, stopped := m.Push(s.piece)
		assert.Equal(t, s.emit, emit, "step %d (%q)", i, s.piece)
		assert.Equal(t, s.stopped, stopped, "step %d (%q)", i, s.piece)
	}
}

func TestStopMatcherHoldsBackPrefix(t *testing.T) {
	m := NewStopMatcher([]string{"</s>", "\nUser:"})
	runSteps(t, m, []step{
		{"Hello", "Hello", false},
		{" wor<", " wor", false}, // "<" may start "</s>"
		{"/", "", false},
		{"x", "</x", false}, // not a stop after all: released
		{"ld\n", "ld", false},
		{"Use", "", false},
		{"r: hi", "", true}, // stop completed across pieces
		{"more", "", true},  // nothing after a stop
	})
	assert.True(t, m.Stopped())
	assert.Equal(t, "", m.Flush())
}

func TestStopMatcherEmitsTextBeforeStop(t *testing.T) {
	m := NewStopMatcher([]string{"STOP"})
	runSteps(t, m, []step{{"abcSTOPdef", "abc", true}})
	m.Reset()
	runSteps(t, m, []step{{"ab", "ab", false}, {"cST", "c", false}, {"OP!", "", true}})
}

func TestStopMatcherEarliestStopWins(t *testing.T) {
	m := NewStopMatcher([]string{"world", "lo w"})
	runSteps(t, m, []step{{"hello world", "hel", true}})
}

func TestStopMatcherFlush(t *testing.T) {
	m := NewStopMatcher([]string{"<|im_end|>"})
	runSteps(t, m, []step{{"answer <|im", "answer ", false}})
	assert.Equal(t, "<|im", m.Flush(), "held-back text is released at the end")
	// After Flush the matcher is ready again.
	runSteps(t, m, []step{{"x<|im_end|>", "x", true}})
}

func TestStopMatcherNoStops(t *testing.T) {
	m := NewStopMatcher(nil)
	runSteps(t, m, []step{{"any", "any", false}, {"", "", false}})
	m = NewStopMatcher([]string{""})
	runSteps(t, m, []step{{"empty stop strings are ignored", "empty stop strings are ignored", false}})
}

func TestStopMatcherUTF8(t *testing.T) {
	m := NewStopMatcher(nil)
	b := []byte("é🦙")
	runSteps(t, m, []step{
		{string(b[:1]), "", false}, // half of é
		{string(b[1:3]), "é", false},
		{string(b[3:5]), "", false},
		{string(b[5:]), "🦙", false},
	})
	// Invalid bytes are not held forever.
	runSteps(t, m, []step{{"\xff", "\xff", false}})
}

// TestStopMatcherRandomSplits: whatever the split of the stream into
// pieces, the emitted text is the stream up to the first stop (or all of
// it plus Flush), and no emitted piece ends inside a stop string.
func TestStopMatcherRandomSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	stops := []string{"<end>", "##", "aab"}
	alphabet := []string{"a", "b", "<", "e", "n", "d", ">", "#", " ", "é"}
	for trial := 0; trial < 2000; trial++ {
		var sb strings.Builder
		for i := r.IntN(30); i > 0; i-- {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		text := sb.String()
		first := len(text)
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && i < first {
				first = i
			}
		}
		m := NewStopMatcher(stops)
		var out strings.Builder
		stopped := false
		for p := 0; p < len(text) && !stopped; {
			n := 1 + r.IntN(4)
			if p+n > len(text) {
				n = len(text) - p
			}
			emit, st := m.Push(text[p : p+n])
			out.WriteString(emit)
			stopped = st
			p += n
		}
		if !stopped {
			out.WriteString(m.Flush())
		}
		require.Equal(t, first < len(text), stopped, "text %q", text)
		require.Equal(t, text[:first], out.String(), "text %q", text)
	}
}
