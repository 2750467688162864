package grammar

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine/internal/jsonread"
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

// number is a JSON number as written in the schema, so bounds and
// constants keep their exact digits.
type number string

// decodeOrdered decodes JSON into nil, bool, number, string, []any and
// *object, bounded in size and depth; a repeated object key is an error.
func decodeOrdered(data []byte) (any, error) {
	if len(data) > maxSchemaBytes {
		return nil, fmt.Errorf("%d bytes, more than the limit of %d", len(data), maxSchemaBytes)
	}
	v, err := jsonread.Decode(data, maxSchemaDepth)
	if err != nil {
		return nil, err
	}
	return fromJSON(v)
}

func fromJSON(v jsonread.Value) (any, error) {
	switch v.Kind {
	case jsonread.Bool:
		return v.Bool, nil
	case jsonread.Number:
		return number(v.Text), nil
	case jsonread.String:
		return v.Text, nil
	case jsonread.Array:
		a := make([]any, len(v.Items))
		for i, it := range v.Items {
			e, err := fromJSON(it)
			if err != nil {
				return nil, err
			}
			a[i] = e
		}
		return a, nil
	case jsonread.Object:
		o := &object{keys: make([]string, 0, len(v.Keys)), vals: make(map[string]any, len(v.Keys))}
		for i, k := range v.Keys {
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("JSON at offset %d: duplicate key %q", v.Items[i].Offset, k)
			}
			e, err := fromJSON(v.Items[i])
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k)
			o.vals[k] = e
		}
		return o, nil
	}
	return nil, nil
}

// encodeCompact writes v as compact JSON, object keys in document order.
func encodeCompact(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case number:
		b.WriteString(string(t))
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

// quoteJSON is s as a JSON string (no HTML escaping).
func quoteJSON(s string) string {
	return string(jsonread.AppendQuoted(nil, s, false))
}
