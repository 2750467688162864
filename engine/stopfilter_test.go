package engine

import (
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
