package chat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Repetition, ranges, slices and integer arithmetic at the int64 extremes
// are template errors (the budget, or an overflow), never a panic: a
// length check that multiplied len*n overflowed for n near 2^63 and let
// strings.Repeat panic.
func TestTemplateIntegerExtremes(t *testing.T) {
	const maxI = "9223372036854775807"
	const minI = "(-9223372036854775807 - 1)"
	for _, c := range []struct {
		tmpl string
		want string // "" = renders without error
		is   error
	}{
		{"{{ 'ab' * " + maxI + " }}", "", ErrBudget},
		{"{{ " + maxI + " * 'ab' }}", "", ErrBudget},
		{"{{ ([1, 2] * " + maxI + ") | length }}", "", ErrBudget},
		{"{{ ([] * " + maxI + ") | length }}", "0", nil},
		{"{{ ('' * " + maxI + ") | length }}", "0", nil},
		{"{{ range(" + minI + ", " + maxI + ") | length }}", "", ErrBudget},
		{"{{ range(" + maxI + ", " + minI + ", -1) | length }}", "", ErrBudget},
		{"{{ range(0, " + maxI + ", " + maxI + ") | list }}", "[0]", nil},
		{"{{ range(" + maxI + ", " + minI + ", " + minI + ") | list }}", "[9223372036854775807, -1]", nil},
		{"{{ 'abcdef'[1::" + maxI + "] }}", "b", nil},
		{"{{ 'abcdef'[4::" + minI + "] }}", "e", nil},
		{"{{ [1, 2, 3][::" + minI + "] }}", "[3]", nil},
		{"{{ " + maxI + " + 1 }}", "", errOverflow},
		{"{{ " + minI + " - 1 }}", "", errOverflow},
		{"{{ " + minI + " * -1 }}", "", errOverflow},
		{"{{ -1 * " + minI + " }}", "", errOverflow},
		{"{{ 2 ** 64 }}", "", errOverflow},
		{"{{ 2 ** 62 }}", "4611686018427387904", nil},
		{"{{ (-2) ** 63 }}", "-9223372036854775808", nil},
		{"{{ " + minI + " // -1 }}", "", nil},
	} {
		t.Run(c.tmpl, func(t *testing.T) {
			var out string
			var err error
			tp, err := Parse(c.tmpl)
			require.NoError(t, err)
			require.NotPanics(t, func() { out, err = tp.Render(nil, false, "", "") })
			switch {
			case c.is != nil:
				require.Error(t, err)
				assert.True(t, errors.Is(err, c.is), "got %v", err)
			case c.want != "":
				require.NoError(t, err)
				assert.Equal(t, c.want, out)
			}
		})
	}
}
