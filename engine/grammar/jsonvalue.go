package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// object is a JSON object that keeps its keys in document order (the
// order of a schema's properties is the order of the output).
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

const (
	maxSchemaBytes = 1 << 20
	maxSchemaDepth = 64
)

// decodeOrdered decodes JSON into nil, bool, json.Number, string, []any
// and *object, bounded in size and depth.
func decodeOrdered(data []byte) (any, error) {
	if len(data) > maxSchemaBytes {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d", len(data), maxSchemaBytes)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("data after the top-level value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxSchemaDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			var a []any
			for d.More() {
				v, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			if a == nil {
				a = []any{}
			}
			return a, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return tok, nil
	}
}

// encodeCompact writes v as compact JSON, object keys in document order.
func encodeCompact(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case json.Number:
		b.WriteString(t.String())
	case string:
		b.WriteString(quoteJSON(t))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			encodeCompact(b, e)
		}
		b.WriteByte(']')
	case *object:
		b.WriteByte('{')
		for i, k := range t.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quoteJSON(k))
			b.WriteByte(':')
			encodeCompact(b, t.vals[k])
		}
		b.WriteByte('}')
	}
}

// quoteJSON is s as a JSON string, without HTML escaping.
func quoteJSON(s string) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}
