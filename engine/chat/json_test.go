package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonRepr prints a decoded value with its Go types, so that tests tell
// int64 1 from float64 1 and see key order.
func jsonRepr(v value) string {
	switch x := v.(type) {
	case *list:
		parts := make([]string, len(x.Items))
		for i, it := range x.Items {
			parts[i] = jsonRepr(it)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case *dict:
		parts := make([]string, len(x.keys))
		for i := range x.keys {
			parts[i] = jsonRepr(x.keys[i]) + ":" + jsonRepr(x.vals[i])
		}
		return "{" + strings.Join(parts, " ") + "}"
	case string:
		return fmt.Sprintf("%q", x)
	case float64:
		return fmt.Sprintf("f%v", x)
	case int64:
		return fmt.Sprintf("i%d", x)
	}
	return fmt.Sprintf("%v", v)
}

func TestDecodeJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`null`, `<nil>`},
		{` true `, `true`},
		{"\t\r\nfalse\n", `false`},
		{`0`, `i0`},
		{`-0`, `i0`},
		{`-0.0`, `f-0`},
		{`42`, `i42`},
		{`-9223372036854775808`, `i-9223372036854775808`},
		{`9223372036854775808`, `f9.223372036854776e+18`}, // beyond int64: a float
		{`1.5`, `f1.5`},
		{`1e2`, `f100`},
		{`1E+2`, `f100`},
		{`25e-1`, `f2.5`},
		{`""`, `""`},
		{`"abc"`, `"abc"`},
		{`"é€😀"`, `"é€😀"`},
		{`"\"\\\/\b\f\n\r\t"`, `"\"\\/\b\f\n\r\t"`},
		{`"\u0041\u00e9\u20AC"`, `"Aé€"`},
		{`"\ud83d\ude00"`, `"😀"`},                      // surrogate pair
		{`"\uD83D\uDE00x"`, `"😀x"`},                    // upper-case hex
		{`"\ud83d"`, "\"\ufffd\""},                     // lone high surrogate
		{`"\ude00"`, "\"\ufffd\""},                     // lone low surrogate
		{`"\ud83dx"`, "\"\ufffdx\""},                   // high surrogate then a plain character
		{`"\ud83d\u0041"`, "\"\ufffdA\""},              // high surrogate then a non-surrogate escape
		{`"\ud83d\ud83d\ude00"`, "\"\ufffd😀\""},        // two highs then a low
		{"\"a\xffb\"", "\"a\ufffdb\""},                 // invalid UTF-8 byte
		{"\"\xed\xa0\x80\"", "\"\ufffd\ufffd\ufffd\""}, // UTF-8-encoded surrogate
		{"\"\x7f\"", `"\x7f"`},
		{`[]`, `[]`},
		{`[ ]`, `[]`},
		{`[1,"a",[null]]`, `[i1 "a" [<nil>]]`},
		{`{}`, `{}`},
		{`{"z":1,"a":2,"m":3}`, `{"z":i1 "a":i2 "m":i3}`}, // document order
		{`{"a":1,"b":2,"a":3}`, `{"a":i3 "b":i2}`},        // repeated key: first place, last value
		{` { "k" : [ 1 , { "x" : "y" } ] } `, `{"k":[i1 {"x":"y"}]}`},
	} {
		v, err := decodeJSON([]byte(c.in))
		if assert.NoError(t, err, c.in) {
			assert.Equal(t, c.want, jsonRepr(v), c.in)
		}
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, c := range []struct {
		in     string
		offset int
		msg    string
	}{
		{``, 0, "unexpected end of input"},
		{`   `, 3, "unexpected end of input"},
		{`nul`, 3, "in literal null"},
		{`trux`, 3, "in literal true"},
		{`x`, 0, "unexpected character 'x'"},
		{`1 2`, 2, "trailing data"},
		{`{} x`, 3, "trailing data"},
		{`01`, 1, "trailing data"},
		{`-`, 1, "in number"},
		{`-a`, 1, "in number"},
		{`+1`, 0, "looking for a value"},
		{`.5`, 0, "looking for a value"},
		{`1.`, 2, "after decimal point"},
		{`1.e3`, 2, "after decimal point"},
		{`1e`, 2, "in exponent"},
		{`1e+`, 3, "in exponent"},
		{`1e400`, 0, "out of range"},
		{`[1, 1e400]`, 4, "out of range"},
		{`"abc`, 4, "unterminated string"},
		{`"a\`, 3, "unterminated string"},
		{"\"a\nb\"", 2, "control character"},
		{`"\x"`, 1, `invalid escape "\\x"`},
		{`"\u12"`, 1, `invalid \u escape`},
		{`"\u12g4"`, 1, `invalid \u escape`},
		{`[1, 2`, 5, "after array element"},
		{`[1 2]`, 3, "after array element"},
		{`[1,]`, 3, "looking for a value"},
		{`[,1]`, 1, "looking for a value"},
		{`{"a": }`, 6, "looking for a value"},
		{`{"a" 1}`, 5, "after object key"},
		{`{"a": 1,}`, 8, "looking for an object key"},
		{`{a: 1}`, 1, "looking for an object key"},
		{`{"a": 1 "b": 2}`, 8, "after object value"},
		{`{1: 2}`, 1, "looking for an object key"},
		{`NaN`, 0, "looking for a value"},
		{"\xef\xbb\xbf1", 0, "unexpected character '\\ufeff'"}, // no byte order mark
	} {
		_, err := decodeJSON([]byte(c.in))
		var je *JSONError
		if assert.ErrorAs(t, err, &je, c.in) {
			assert.Equal(t, c.offset, je.Offset, "offset for %q: %v", c.in, err)
			assert.Contains(t, je.Error(), c.msg, c.in)
		}
	}
}

// TestDecodeJSONDepth: maxDepth levels of nesting decode, one more is an
// error, and deep input does not exhaust the stack.
func TestDecodeJSONDepth(t *testing.T) {
	ok := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	_, err := decodeJSON([]byte(ok))
	require.NoError(t, err)
	deep := strings.Repeat(`{"a":[`, maxDepth) + "1" + strings.Repeat("]}", maxDepth)
	_, err = decodeJSON([]byte(deep))
	assert.ErrorContains(t, err, "nested deeper than")
	_, err = decodeJSON([]byte(strings.Repeat("[", 1_000_000)))
	assert.ErrorContains(t, err, "nested deeper than")
}

// refDecodeJSON decodes with encoding/json's token stream (numbers as
// json.Number, then Int64 or Float64), the reference for FuzzJSON. The
// shipped decoder must not use encoding/json, but tests may.
func refDecodeJSON(s []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(s))
	dec.UseNumber()
	v, err := refJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func refJSONValue(dec *json.Decoder, depth int) (value, error) {
	if depth > maxDepth {
		return nil, errors.New("too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case nil, bool, string:
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	case json.Delim:
		if x == '[' {
			l := &list{}
			for dec.More() {
				v, err := refJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token()
			return l, err
		}
		d := newDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := refJSONValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			d.Set(k, v)
		}
		_, err := dec.Token()
		return d, err
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// FuzzJSON: our decoder accepts exactly what encoding/json accepts (within
// the depth limit) and decodes it to the same values, types and key order.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`null`, `[1, -2.5e3, "x", true, false, null]`, `{"b": {"a": []}, "a": 0}`,
		`"\ud83d\ude00\u00e9\n\\"`, `"\ud800\udbff\udc00"`, "\"\xff\xc3\"", `1e999`,
		`-0`, `01`, `[1,]`, `{"a":1,"a":2}`, ` [ ] `, `9223372036854775807`, `1 2`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := decodeJSON(in)
		want, refErr := refDecodeJSON(in)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("%q: our error %v, encoding/json's %v", in, err, refErr)
		}
		if err != nil {
			var je *JSONError
			if !errors.As(err, &je) || je.Offset < 0 || je.Offset > len(in) {
				t.Fatalf("%q: error %v without a valid offset", in, err)
			}
			return
		}
		if g, w := jsonRepr(got), jsonRepr(want); g != w {
			t.Fatalf("%q: got %s, encoding/json gives %s", in, g, w)
		}
	})
}

// TestJSONReprDistinguishes guards the fuzz comparison: its printing must
// tell apart what the decoders could disagree on.
func TestJSONReprDistinguishes(t *testing.T) {
	assert.NotEqual(t, jsonRepr(int64(1)), jsonRepr(1.0))
	assert.NotEqual(t, jsonRepr(0.0), jsonRepr(math.Copysign(0, -1)))
	a, b := newDict(), newDict()
	a.Set("x", int64(1))
	a.Set("y", int64(2))
	b.Set("y", int64(2))
	b.Set("x", int64(1))
	assert.NotEqual(t, jsonRepr(a), jsonRepr(b))
	assert.NotEqual(t, jsonRepr("1"), jsonRepr(int64(1)))
}
