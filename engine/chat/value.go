package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// value is a template value: nil (Python None), undef, bool, int64,
// float64, string, *list, *dict, or a callable (*macro, *builtin, *method,
// *loopInfo). Lists and dicts are references, as in Python.
type value = any

// undef is Jinja's undefined value: renders empty, is falsy, iterates
// as empty, and its attributes are undefined too.
type undef struct{ Name string }

// list is a Python list (or tuple when Tuple is set, which only changes how
// it prints).
type list struct {
	Items []value
	Tuple bool
}

// dict is an insertion-ordered mapping with scalar keys. Namespace marks
// objects made by namespace(), whose attributes "set" may assign.
type dict struct {
	keys      []value
	vals      []value
	idx       map[dictKey]int
	Namespace bool
}

type dictKey struct {
	kind byte
	s    string
}

func keyOf(v value) (dictKey, bool) {
	switch x := v.(type) {
	case string:
		return dictKey{'s', x}, true
	case int64:
		return dictKey{'n', strconv.FormatInt(x, 10)}, true
	case bool:
		if x {
			return dictKey{'n', "1"}, true
		}
		return dictKey{'n', "0"}, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e18 {
			return dictKey{'n', strconv.FormatInt(int64(x), 10)}, true
		}
		return dictKey{'f', strconv.FormatFloat(x, 'g', -1, 64)}, true
	case nil:
		return dictKey{'0', ""}, true
	}
	return dictKey{}, false
}

// newDict returns an empty dict.
func newDict() *dict { return &dict{idx: map[dictKey]int{}} }

// Set inserts or replaces key; it reports false for unhashable keys.
func (d *dict) Set(k, v value) bool {
	hk, ok := keyOf(k)
	if !ok {
		return false
	}
	if i, ok := d.idx[hk]; ok {
		d.vals[i] = v
		return true
	}
	d.idx[hk] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return true
}

// Get returns the value at key.
func (d *dict) Get(k value) (value, bool) {
	hk, ok := keyOf(k)
	if !ok {
		return nil, false
	}
	i, ok := d.idx[hk]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// setAll sets every entry of src into d, in src's order.
func (d *dict) setAll(src *dict) {
	for i := range src.keys {
		d.Set(src.keys[i], src.vals[i])
	}
}

// Len is the number of entries.
func (d *dict) Len() int { return len(d.keys) }

func (d *dict) delete(k value) {
	hk, ok := keyOf(k)
	if !ok {
		return
	}
	i, ok := d.idx[hk]
	if !ok {
		return
	}
	d.keys = append(d.keys[:i], d.keys[i+1:]...)
	d.vals = append(d.vals[:i], d.vals[i+1:]...)
	delete(d.idx, hk)
	for j := i; j < len(d.keys); j++ {
		h, _ := keyOf(d.keys[j])
		d.idx[h] = j
	}
}

func isUndefined(v value) bool {
	_, ok := v.(undef)
	return ok
}

// truthy follows Python: empty strings and containers, zero, None and
// undefined are false.
//
//go:noinline
func truthy(v value) bool {
	switch x := v.(type) {
	case nil, undef:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *list:
		return len(x.Items) > 0
	case *dict:
		return x.Len() > 0 || x.Namespace
	}
	return true
}

// toStr is Python's str() as Jinja applies it when printing.
func toStr(v value) string {
	switch x := v.(type) {
	case string:
		return x
	case undef:
		return ""
	}
	var b sbuf
	writeRepr(&b, v, false, 0)
	return b.String()
}

func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := math.Floor(math.Log10(math.Abs(f)))
	// Python's repr switches to exponent form outside [1e-4, 1e16).
	e := strconv.FormatFloat(f, 'e', -1, 64)
	if i := strings.IndexByte(e, 'e'); i >= 0 {
		if n, err := strconv.Atoi(e[i+1:]); err == nil {
			exp = float64(n)
		}
	}
	if exp < -4 || exp >= 16 {
		return e
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// writeRepr writes Python's repr (quoted=true) or str of v. It stops
// early past MaxOutput bytes or maxDepth levels (self-containing lists), so
// the caller's length check then fails instead of memory running out.
func writeRepr(b *sbuf, v value, quoted bool, depth int) {
	if b.Len() > MaxOutput {
		return
	}
	if depth > maxDepth {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case undef:
		if quoted {
			b.WriteString("Undefined")
		}
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(formatFloat(x))
	case string:
		if quoted {
			writePyStr(b, x)
		} else {
			b.WriteString(x)
		}
	case *list:
		open, close := "[", "]"
		if x.Tuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, it := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, it, true, depth+1)
		}
		if x.Tuple && len(x.Items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(close)
	case *dict:
		if x.Namespace {
			b.WriteString("<Namespace ")
		}
		b.WriteString("{")
		for i := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x.keys[i], true, depth+1)
			b.WriteString(": ")
			writeRepr(b, x.vals[i], true, depth+1)
		}
		b.WriteString("}")
		if x.Namespace {
			b.WriteString(">")
		}
	default:
		fmt.Fprintf(b, "<%s>", typeName(v))
	}
}

func writePyStr(b *sbuf, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r == utf8.RuneError:
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

func typeName(v value) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case undef:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *list:
		return "list"
	case *dict:
		return "dict"
	case *macro:
		return "macro"
	case *builtin, *method:
		return "function"
	case *loopInfo:
		return "loop"
	}
	return fmt.Sprintf("%T", v)
}

// toNumber converts bools and numbers for arithmetic.
//
//go:noinline
func toNumber(v value) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// equal is Python ==.
//
//go:noinline
func equal(a, b value) bool { return equalDepth(a, b, 0) }

func equalDepth(a, b value, depth int) bool {
	if depth > maxDepth {
		return false
	}
	if ai, af, afl, ok := toNumber(a); ok {
		if bi, bf, bfl, ok := toNumber(b); ok {
			if afl || bfl {
				return af == bf
			}
			return ai == bi
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case undef:
		return isUndefined(b)
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *list:
		y, ok := b.(*list)
		if !ok || x.Tuple != y.Tuple || len(x.Items) != len(y.Items) {
			return false
		}
		for i := range x.Items {
			if !equalDepth(x.Items[i], y.Items[i], depth+1) {
				return false
			}
		}
		return true
	case *dict:
		y, ok := b.(*dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		if x == y {
			return true
		}
		for i, k := range x.keys {
			w, ok := y.Get(k)
			if !ok || !equalDepth(x.vals[i], w, depth+1) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders numbers and strings (and lists element-wise) as Python.
//
//go:noinline
func compare(a, b value) (int, error) { return compareDepth(a, b, 0) }

func compareDepth(a, b value, depth int) (int, error) {
	if depth > maxDepth {
		return 0, errorf("%w: values nested too deeply to compare", ErrBudget)
	}
	if _, af, _, ok := toNumber(a); ok {
		if _, bf, _, ok := toNumber(b); ok {
			switch {
			case af < bf:
				return -1, nil
			case af > bf:
				return 1, nil
			}
			return 0, nil
		}
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	if x, ok := a.(*list); ok {
		if y, ok := b.(*list); ok {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				c, err := compareDepth(x.Items[i], y.Items[i], depth+1)
				if err != nil || c != 0 {
					return c, err
				}
			}
			return len(x.Items) - len(y.Items), nil
		}
	}
	return 0, errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

// iterate returns the items a for loop visits: list items, dict keys,
// string characters; undefined iterates as empty.
func iterate(v value) ([]value, error) {
	switch x := v.(type) {
	case undef:
		return nil, nil
	case *list:
		return x.Items, nil
	case *dict:
		return append([]value(nil), x.keys...), nil
	case string:
		if len(x) > maxItems {
			return nil, errorf("%w: iterating a string of %d bytes", ErrBudget, len(x))
		}
		out := make([]value, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, errorf("%s is not iterable", typeName(v))
}

func length(v value) (int, bool) {
	switch x := v.(type) {
	case undef:
		return 0, true
	case string:
		return utf8.RuneCountInString(x), true
	case *list:
		return len(x.Items), true
	case *dict:
		return x.Len(), true
	}
	return 0, false
}

// compareKey is what sort, min and max compare an item by: key's result
// (the item itself when key is nil), lower-cased unless caseSensitive.
func compareKey(key func(value) value, caseSensitive bool) func(value) value {
	return func(v value) value {
		if key != nil {
			v = key(v)
		}
		if s, ok := v.(string); ok && !caseSensitive {
			return strings.ToLower(s)
		}
		return v
	}
}

func sortValues(items []value, key func(value) value, reverse, caseSensitive bool) error {
	var err error
	keyed := compareKey(key, caseSensitive)
	sort.SliceStable(items, func(i, j int) bool {
		c, e := compare(keyed(items[i]), keyed(items[j]))
		if e != nil && err == nil {
			err = e
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	return err
}
