package chat

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAppendInt: strftime's padding helper prints what fmt's %0Nd and %Nd
// (and %d for width 0) print.
func TestAppendInt(t *testing.T) {
	for _, n := range []int{0, 5, -5, 9, 42, -42, 100, 366, 2024, -2024, 12345} {
		for _, w := range []int{0, 2, 3, 4} {
			for _, pad := range []byte{'0', ' '} {
				b := appendInt([]byte("x"), n, w, pad)
				spec := fmt.Sprintf("%%%dd", w)
				if pad == '0' {
					spec = fmt.Sprintf("%%0%dd", w)
				}
				assert.Equal(t, "x"+fmt.Sprintf(spec, n), string(b), "%s of %d", spec, n)
			}
		}
	}
}

// TestStrftimeNames: the month and day names are time's own.
func TestStrftimeNames(t *testing.T) {
	for m := time.January; m <= time.December; m++ {
		d := time.Date(2024, m, 1, 0, 0, 0, 0, time.UTC)
		assert.Equal(t, m.String()+" "+m.String()[:3], strftime(d, "%B %b"))
	}
	for i := 0; i < 7; i++ {
		d := time.Date(2024, 7, 1+i, 0, 0, 0, 0, time.UTC)
		assert.Equal(t, d.Weekday().String()+" "+d.Weekday().String()[:3], strftime(d, "%A %a"))
	}
}

// TestFamiliesSorted: Families lists every built-in family once, sorted.
func TestFamiliesSorted(t *testing.T) {
	names := Families()
	assert.Len(t, names, len(families))
	assert.True(t, sort.StringsAreSorted(names), "%v", names)
	for _, n := range names {
		assert.Contains(t, families, n)
	}
}
