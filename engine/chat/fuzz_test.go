package chat

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fuzzMsgs = []Message{
	{Role: "system", Content: "sys"},
	{Role: "user", Content: "hi <think>x</think>"},
	{Role: "assistant", Content: "yo"},
}

// FuzzParse: Parse and Render never panic on any input, and rendering
// stays within its budgets.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"", "{{ x }}", "{% if a %}b{% elif c %}d{% else %}e{% endif %}",
		"{% for m in messages[::-1] %}{{ loop.index }}{{ m.role | upper }}{% endfor %}",
		"{%- set ns = namespace(a=1) -%}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
		"{% macro m(x, y=2) %}{{ x ~ y }}{% endmacro %}{{ m(1) }}",
		"{{ {'a': [1, 2.5, none, true]} | tojson(indent=2) }}",
		"{{ messages[0].content.split('<think>')[-1].strip() }}",
		"{% raw %}{{ }}{% endraw %}{# c #}",
		"{{ raise_exception('x') }}", "{{ range(5) | join(',') }}",
		"{{ 'a' if b else 'c' }}{{ x is defined and x is not none }}",
		"{% for k, v in {'a': 1}.items() if v %}{{ k }}{% else %}no{% endfor %}",
		"{{ (((1))) }}{{ [[[]]] }}", "{{ 'x' * 3 }}{{ 7 // -2 }}{{ 2 ** 8 }}",
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tp, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("parse error of unexpected type %T: %v", err, err)
			}
			return
		}
		out, err := tp.Render(fuzzMsgs, true, "<s>", "</s>")
		if err == nil && len(out) > MaxOutput {
			t.Fatalf("output of %d bytes exceeds MaxOutput", len(out))
		}
	})
}

func TestDeepNestingIsBounded(t *testing.T) {
	for _, src := range []string{
		"{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}",
		"{{ " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + " }}",
		"{{ " + strings.Repeat("not ", 100000) + "1 }}",
		"{{ " + strings.Repeat("-", 100000) + "1 }}",
		strings.Repeat("{% if true %}", 100000) + strings.Repeat("{% endif %}", 100000),
		strings.Repeat("{% for x in y %}", 100000),
		"{{ x" + strings.Repeat(" if y else x", 100000) + " }}",
	} {
		_, err := Parse(src)
		var se *SyntaxError
		require.ErrorAs(t, err, &se)
		assert.Contains(t, se.Msg, "nesting deeper than")
	}
	// Moderate nesting still works.
	tp, err := Parse("{{ " + strings.Repeat("(", 50) + "1" + strings.Repeat(")", 50) + " }}")
	require.NoError(t, err)
	out, err := tp.Render(nil, false, "", "")
	require.NoError(t, err)
	assert.Equal(t, "1", out)
}

func TestRenderBudgets(t *testing.T) {
	for _, src := range []string{
		// too many steps
		"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		// unbounded recursion
		"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		// output growth
		"{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}",
		// string doubling
		"{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"{{ 'x' * 100000000 }}",
		"{{ range(100000000) | length }}",
		// list doubling through sharing, then printing
		"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
		"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
		// a list that contains itself
		"{% set l = [] %}{% set _ = l.append(l) %}{% for i in range(10) %}{% set _ = l.append(l) %}{% endfor %}{{ l }}{{ l | tojson }}",
	} {
		tp, err := Parse(src)
		require.NoError(t, err, src)
		_, err = tp.Render(nil, false, "", "")
		require.Error(t, err, src)
		assert.ErrorIs(t, err, ErrBudget, src)
	}
	// Self-containing lists compare without recursing forever.
	tp, err := Parse("{% set l = [] %}{% set _ = l.append(l) %}{{ l == l }}{{ l in [l] }}")
	require.NoError(t, err)
	_, err = tp.Render(nil, false, "", "")
	assert.NoError(t, err)
}
