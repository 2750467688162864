package chat

import (
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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

// jsonDecoder decodes one JSON text into template values. It is our own
// small decoder rather than encoding/json, whose reflection-based
// machinery would be most of the JSON code in the shared library.
type jsonDecoder struct {
	s   []byte
	pos int
	buf []byte // scratch for strings with escapes
}

// decodeJSON decodes s, which must hold exactly one JSON value (with
// surrounding whitespace), into nil, bool, int64 (integers that fit),
// float64, string, *list or *dict (keys in document order; a repeated key
// keeps its first position and its last value, as Python's json does).
// Invalid UTF-8 and lone surrogate escapes in strings become U+FFFD.
func decodeJSON(s []byte) (value, error) {
	d := &jsonDecoder{s: s}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos < len(d.s) {
		return nil, d.errorf("trailing data after the value")
	}
	return v, nil
}

func (d *jsonDecoder) errorf(msg string) error {
	return &JSONError{Offset: d.pos, Msg: msg}
}

// unexpected describes the byte at the current position.
func (d *jsonDecoder) unexpected(where string) error {
	if d.pos >= len(d.s) {
		return d.errorf("unexpected end of input " + where)
	}
	r, _ := utf8.DecodeRune(d.s[d.pos:])
	return d.errorf("unexpected character " + strconv.QuoteRune(r) + " " + where)
}

func (d *jsonDecoder) space() {
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// value decodes the value at the current position; depth counts the
// enclosing arrays and objects, bounded like template nesting.
func (d *jsonDecoder) value(depth int) (value, error) {
	d.space()
	if depth > maxDepth {
		return nil, d.errorf("nested deeper than " + strconv.Itoa(maxDepth))
	}
	if d.pos >= len(d.s) {
		return nil, d.unexpected("looking for a value")
	}
	switch c := d.s[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, d.unexpected("looking for a value")
}

func (d *jsonDecoder) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if d.pos >= len(d.s) || d.s[d.pos] != word[i] {
			return d.unexpected("in literal " + word)
		}
		d.pos++
	}
	return nil
}

func (d *jsonDecoder) array(depth int) (value, error) {
	d.pos++ // '['
	l := &list{}
	d.space()
	if d.pos < len(d.s) && d.s[d.pos] == ']' {
		d.pos++
		return l, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, v)
		done, err := d.afterItem(']', "after array element")
		if err != nil {
			return nil, err
		}
		if done {
			return l, nil
		}
	}
}

// afterItem reads the ',' or the closing byte that follows an array
// element or an object value; done reports the closing byte.
func (d *jsonDecoder) afterItem(closing byte, what string) (done bool, err error) {
	d.space()
	if d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ',':
			d.pos++
			return false, nil
		case closing:
			d.pos++
			return true, nil
		}
	}
	return false, d.unexpected(what)
}

func (d *jsonDecoder) object(depth int) (value, error) {
	d.pos++ // '{'
	m := newDict()
	d.space()
	if d.pos < len(d.s) && d.s[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	for {
		d.space()
		if d.pos >= len(d.s) || d.s[d.pos] != '"' {
			return nil, d.unexpected("looking for an object key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.pos >= len(d.s) || d.s[d.pos] != ':' {
			return nil, d.unexpected("after object key")
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m.Set(k, v)
		done, err := d.afterItem('}', "after object value")
		if err != nil {
			return nil, err
		}
		if done {
			return m, nil
		}
	}
}

// number scans RFC 8259's number grammar and converts the literal text:
// an integer that fits is an int64, anything else a float64 (an error if
// out of float64's range), as json.Number's Int64 then Float64 would.
func (d *jsonDecoder) number() (value, error) {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.s) && d.s[d.pos] >= '0' && d.s[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.s[d.pos] == '-' {
		d.pos++
	}
	isInt := true
	if d.pos < len(d.s) && d.s[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return nil, d.unexpected("in number")
	}
	if d.pos < len(d.s) && d.s[d.pos] == '.' {
		d.pos++
		isInt = false
		if digits() == 0 {
			return nil, d.unexpected("after decimal point in number")
		}
	}
	if d.pos < len(d.s) && (d.s[d.pos] == 'e' || d.s[d.pos] == 'E') {
		d.pos++
		isInt = false
		if d.pos < len(d.s) && (d.s[d.pos] == '+' || d.s[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return nil, d.unexpected("in exponent of number")
		}
	}
	text := string(d.s[start:d.pos])
	if isInt {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, &JSONError{Offset: start, Msg: "number " + text + " is out of range"}
	}
	return f, nil
}

// str decodes the string at the current position (which is '"').
func (d *jsonDecoder) str() (string, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes, all valid UTF-8, no control characters.
	for d.pos < len(d.s) {
		c := d.s[d.pos]
		if c == '"' {
			s := string(d.s[start:d.pos])
			d.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		d.pos++
	}
	b := append(d.buf[:0], d.s[start:d.pos]...)
	for {
		if d.pos >= len(d.s) {
			return "", d.errorf("unterminated string")
		}
		c := d.s[d.pos]
		switch {
		case c == '"':
			d.pos++
			d.buf = b
			return string(b), nil
		case c < 0x20:
			return "", d.errorf("control character " + strconv.QuoteRune(rune(c)) + " in string")
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(d.s[d.pos:])
			b = utf8.AppendRune(b, r) // U+FFFD for an invalid byte
			d.pos += n
		case c != '\\':
			b = append(b, c)
			d.pos++
		default:
			if d.pos+1 >= len(d.s) {
				d.pos++
				return "", d.errorf("unterminated string")
			}
			e := d.s[d.pos+1]
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4(d.pos + 2)
				if !ok {
					return "", d.errorf(`invalid \u escape in string`)
				}
				d.pos += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by a low one's escape is one
					// character; any other surrogate is U+FFFD.
					if d.pos+1 < len(d.s) && d.s[d.pos] == '\\' && d.s[d.pos+1] == 'u' {
						if r2, ok := d.hex4(d.pos + 2); ok {
							if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
								r = pair
								d.pos += 6
							}
						}
					}
					if utf16.IsSurrogate(r) {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", d.errorf("invalid escape " + strconv.Quote(string(d.s[d.pos:d.pos+2])) + " in string")
			}
			d.pos += 2
		}
	}
}

// hex4 reads the four hex digits at i.
func (d *jsonDecoder) hex4(i int) (rune, bool) {
	if i+4 > len(d.s) {
		return 0, false
	}
	var r rune
	for _, c := range d.s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ascii && r >= 0x7f && r <= 0xffff):
				writeU4(b, r)
			case ascii && r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				writeU4(b, r1)
				writeU4(b, r2)
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// writeU4 writes the JSON escape \uXXXX (lower-case hex) of r <= 0xffff.
func writeU4(b *sbuf, r rune) {
	const hex = "0123456789abcdef"
	b.WriteString(`\u`)
	b.WriteByte(hex[r>>12&15])
	b.WriteByte(hex[r>>8&15])
	b.WriteByte(hex[r>>4&15])
	b.WriteByte(hex[r&15])
}
