package engine

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestCompleteUTF8Prefix(t *testing.T) {
	llama := "🦙" // 4 bytes
	cases := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"é", 2},
		{"a" + "é"[:1], 1},
		{"a" + llama[:1], 1},
		{"a" + llama[:2], 1},
		{"a" + llama[:3], 1},
		{"a" + llama, 5},
		{"\x80\x80", 2},          // stray continuation bytes: invalid, released
		{"a\xff", 2},             // never valid: released
		{llama[:2] + "b", 3},     // broken sequence followed by ASCII: released
		{"x" + "世"[:2], 1},       // 3-byte character missing its last byte
		{"x" + "世" + "界"[:1], 4}, // complete one, incomplete next
	}
	for _, c := range cases {
		assert.Equal(t, c.want, completeUTF8Prefix([]byte(c.in)), "%q", c.in)
	}
	// Splitting any text anywhere and releasing complete prefixes
	// reassembles it with every release valid UTF-8.
	text := "Grüße, 世界 🦙!"
	for cut := 0; cut <= len(text); cut++ {
		pending := []byte(text[:cut])
		n := completeUTF8Prefix(pending)
		assert.True(t, utf8.Valid(pending[:n]), "cut %d", cut)
		assert.Less(t, len(pending)-n, utf8.UTFMax, "cut %d", cut)
	}
}

// Any text pushed in any pieces comes out as the text before its first
// stop string (or all of it), in releases that never end inside a
// character and never hold part of a stop string that was released.
func TestStopFilterSplits(t *testing.T) {
	stops := []string{"é!", "🦙🦙", "ab", "\n\n"}
	texts := []string{"xaéb", "Grüße é! nope", "🦙x🦙🦙", "a\n\nb", "aab", "é", "plain", "🦙"}
	var f stopFilter
	for _, text := range texts {
		want, wantStop := text, false
		best := -1
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
				best = i
			}
		}
		if best >= 0 {
			want, wantStop = text[:best], true
		}
		// Every split into two or three pieces.
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				f.reset(stops)
				var got strings.Builder
				stopped := false
				for _, piece := range []string{text[:i], text[i:j], text[j:]} {
					out, hit := f.push([]byte(piece))
					assert.True(t, utf8.Valid(out), "%q split %d/%d: release %q", text, i, j, out)
					got.Write(out)
					if hit {
						stopped = true
						break
					}
				}
				if !stopped {
					out, hit := f.finish(nil)
					got.Write(out)
					stopped = hit
				}
				assert.Equal(t, want, got.String(), "%q split %d/%d", text, i, j)
				assert.Equal(t, wantStop, stopped, "%q split %d/%d", text, i, j)
			}
		}
	}
}
