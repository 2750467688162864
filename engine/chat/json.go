package chat

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine/internal/jsonread"
)

// JSON is a JSON text (RFC 8259) passed to RenderVars as a template
// variable. It is decoded keeping object key order, which a Go map cannot,
// so tool schemas and tool calls render with their keys as written.
type JSON []byte

// JSONError is a malformed JSON variable: what is wrong and the byte offset
// in the JSON text where it was found.
type JSONError struct {
	Offset int
	Msg    string
}

func (e *JSONError) Error() string {
	return "JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// decodeJSON decodes s, which must hold exactly one JSON value (with
// surrounding whitespace), into nil, bool, int64 (integers that fit),
// float64, string, *list or *dict (keys in document order; a repeated key
// keeps its first position and its last value, as Python's json does).
// Invalid UTF-8 and lone surrogate escapes in strings become U+FFFD.
// Nesting is bounded like template nesting.
func decodeJSON(s []byte) (value, error) {
	v, err := jsonread.Decode(s, maxDepth)
	if err != nil {
		return nil, chatJSONError(err)
	}
	return fromJSON(v)
}

// chatJSONError is a decoder's error as a *JSONError.
func chatJSONError(err error) error {
	var je *jsonread.Error
	if errors.As(err, &je) {
		return &JSONError{Offset: je.Offset, Msg: je.Msg}
	}
	return err
}

// fromJSON converts a decoded value to a template value. A number is an
// int64 when it is an integer that fits, else a float64 (an error if out
// of float64's range), as json.Number's Int64 then Float64 would.
func fromJSON(v jsonread.Value) (value, error) {
	switch v.Kind {
	case jsonread.Bool:
		return v.Bool, nil
	case jsonread.String:
		return v.Text, nil
	case jsonread.Number:
		if !strings.ContainsAny(v.Text, ".eE") {
			if i, err := strconv.ParseInt(v.Text, 10, 64); err == nil {
				return i, nil
			}
		}
		f, err := strconv.ParseFloat(v.Text, 64)
		if err != nil {
			return nil, &JSONError{Offset: v.Offset, Msg: "number " + v.Text + " is out of range"}
		}
		return f, nil
	case jsonread.Array:
		l := &list{}
		for _, it := range v.Items {
			e, err := fromJSON(it)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, e)
		}
		return l, nil
	case jsonread.Object:
		m := newDict()
		for i, it := range v.Items {
			e, err := fromJSON(it)
			if err != nil {
				return nil, err
			}
			m.Set(v.Keys[i], e)
		}
		return m, nil
	}
	return nil, nil
}

// jsonOpts are json.dumps's options as Hugging Face's tojson passes them.
type jsonOpts struct {
	indent          string
	hasIndent       bool
	itemSep, keySep string
	sortKeys        bool
	ascii           bool
}

// writeJSON writes v as Python's json.dumps does with the options o: the
// package's JSON writer, behind the tojson filter.
func writeJSON(b *sbuf, v value, o *jsonOpts, level int) error {
	if level > maxDepth {
		return errorf("%w: value nested too deeply for tojson", ErrBudget)
	}
	if err := checkLen(b.Len()); err != nil {
		return err
	}
	newline := func(l int) {
		if o.hasIndent {
			b.WriteByte('\n')
			for i := 0; i < l; i++ {
				b.WriteString(o.indent)
			}
		}
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(formatFloat(x))
		}
	case string:
		writeJSONString(b, x, o.ascii)
	case *list:
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			newline(level + 1)
			if err := writeJSON(b, it, o, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte(']')
	case *dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		order := make([]int, x.Len())
		for i := range order {
			order[i] = i
		}
		if o.sortKeys {
			idx := make([]value, len(order))
			for i := range idx {
				idx[i] = int64(i)
			}
			if err := sortValues(idx, func(v value) value { return x.keys[v.(int64)] }, false, true); err != nil {
				return err
			}
			for i := range idx {
				order[i] = int(idx[i].(int64))
			}
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			newline(level + 1)
			var ks string
			switch kk := x.keys[i].(type) {
			case string:
				ks = kk
			case nil:
				ks = "null"
			case bool:
				ks = "false"
				if kk {
					ks = "true"
				}
			default:
				ks = toStr(kk)
			}
			writeJSONString(b, ks, o.ascii)
			b.WriteString(o.keySep)
			if err := writeJSON(b, x.vals[i], o, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte('}')
	default:
		return errorf("object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// writeJSONString quotes s as Python's json does; with ascii, non-ASCII
// characters become \uXXXX escapes (surrogate pairs above U+FFFF).
func writeJSONString(b *sbuf, s string, ascii bool) {
	b.buf = jsonread.AppendQuoted(b.buf, s, ascii)
}
