package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type jinjaCase struct {
	Name     string         `json:"name"`
	Src      string         `json:"src"`
	Messages []Message      `json:"messages"`
	Gen      *bool          `json:"gen"`
	Bos      string         `json:"bos"`
	Eos      string         `json:"eos"`
	Vars     map[string]any `json:"vars"`
	Family   string         `json:"family"`
	Out      *string        `json:"out"`
	Err      string         `json:"err"`
	// Lenient marks reference failures where we deliberately succeed
	// (subscript or attribute of undefined, slice of a non-sequence).
	Lenient bool `json:"lenient"`
}

func loadJinjaCases(t *testing.T) []jinjaCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/jinja_cases.json")
	require.NoError(t, err)
	var cases []jinjaCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.Greater(t, len(cases), 100)
	return cases
}

func (c jinjaCase) params() (gen bool, bos, eos string) {
	gen, bos, eos = true, "<s>", "</s>"
	if c.Gen != nil {
		gen = *c.Gen
	}
	if c.Bos != "" {
		bos = c.Bos
	}
	if c.Eos != "" {
		eos = c.Eos
	}
	return
}

// TestJinjaReference compares every case of testdata/jinja_cases.json with
// the output the reference Jinja2 produced for it (see gen_cases.py there):
// whitespace control, loops, scoping, namespace, macros, filters, tests,
// operators, string methods, slicing, and the classic Llama 2, Mistral,
// ChatML, Phi-3, Zephyr and SmolLM2 templates over several conversations.
func TestJinjaReference(t *testing.T) {
	for _, c := range loadJinjaCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			gen, bos, eos := c.params()
			tp, err := Parse(c.Src)
			require.NoError(t, err)
			got, err := tp.RenderVars(c.Messages, gen, bos, eos, c.Vars)
			if c.Err != "" && c.Lenient && err == nil {
				return
			}
			if c.Err != "" {
				require.Error(t, err, "reference failed with %q", c.Err)
				var ex *ExceptionError
				if errors.As(err, &ex) {
					assert.Equal(t, c.Err, ex.Message)
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, c.Out)
			assert.Equal(t, *c.Out, got)
		})
	}
}

// TestFamiliesMatchTemplates checks each built-in family against the
// reference rendering of that family's template, for conversations the
// template accepts.
func TestFamiliesMatchTemplates(t *testing.T) {
	n := 0
	for _, c := range loadJinjaCases(t) {
		if c.Family == "" || c.Err != "" || c.Family == "smollm2" {
			continue
		}
		if c.Family == "phi3" || c.Family == "chatml" || c.Family == "zephyr" {
			// These templates print the system turn as its own turn; fine.
		}
		gen, bos, eos := c.params()
		f, err := Family(c.Family)
		require.NoError(t, err)
		got, err := f.Render(c.Messages, gen, bos, eos)
		require.NoError(t, err)
		want := *c.Out
		if c.Family == "phi3" && !gen {
			// Our phi3 test template appends eos when no generation
			// prompt is asked for; the family format does not.
			want = strings.TrimSuffix(want, eos)
		}
		assert.Equal(t, want, got, c.Name)
		assert.Equal(t, c.Family, DetectFamily(c.Src), c.Name)
		n++
	}
	require.Greater(t, n, 20)
}

// TestApplyFallback: a template using a construct we lack still renders,
// through the family its markers name, and Info says so.
func TestApplyFallback(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "Hi"}}
	cases := []struct {
		name, src, family, want string
	}{
		{"chatml", "{% include 'x' %}<|im_start|>", "chatml",
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3", "{{ x | nosuchfilter }}<|start_header_id|>", "llama3",
			"<B><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"gemma", "{% for %}<start_of_turn>", "gemma",
			"<B><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n"},
		{"llama2", "{% recursive %}[INST] <<SYS>>", "llama2",
			"<B>[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST]"},
		{"mistral", "{{ unknown_fn() }}[INST]", "mistral", "<B>[INST] S\n\nHi [/INST]"},
		{"phi3", "{{ 1 / 0 }}<|user|><|end|>", "phi3",
			"<|system|>\nS<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n"},
		{"zephyr", "{{ 'a' + 1 }}<|user|>", "zephyr",
			"<|system|>\nS<E>\n<|user|>\nHi<E>\n<|assistant|>\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, info, err := Apply(c.src, msgs, true, "<B>", "<E>")
			require.NoError(t, err)
			assert.True(t, info.Fallback())
			assert.Equal(t, c.family, info.Family)
			assert.Error(t, info.Err)
			assert.Equal(t, c.want, got)
		})
	}
	// No template, or an unusable one that names no family: nothing is
	// guessed; the error says why.
	for _, src := range []string{"", " \n", "{% bogus %}"} {
		got, info, err := Apply(src, msgs, true, "<B>", "<E>")
		require.ErrorIs(t, err, ErrUnusable, "%q", src)
		assert.Empty(t, got)
		assert.False(t, info.Fallback())
		assert.Error(t, info.Err)
		if src == "{% bogus %}" {
			assert.Contains(t, err.Error(), "bogus")
			assert.Contains(t, err.Error(), "names no built-in family")
		} else {
			assert.Contains(t, err.Error(), "empty")
		}
	}
	// A template that works is used as is.
	got, info, err := Apply("{% for m in messages %}[{{ m.content }}]{% endfor %}", msgs, true, "", "")
	require.NoError(t, err)
	assert.False(t, info.Fallback())
	assert.NoError(t, info.Err)
	assert.Equal(t, "[S][Hi]", got)
	// raise_exception is the template rejecting the conversation: no fallback.
	_, info, err = Apply("{{ raise_exception('no system') }}<|im_start|>", msgs, true, "", "")
	var ex *ExceptionError
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, "no system", ex.Message)
	assert.False(t, info.Fallback())
}

func TestFamilyUnknown(t *testing.T) {
	_, err := Family("nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope")
	for _, n := range Families() {
		f, err := Family(n)
		require.NoError(t, err)
		out, err := f.Render([]Message{{Role: "user", Content: "x"}}, true, "", "")
		require.NoError(t, err)
		assert.Contains(t, out, "x", n)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		src, want string
		line, col int
	}{
		{"ab\n  {{ x | frobnicate }}", `unknown filter "frobnicate"`, 2, 10},
		{"{% if x is wibble %}{% endif %}", `unknown test "wibble"`, 1, 12},
		{"{% include 'other.jinja' %}", `unknown or unsupported tag "include"`, 1, 4},
		{"x\n\n{% for x in y recursive %}{% endfor %}", `unsupported construct "recursive"`, 3, 15},
		{"{% if true %}never closed", "unexpected end of template", 1, 26},
		{"{% endif %}", `unexpected tag "endif"`, 1, 4},
		{"{{ 'abc }}", "unterminated string literal", 1, 4},
		{"{{ x", "unclosed tag", 1, 3},
		{"{# open comment", "unclosed comment", 1, 1},
		{"{{ a $ b }}", "unexpected character '$'", 1, 6},
		{"{{ (1, 2 }}", `unclosed "("`, 1, 4},
		{"{{ foo(1 2) }}", `expected ")", found "2"`, 1, 10},
		{"{{ (1, 2 ] }}", `unclosed "("`, 1, 4},
		{"{% set %}", "expected a name", 1, 8},
		{"{% raw %}abc", "unclosed raw block", 1, 1},
		{"a{% break %}", `"break" outside a for loop`, 1, 5},
		{"{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}", `"continue" outside a for loop`, 1, 35},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		require.Error(t, err, c.src)
		var se *SyntaxError
		require.ErrorAs(t, err, &se, c.src)
		assert.Contains(t, se.Msg, c.want, c.src)
		assert.Equal(t, Pos{Line: c.line, Col: c.col}, se.Pos, c.src)
	}
}

func TestRenderErrors(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "hi"}}
	cases := []struct{ src, want string }{
		{"{{ 'a' + 1 }}", "unsupported operand types for +: str and int"},
		{"{{ 'a' + missing }}", `"missing" is undefined`},
		{"{{ 1 // 0 }}", "division or modulo by zero"},
		{"{{ nofunc(1) }}", `"nofunc" is undefined and cannot be called`},
		{"{% set x.y = 1 %}", "only namespace() objects"},
		{"{{ 1 < 'a' }}", "not supported"},
		{"{% for a, b in [[1, 2, 3]] %}{% endfor %}", "cannot unpack 3 values into 2 names"},
		{"{{ messages | tojson(indent=100000) }}", "out of range"},
		{"{{ 5 | length }}", "has no length"},
		{"{% for x in 5 %}{% endfor %}", "not iterable"},
		{"{{ '%99999s' % 'a' }}", "too large"},
		{"{{ '%s %s' % 'a' }}", "not enough arguments"},
		{"{{ '%s' % ('a', 'b') }}", "not all arguments converted"},
		{"{{ '%d' % 'a' }}", "a number is required"},
	}
	for _, c := range cases {
		tp, err := Parse(c.src)
		require.NoError(t, err, c.src)
		_, err = tp.Render(msgs, true, "", "")
		require.Error(t, err, c.src)
		assert.Contains(t, err.Error(), c.want, c.src)
		var re *RenderError
		assert.ErrorAs(t, err, &re, c.src)
	}
}

func TestRaiseException(t *testing.T) {
	tp, err := Parse("ok\n{% if messages[0].role != 'system' %}\n  {{ raise_exception('System message required, got ' ~ messages[0].role) }}\n{% endif %}")
	require.NoError(t, err)
	_, err = tp.Render([]Message{{Role: "user", Content: "x"}}, true, "", "")
	var ex *ExceptionError
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, "System message required, got user", ex.Message)
	var re *RenderError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3, re.Pos.Line)
	out, err := tp.Render([]Message{{Role: "system", Content: "x"}}, true, "", "")
	require.NoError(t, err)
	assert.Equal(t, "ok\n", out)
}

// TestLenientUndefined covers where we are deliberately more forgiving than
// Hugging Face's sandbox: attributes of undefined are undefined, lists may
// be appended to, and {% generation %} renders its body.
func TestLenientUndefined(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}
	cases := []struct{ src, want string }{
		{"[{{ nope.attr }}][{{ nope.a.b['c'] }}]{{ nope.attr is defined }}", "[][]False"},
		{"{{ none.attr is defined }}", "False"},
		{"{% set l = [] %}{% for m in messages %}{% set _ = l.append(m.role) %}{% endfor %}{{ l }}", "['user', 'assistant']"},
		{"{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}", "ab"},
	}
	for _, c := range cases {
		tp, err := Parse(c.src)
		require.NoError(t, err, c.src)
		got, err := tp.Render(msgs, true, "", "")
		require.NoError(t, err, c.src)
		assert.Equal(t, c.want, got, c.src)
	}
}

func TestStrftimeNow(t *testing.T) {
	old := nowFunc
	defer func() { nowFunc = old }()
	nowFunc = func() time.Time { return time.Date(2024, 7, 4, 15, 4, 5, 0, time.UTC) }
	tp, err := Parse(`{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%Y-%m-%d %H:%M:%S %A %B %-d %I%p %j %%") }}`)
	require.NoError(t, err)
	got, err := tp.Render(nil, false, "", "")
	require.NoError(t, err)
	assert.Equal(t, "04 Jul 2024|2024-07-04 15:04:05 Thursday July 4 03PM 186 %", got)
}

func TestRenderVarsTypes(t *testing.T) {
	tp, err := Parse("{{ a }} {{ b | tojson }} {{ c[1] }} {{ d.k }} {{ e }} {{ f is none }}")
	require.NoError(t, err)
	got, err := tp.RenderVars(nil, false, "", "", map[string]any{
		"a": 3, "b": map[string]any{"y": 1.5, "x": []any{true, "s"}}, "c": []string{"p", "q"},
		"d": map[string]any{"k": int32(7)}, "e": float32(0.5), "f": nil,
	})
	require.NoError(t, err)
	assert.Equal(t, `3 {"x": [true, "s"], "y": 1.5} q 7 0.5 True`, got)
	_, err = tp.RenderVars(nil, false, "", "", map[string]any{"a": struct{}{}})
	assert.Error(t, err)
}

func TestRenderVarsJSON(t *testing.T) {
	tp, err := Parse("{{ tools | tojson }}|{{ tools[0].n + 1 }}|{{ tools[0].f }}|{{ x.k }}")
	require.NoError(t, err)
	got, err := tp.RenderVars(nil, false, "", "", map[string]any{
		"tools": JSON(`[{"z": "é\n", "a": [1, 2.5, null, false], "n": 41, "f": 1e2}]`),
		"x":     JSON(`{"k": "v"}`),
	})
	require.NoError(t, err)
	assert.Equal(t, `[{"z": "é\n", "a": [1, 2.5, null, false], "n": 41, "f": 100.0}]|42|100.0|v`, got)
	for _, bad := range []string{`{"a": }`, `[1, 2`, `1 2`, strings.Repeat("[", 1000) + strings.Repeat("]", 1000)} {
		_, err = tp.RenderVars(nil, false, "", "", map[string]any{"tools": JSON(bad)})
		assert.Error(t, err, bad)
	}
}

// TestConcurrentRender: a parsed Template is shared by concurrent renders
// (run with -race to check).
func TestConcurrentRender(t *testing.T) {
	tp, err := Parse("{% set ns = namespace(n=0) %}{% set l = [] %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% set _ = l.append(m.role) %}{{ m.content }}{% endfor %}{{ ns.n }}{{ l }}")
	require.NoError(t, err)
	msgs := []Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}
	want, err := tp.Render(msgs, true, "", "")
	require.NoError(t, err)
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func() {
			for i := 0; i < 50; i++ {
				got, err := tp.Render(msgs, true, "", "")
				if err == nil && got != want {
					err = fmt.Errorf("got %q want %q", got, want)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 8; g++ {
		require.NoError(t, <-errs)
	}
}

// TestMappingArgumentsAndCompareKeys covers dict() and namespace() filling
// from positional mappings then keywords, dict.update/copy, and min/max
// comparing by attribute and, unless case_sensitive, ignoring case.
func TestMappingArgumentsAndCompareKeys(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{{ dict({'a': 1}, b=2) | tojson }}", `{"a": 1, "b": 2}`},
		{"{{ dict({'a': 1}, a=3) | tojson }}", `{"a": 3}`},
		{"{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", "12"},
		{"{% set d = {'a': 1} %}{% set _ = d.update({'b': 2}, {'a': 5}) %}{{ d | tojson }}", `{"a": 5, "b": 2}`},
		{"{% set d = {'a': 1} %}{% set c = d.copy() %}{% set _ = c.update({'b': 2}) %}{{ d | tojson }}{{ c | tojson }}", `{"a": 1}{"a": 1, "b": 2}`},
		{"{{ ['b', 'A', 'c'] | max }}{{ ['b', 'A', 'c'] | min }}", "cA"},
		{"{{ ['b', 'A', 'C'] | max(case_sensitive=true) }}{{ ['b', 'a', 'C'] | min(true) }}", "bC"},
		{"{{ [{'n': 'b'}, {'n': 'A'}] | min(attribute='n') }}", "{'n': 'A'}"},
	}
	for _, c := range cases {
		tp, err := Parse(c.src)
		require.NoError(t, err, c.src)
		got, err := tp.Render(nil, false, "", "")
		require.NoError(t, err, c.src)
		assert.Equal(t, c.want, got, c.src)
	}
	for _, src := range []string{"{{ dict([1]) }}", "{{ namespace(1) }}", "{% set d = {} %}{{ d.update(1) }}"} {
		tp, err := Parse(src)
		require.NoError(t, err, src)
		_, err = tp.Render(nil, false, "", "")
		assert.Error(t, err, src)
	}
}
