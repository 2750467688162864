// Package jsonread decodes JSON text (RFC 8259) into a small ordered tree
// and quotes strings as JSON. It is shared by the chat template engine
// and the grammar's JSON-schema converter instead of encoding/json, whose
// reflection-based machinery would be most of the JSON code in the shared
// library, and it keeps object keys in document order, which a Go map
// cannot.
package jsonread

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is a JSON value's type.
type Kind uint8

const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is one decoded JSON value.
type Value struct {
	Kind   Kind
	Offset int    // byte offset of the value in the text (for messages)
	Bool   bool   // Bool: the value
	Text   string // String: the decoded string; Number: the literal as written
	// Array: the elements; Object: the member values in document order,
	// Keys holding their keys (a repeated key is kept; the caller decides).
	Items []Value
	Keys  []string
}

// Error is malformed JSON: what is wrong and the byte offset in the text
// where it was found.
type Error struct {
	Offset int
	Msg    string
}

func (e *Error) Error() string {
	return "JSON at offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

type decoder struct {
	s        []byte
	pos      int
	maxDepth int
	buf      []byte // scratch for strings with escapes
}

// Decode decodes s, which must hold exactly one JSON value (with
// surrounding whitespace), whose values lie at most maxDepth levels deep
// (the top-level value is level 0, its elements or members level 1). Invalid UTF-8 and lone surrogate escapes in strings become U+FFFD.
// Errors are *Error.
func Decode(s []byte, maxDepth int) (Value, error) {
	d := &decoder{s: s, maxDepth: maxDepth}
	v, err := d.value(0)
	if err != nil {
		return Value{}, err
	}
	d.space()
	if d.pos < len(d.s) {
		return Value{}, d.errorf("trailing data after the top-level value")
	}
	return v, nil
}

// DecodePrefix decodes the JSON value at the start of s (after white
// space) and returns it with the number of bytes it took; what follows is
// not looked at.
func DecodePrefix(s []byte, maxDepth int) (Value, int, error) {
	d := &decoder{s: s, maxDepth: maxDepth}
	v, err := d.value(0)
	if err != nil {
		return Value{}, 0, err
	}
	return v, d.pos, nil
}

func (d *decoder) errorf(msg string) error {
	return &Error{Offset: d.pos, Msg: msg}
}

// unexpected describes the byte at the current position.
func (d *decoder) unexpected(where string) error {
	if d.pos >= len(d.s) {
		return d.errorf("unexpected end of input " + where)
	}
	r, _ := utf8.DecodeRune(d.s[d.pos:])
	return d.errorf("unexpected character " + strconv.QuoteRune(r) + " " + where)
}

func (d *decoder) space() {
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
func (d *decoder) value(depth int) (Value, error) {
	d.space()
	if depth > d.maxDepth {
		return Value{}, d.errorf("nested deeper than " + strconv.Itoa(d.maxDepth))
	}
	if d.pos >= len(d.s) {
		return Value{}, d.unexpected("looking for a value")
	}
	v := Value{Offset: d.pos}
	var err error
	switch c := d.s[d.pos]; {
	case c == '{':
		v.Kind = Object
		err = d.object(&v, depth)
	case c == '[':
		v.Kind = Array
		err = d.array(&v, depth)
	case c == '"':
		v.Kind = String
		v.Text, err = d.str()
	case c == '-' || c >= '0' && c <= '9':
		v.Kind = Number
		v.Text, err = d.number()
	case c == 't':
		v.Kind, v.Bool, err = Bool, true, d.literal("true")
	case c == 'f':
		v.Kind, err = Bool, d.literal("false")
	case c == 'n':
		v.Kind, err = Null, d.literal("null")
	default:
		err = d.unexpected("looking for a value")
	}
	if err != nil {
		return Value{}, err
	}
	return v, nil
}

func (d *decoder) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if d.pos >= len(d.s) || d.s[d.pos] != word[i] {
			return d.unexpected("in literal " + word)
		}
		d.pos++
	}
	return nil
}

func (d *decoder) array(l *Value, depth int) error {
	d.pos++ // '['
	d.space()
	if d.pos < len(d.s) && d.s[d.pos] == ']' {
		d.pos++
		return nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return err
		}
		l.Items = append(l.Items, v)
		done, err := d.afterItem(']', "after array element")
		if err != nil || done {
			return err
		}
	}
}

// afterItem reads the ',' or the closing byte that follows an array
// element or an object value; done reports the closing byte.
func (d *decoder) afterItem(closing byte, what string) (done bool, err error) {
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

func (d *decoder) object(m *Value, depth int) error {
	d.pos++ // '{'
	d.space()
	if d.pos < len(d.s) && d.s[d.pos] == '}' {
		d.pos++
		return nil
	}
	for {
		d.space()
		if d.pos >= len(d.s) || d.s[d.pos] != '"' {
			return d.unexpected("looking for an object key")
		}
		k, err := d.str()
		if err != nil {
			return err
		}
		d.space()
		if d.pos >= len(d.s) || d.s[d.pos] != ':' {
			return d.unexpected("after object key")
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return err
		}
		m.Keys = append(m.Keys, k)
		m.Items = append(m.Items, v)
		done, err := d.afterItem('}', "after object value")
		if err != nil || done {
			return err
		}
	}
}

// number scans RFC 8259's number grammar and returns the literal text.
func (d *decoder) number() (string, error) {
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
	if d.pos < len(d.s) && d.s[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return "", d.unexpected("in number")
	}
	if d.pos < len(d.s) && d.s[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return "", d.unexpected("after decimal point in number")
		}
	}
	if d.pos < len(d.s) && (d.s[d.pos] == 'e' || d.s[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.s) && (d.s[d.pos] == '+' || d.s[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return "", d.unexpected("in exponent of number")
		}
	}
	return string(d.s[start:d.pos]), nil
}

// str decodes the string at the current position (which is '"').
func (d *decoder) str() (string, error) {
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
func (d *decoder) hex4(i int) (rune, bool) {
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

// AppendQuoted appends s quoted as Python's json does (", \\, \n, \r,
// \t, \b, \f and other control characters escaped); with ascii,
// non-ASCII characters become \uXXXX escapes (surrogate pairs above
// U+FFFF). Invalid UTF-8 becomes U+FFFD.
func AppendQuoted(b []byte, s string, ascii bool) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
		default:
			switch {
			case r < 0x20 || (ascii && r >= 0x7f && r <= 0xffff):
				b = appendU4(b, r)
			case ascii && r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				b = appendU4(appendU4(b, r1), r2)
			default:
				b = utf8.AppendRune(b, r)
			}
		}
	}
	return append(b, '"')
}

// appendU4 appends the JSON escape \uXXXX (lower-case hex) of r <= 0xffff.
func appendU4(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
}
