package chat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

type filterFunc func(r *renderer, v value, args []value, kw *dict) (value, error)
type testFunc func(v value, args []value) (bool, error)

// arg returns positional argument i or keyword name, else def.
func arg(args []value, kw *dict, i int, name string, def value) value {
	if i < len(args) {
		return args[i]
	}
	if kw != nil {
		if v, ok := kw.Get(name); ok {
			return v
		}
	}
	return def
}

func argInt(args []value, kw *dict, i int, name string, def int64) (int64, error) {
	v := arg(args, kw, i, name, def)
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		if x {
			return 1, nil
		}
		return 0, nil
	case nil:
		return def, nil
	}
	return 0, errorf("argument %s must be an integer, not %s", name, typeName(v))
}

func argStr(args []value, kw *dict, i int, name, def string) (string, error) {
	v := arg(args, kw, i, name, def)
	s, ok := v.(string)
	if !ok {
		return "", errorf("argument %s must be a string, not %s", name, typeName(v))
	}
	return s, nil
}

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"trim":       fTrim,
		"length":     fLength,
		"count":      fLength,
		"upper":      func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return strings.ToUpper(toStr(v)), nil },
		"lower":      func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return strings.ToLower(toStr(v)), nil },
		"capitalize": func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return capitalize(toStr(v)), nil },
		"title":      func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return titleFilter(toStr(v)), nil },
		"string":     func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return toStr(v), nil },
		"safe":       func(_ *renderer, v value, _ []value, _ *dict) (value, error) { return v, nil },
		"e":          fEscape,
		"escape":     fEscape,
		"tojson":     fToJSON,
		"default":    fDefault,
		"d":          fDefault,
		"first":      fFirst,
		"last":       fLast,
		"join":       fJoin,
		"replace":    fReplace,
		"list":       fList,
		"items":      fItems,
		"dictsort":   fDictsort,
		"sort":       fSort,
		"reverse":    fReverse,
		"unique":     fUnique,
		"map":        fMap,
		"select":     fSelect(true, false),
		"reject":     fSelect(false, false),
		"selectattr": fSelect(true, true),
		"rejectattr": fSelect(false, true),
		"int":        fInt,
		"float":      fFloat,
		"abs":        fAbs,
		"round":      fRound,
		"sum":        fSum,
		"min":        fMinMax(-1),
		"max":        fMinMax(1),
		"indent":     fIndent,
		"wordcount": func(_ *renderer, v value, _ []value, _ *dict) (value, error) {
			// Jinja counts runs of word characters (regex \w+).
			n, in := int64(0), false
			for _, r := range toStr(v) {
				w := r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
				if w && !in {
					n++
				}
				in = w
			}
			return n, nil
		},
		"center": func(_ *renderer, v value, args []value, kw *dict) (value, error) {
			w, err := argInt(args, kw, 0, "width", 80)
			if err != nil {
				return nil, err
			}
			s := toStr(v)
			n := int(w) - utf8.RuneCountInString(s)
			if n <= 0 || w > MaxOutput {
				return s, nil
			}
			left := n / 2
			if n%2 == 1 && int(w)%2 == 1 {
				left++
			}
			return strings.Repeat(" ", left) + s + strings.Repeat(" ", n-left), nil
		},
		"batch": fBatch,
		"format": func(_ *renderer, v value, args []value, _ *dict) (value, error) {
			return pyFormat(toStr(v), args)
		},
	}
}

// pyFormat is Python's printf-style "fmt % args" for the conversions
// templates use: s, r, d, i, f, e, g, x, X, o, c and %%, with flags, width
// and precision.
func pyFormat(f string, args []value) (value, error) {
	var b sbuf
	ai := 0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			b.WriteByte(f[i])
			continue
		}
		j := i + 1
		for j < len(f) && strings.IndexByte("-+ #0", f[j]) >= 0 {
			j++
		}
		for j < len(f) && (isDigit(f[j]) || f[j] == '.') {
			j++
		}
		if j >= len(f) {
			return nil, errorf("incomplete format")
		}
		spec, conv := f[i+1:j], f[j]
		i = j
		for _, part := range strings.Split(strings.TrimLeft(spec, "-+ #0"), ".") {
			if len(part) > 4 {
				return nil, errorf("format width or precision %q too large", spec)
			}
		}
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if ai >= len(args) {
			return nil, errorf("not enough arguments for format string")
		}
		a := args[ai]
		ai++
		switch conv {
		case 's':
			fmt.Fprintf(&b, "%"+spec+"s", toStr(a))
		case 'r':
			var rb sbuf
			writeRepr(&rb, a, true, 0)
			fmt.Fprintf(&b, "%"+spec+"s", rb.String())
		case 'd', 'i', 'x', 'X', 'o', 'c':
			n, fv, isF, ok := toNumber(a)
			if !ok {
				return nil, errorf("%%%c format: a number is required, not %s", conv, typeName(a))
			}
			if isF {
				n = int64(fv)
			}
			c := conv
			if c == 'i' {
				c = 'd'
			}
			fmt.Fprintf(&b, "%"+spec+string(c), n)
		case 'f', 'F', 'e', 'E', 'g', 'G':
			_, fv, _, ok := toNumber(a)
			if !ok {
				return nil, errorf("%%%c format: a number is required, not %s", conv, typeName(a))
			}
			if !strings.Contains(spec, ".") && (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E') {
				spec += ".6"
			}
			fmt.Fprintf(&b, "%"+spec+string(conv), fv)
		default:
			return nil, errorf("unsupported format character %q", conv)
		}
		if err := checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	if ai < len(args) {
		return nil, errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func fTrim(_ *renderer, v value, args []value, kw *dict) (value, error) {
	s := toStr(v)
	chars := arg(args, kw, 0, "chars", nil)
	if c, ok := chars.(string); ok {
		return strings.Trim(s, c), nil
	}
	return strings.TrimFunc(s, unicode.IsSpace), nil
}

func fLength(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	n, ok := length(v)
	if !ok {
		return nil, errorf("object of type %s has no length", typeName(v))
	}
	return int64(n), nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

// title upper-cases the first letter of each word, as Python's str.title.
func title(s string) string {
	var b sbuf
	prevLetter := false
	for _, r := range s {
		if unicode.IsLetter(r) {
			if prevLetter {
				b.WriteRune(unicode.ToLower(r))
			} else {
				b.WriteRune(unicode.ToUpper(r))
			}
			prevLetter = true
		} else {
			b.WriteRune(r)
			prevLetter = false
		}
	}
	return b.String()
}

// titleFilter is Jinja's title filter, which (unlike str.title) starts
// words only after whitespace, '-', and opening brackets: "x,y" -> "X,y".
func titleFilter(s string) string {
	var b sbuf
	start := true
	for _, r := range s {
		if unicode.IsSpace(r) || strings.ContainsRune("-({[<", r) {
			b.WriteRune(r)
			start = true
			continue
		}
		if start {
			b.WriteRune(unicode.ToUpper(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		start = false
	}
	return b.String()
}

func fEscape(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(toStr(v)), nil
}

func fDefault(_ *renderer, v value, args []value, kw *dict) (value, error) {
	def := arg(args, kw, 0, "default_value", "")
	boolean := truthy(arg(args, kw, 1, "boolean", false))
	if isUndefined(v) || (boolean && !truthy(v)) {
		return def, nil
	}
	return v, nil
}

func fFirst(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return undef{}, nil
	}
	return items[0], nil
}

func fLast(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return undef{}, nil
	}
	return items[len(items)-1], nil
}

func fJoin(_ *renderer, v value, args []value, kw *dict) (value, error) {
	sep, err := argStr(args, kw, 0, "d", "")
	if err != nil {
		return nil, err
	}
	attr := arg(args, kw, 1, "attribute", nil)
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var b sbuf
	for i, it := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		if attr != nil {
			it = getItem(it, attr)
		}
		b.WriteString(toStr(it))
		if err := checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func fReplace(_ *renderer, v value, args []value, kw *dict) (value, error) {
	old, err := argStr(args, kw, 0, "old", "")
	if err != nil {
		return nil, err
	}
	nw, err := argStr(args, kw, 1, "new", "")
	if err != nil {
		return nil, err
	}
	n, err := argInt(args, kw, 2, "count", -1)
	if err != nil {
		return nil, err
	}
	return replaceStr(toStr(v), old, nw, n)
}

func replaceStr(s, old, nw string, n int64) (value, error) {
	if old == "" && n < 0 {
		// Python inserts new around every character; bound the result.
		if err := checkLen(len(s) + (utf8.RuneCountInString(s)+1)*len(nw)); err != nil {
			return nil, err
		}
	} else if old != "" {
		c := strings.Count(s, old)
		if err := checkLen(len(s) + c*(len(nw)-len(old))); err != nil {
			return nil, err
		}
	}
	if n > math.MaxInt32 {
		n = -1
	}
	return strings.Replace(s, old, nw, int(n)), nil
}

func fList(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	return &list{Items: append([]value(nil), items...)}, nil
}

func dictItems(d *dict) *list {
	out := make([]value, d.Len())
	for i := range d.keys {
		out[i] = &list{Items: []value{d.keys[i], d.vals[i]}, Tuple: true}
	}
	return &list{Items: out}
}

func fItems(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	switch x := v.(type) {
	case *dict:
		return dictItems(x), nil
	case undef:
		return &list{}, nil
	}
	return nil, errorf("can only get items from a mapping, not %s", typeName(v))
}

func fDictsort(_ *renderer, v value, args []value, kw *dict) (value, error) {
	d, ok := v.(*dict)
	if !ok {
		return nil, errorf("dictsort expects a mapping, not %s", typeName(v))
	}
	cs := truthy(arg(args, kw, 0, "case_sensitive", false))
	by, _ := arg(args, kw, 1, "by", "key").(string)
	rev := truthy(arg(args, kw, 2, "reverse", false))
	l := dictItems(d)
	pos := int64(0)
	if by == "value" {
		pos = 1
	}
	err := sortValues(l.Items, func(x value) value { return x.(*list).Items[pos] }, rev, cs)
	return l, err
}

func attrGetter(attr value) func(value) value {
	s, ok := attr.(string)
	if !ok {
		return func(v value) value { return getItem(v, attr) }
	}
	parts := strings.Split(s, ".")
	return func(v value) value {
		for _, p := range parts {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil {
				v = getItem(v, n)
			} else {
				v = getItem(v, p)
			}
		}
		return v
	}
}

func fSort(_ *renderer, v value, args []value, kw *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	items = append([]value(nil), items...)
	rev := truthy(arg(args, kw, 0, "reverse", false))
	cs := truthy(arg(args, kw, 1, "case_sensitive", false))
	var key func(value) value
	if a := arg(args, kw, 2, "attribute", nil); a != nil {
		key = attrGetter(a)
	}
	return &list{Items: items}, sortValues(items, key, rev, cs)
}

func fReverse(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]value, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return &list{Items: out}, nil
}

func fUnique(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	// Case-insensitive, as Jinja's default; hashable values go through a
	// set so large lists stay linear.
	seen := map[dictKey]bool{}
	var out, unhashable []value
	for _, it := range items {
		k := it
		if s, ok := k.(string); ok {
			k = strings.ToLower(s)
		}
		if hk, ok := keyOf(k); ok {
			if !seen[hk] {
				seen[hk] = true
				out = append(out, it)
			}
			continue
		}
		dup := false
		for _, o := range unhashable {
			if equal(o, it) {
				dup = true
				break
			}
		}
		if !dup {
			unhashable = append(unhashable, it)
			out = append(out, it)
		}
	}
	return &list{Items: out}, nil
}

func fMap(r *renderer, v value, args []value, kw *dict) (value, error) {
	if !truthy(v) {
		// Jinja skips a falsy input (none included) without iterating it.
		return &list{}, nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]value, len(items))
	if a := arg(nil, kw, 0, "attribute", nil); a != nil {
		get := attrGetter(a)
		def, hasDef := value(nil), false
		if kw != nil {
			def, hasDef = kw.Get("default")
		}
		for i, it := range items {
			out[i] = get(it)
			if hasDef && isUndefined(out[i]) {
				out[i] = def
			}
		}
		return &list{Items: out}, nil
	}
	if len(args) == 0 {
		return nil, errorf("map needs a filter name or attribute=")
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, errorf("map filter name must be a string")
	}
	f, ok := filters[name]
	if !ok {
		return nil, errorf("unknown filter %q", name)
	}
	for i, it := range items {
		if out[i], err = f(r, it, args[1:], kw); err != nil {
			return nil, err
		}
	}
	return &list{Items: out}, nil
}

// fSelect makes select, reject, selectattr and rejectattr. It is not
// inlined so the four share one copy of the closure's code.
//
//go:noinline
func fSelect(keep, byAttr bool) filterFunc {
	return func(_ *renderer, v value, args []value, kw *dict) (value, error) {
		if !truthy(v) {
			// Jinja skips a falsy input (none included) without iterating it.
			return &list{}, nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		var get func(value) value
		if byAttr {
			if len(args) == 0 {
				return nil, errorf("missing attribute name")
			}
			get = attrGetter(args[0])
			args = args[1:]
		}
		var test testFunc
		if len(args) > 0 {
			name, ok := args[0].(string)
			if !ok {
				return nil, errorf("test name must be a string")
			}
			if test, ok = tests[name]; !ok {
				return nil, errorf("unknown test %q", name)
			}
			args = args[1:]
		}
		var out []value
		for _, it := range items {
			x := it
			if get != nil {
				x = get(it)
			}
			ok := truthy(x)
			if test != nil {
				if ok, err = test(x, args); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out = append(out, it)
			}
		}
		return &list{Items: out}, nil
	}
}

func fInt(_ *renderer, v value, args []value, kw *dict) (value, error) {
	def := arg(args, kw, 0, "default", int64(0))
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return def, nil
		}
		return int64(x), nil
	case string:
		s := strings.TrimSpace(x)
		if i, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
			return i, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return int64(f), nil
		}
	}
	return def, nil
}

func fFloat(_ *renderer, v value, args []value, kw *dict) (value, error) {
	def := arg(args, kw, 0, "default", 0.0)
	if _, f, _, ok := toNumber(v); ok {
		return f, nil
	}
	if s, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			return f, nil
		}
	}
	return def, nil
}

func fAbs(_ *renderer, v value, _ []value, _ *dict) (value, error) {
	if b, ok := v.(bool); ok {
		v, _, _, _ = toNumber(b)
	}
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, errorf("bad operand type for abs(): %s", typeName(v))
}

func fRound(_ *renderer, v value, args []value, kw *dict) (value, error) {
	prec, err := argInt(args, kw, 0, "precision", 0)
	if err != nil {
		return nil, err
	}
	method, _ := arg(args, kw, 1, "method", "common").(string)
	_, f, _, ok := toNumber(v)
	if !ok {
		return nil, errorf("cannot round %s", typeName(v))
	}
	if prec > 15 {
		prec = 15
	}
	if prec < -15 {
		prec = -15
	}
	m := math.Pow(10, float64(prec))
	switch method {
	case "ceil":
		return math.Ceil(f*m) / m, nil
	case "floor":
		return math.Floor(f*m) / m, nil
	}
	// Python's round: an int stays an int; a float rounds its exact
	// binary value to prec decimals, ties to even (strconv does the same).
	if _, isFloat := v.(float64); !isFloat && prec >= 0 {
		i, _, _, _ := toNumber(v)
		return i, nil
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f, nil
	}
	if prec < 0 {
		return math.RoundToEven(f/math.Pow(10, float64(-prec))) * math.Pow(10, float64(-prec)), nil
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(prec), 64), 64)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func fSum(_ *renderer, v value, args []value, kw *dict) (value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	var get func(value) value
	if a := arg(args, kw, 0, "attribute", nil); a != nil {
		get = attrGetter(a)
	}
	acc := arg(args, kw, 1, "start", int64(0))
	for _, it := range items {
		if get != nil {
			it = get(it)
		}
		if acc, err = arith("+", acc, it); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// fMinMax makes min and max (one closure body for both: not inlined).
//
//go:noinline
func fMinMax(sign int) filterFunc {
	return func(_ *renderer, v value, args []value, kw *dict) (value, error) {
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undef{}, nil
		}
		cs := truthy(arg(args, kw, 0, "case_sensitive", false))
		var get func(value) value
		if a := arg(args, kw, 1, "attribute", nil); a != nil {
			get = attrGetter(a)
		}
		key := func(x value) value {
			if get != nil {
				x = get(x)
			}
			if s, ok := x.(string); ok && !cs {
				return strings.ToLower(s)
			}
			return x
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := compare(key(it), key(best))
			if err != nil {
				return nil, err
			}
			if c*sign > 0 {
				best = it
			}
		}
		return best, nil
	}
}

func fIndent(_ *renderer, v value, args []value, kw *dict) (value, error) {
	var pad string
	switch w := arg(args, kw, 0, "width", int64(4)).(type) {
	case int64:
		if w < 0 || w > 1024 {
			return nil, errorf("indent width %d out of range", w)
		}
		pad = strings.Repeat(" ", int(w))
	case string:
		pad = w
	default:
		return nil, errorf("indent width must be an integer or string")
	}
	first := truthy(arg(args, kw, 1, "first", false))
	blank := truthy(arg(args, kw, 2, "blank", false))
	s := toStr(v)
	lines := strings.Split(s, "\n")
	var b sbuf
	for i, ln := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if (i > 0 || first) && (blank || strings.TrimSpace(ln) != "") {
			b.WriteString(pad)
		}
		b.WriteString(ln)
		if err := checkLen(b.Len()); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

func fBatch(_ *renderer, v value, args []value, kw *dict) (value, error) {
	n, err := argInt(args, kw, 0, "linecount", 1)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, errorf("batch size must be positive")
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	fill, hasFill := value(nil), len(args) > 1
	if hasFill {
		fill = args[1]
	}
	var out []value
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		row := append([]value(nil), items[i:end]...)
		for hasFill && len(row) < int(n) {
			row = append(row, fill)
		}
		out = append(out, &list{Items: row})
	}
	return &list{Items: out}, nil
}

// jsonOpts are json.dumps's options as Hugging Face's tojson passes them.
type jsonOpts struct {
	indent          string
	hasIndent       bool
	itemSep, keySep string
	sortKeys        bool
	ascii           bool
}

// fToJSON is Hugging Face's tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), arguments in that order,
// keys in insertion order.
func fToJSON(_ *renderer, v value, args []value, kw *dict) (value, error) {
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	o.ascii = truthy(arg(args, kw, 0, "ensure_ascii", false))
	switch x := arg(args, kw, 1, "indent", nil).(type) {
	case int64:
		if x > 1024 {
			return nil, errorf("indent %d out of range", x)
		}
		o.indent = strings.Repeat(" ", int(max(x, 0)))
		o.hasIndent = true
	case string:
		o.indent, o.hasIndent = x, true
	case nil:
	default:
		return nil, errorf("indent must be an integer or string")
	}
	if o.hasIndent {
		o.itemSep = ","
	}
	switch x := arg(args, kw, 2, "separators", nil).(type) {
	case *list:
		if len(x.Items) != 2 {
			return nil, errorf("separators must be a pair of strings")
		}
		is, ok1 := x.Items[0].(string)
		ks, ok2 := x.Items[1].(string)
		if !ok1 || !ok2 {
			return nil, errorf("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = is, ks
	case nil:
	default:
		return nil, errorf("separators must be a pair of strings")
	}
	o.sortKeys = truthy(arg(args, kw, 3, "sort_keys", false))
	var b sbuf
	if err := writeJSON(&b, v, &o, 0); err != nil {
		return nil, err
	}
	return b.String(), nil
}

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

var tests map[string]testFunc

// cmpTest makes the comparison tests (eq, lt, ...); not inlined, so they
// share one closure body.
//
//go:noinline
func cmpTest(op string) testFunc {
	return func(v value, args []value) (bool, error) {
		if len(args) != 1 {
			return false, errorf("needs one argument")
		}
		return compareOp(op, v, args[0])
	}
}

func init() {
	tests = map[string]testFunc{
		"defined":   func(v value, _ []value) (bool, error) { return !isUndefined(v), nil },
		"undefined": func(v value, _ []value) (bool, error) { return isUndefined(v), nil },
		"none":      func(v value, _ []value) (bool, error) { return v == nil, nil },
		"string":    func(v value, _ []value) (bool, error) { return isStr(v), nil },
		"boolean": func(v value, _ []value) (bool, error) {
			_, ok := v.(bool)
			return ok, nil
		},
		"true":  func(v value, _ []value) (bool, error) { return v == true, nil },
		"false": func(v value, _ []value) (bool, error) { return v == false, nil },
		"number": func(v value, _ []value) (bool, error) {
			_, _, _, ok := toNumber(v)
			return ok, nil
		},
		"integer": func(v value, _ []value) (bool, error) {
			_, ok := v.(int64)
			return ok, nil
		},
		"float": func(v value, _ []value) (bool, error) {
			_, ok := v.(float64)
			return ok, nil
		},
		"mapping": func(v value, _ []value) (bool, error) {
			d, ok := v.(*dict)
			return ok && !d.Namespace, nil
		},
		"iterable": func(v value, _ []value) (bool, error) {
			switch v.(type) {
			case string, *list, undef:
				return true, nil
			case *dict:
				return !v.(*dict).Namespace, nil
			}
			return false, nil
		},
		"sequence": func(v value, _ []value) (bool, error) {
			switch v.(type) {
			case string, *list, *dict:
				return true, nil
			}
			return false, nil
		},
		"callable": func(v value, _ []value) (bool, error) {
			switch v.(type) {
			case *macro, *builtin, *method:
				return true, nil
			}
			return false, nil
		},
		"odd": func(v value, _ []value) (bool, error) {
			m, err := arith("%", v, int64(2))
			return err == nil && equal(m, int64(1)), err
		},
		"even": func(v value, _ []value) (bool, error) {
			m, err := arith("%", v, int64(2))
			return err == nil && equal(m, int64(0)), err
		},
		"divisibleby": func(v value, args []value) (bool, error) {
			if len(args) != 1 {
				return false, errorf("needs one argument")
			}
			m, err := arith("%", v, args[0])
			if err != nil {
				return false, err
			}
			return equal(m, int64(0)), nil
		},
		"lower": func(v value, _ []value) (bool, error) {
			return pyCased(toStr(v), unicode.IsLower, unicode.IsUpper), nil
		},
		"upper": func(v value, _ []value) (bool, error) {
			return pyCased(toStr(v), unicode.IsUpper, unicode.IsLower), nil
		},
		"sameas": func(v value, args []value) (bool, error) {
			if len(args) != 1 {
				return false, errorf("needs one argument")
			}
			switch a := v.(type) {
			case *list, *dict:
				return v == args[0], nil
			case nil, bool:
				return args[0] == a, nil
			}
			return equal(v, args[0]), nil
		},
		"in": func(v value, args []value) (bool, error) {
			if len(args) != 1 {
				return false, errorf("needs one argument")
			}
			return contains(args[0], v)
		},
		"eq": cmpTest("=="), "equalto": cmpTest("=="), "ne": cmpTest("!="),
		"lt": cmpTest("<"), "lessthan": cmpTest("<"), "le": cmpTest("<="),
		"gt": cmpTest(">"), "greaterthan": cmpTest(">"), "ge": cmpTest(">="),
	}
}

// pyCased is Python's str.islower/isupper: some cased character, and none
// of the other case.
func pyCased(s string, want, other func(rune) bool) bool {
	seen := false
	for _, r := range s {
		if other(r) || unicode.IsTitle(r) {
			return false
		}
		if want(r) {
			seen = true
		}
	}
	return seen
}

var globals map[string]value

func init() {
	globals = map[string]value{
		"range":           &builtin{name: "range", fn: gRange},
		"namespace":       &builtin{name: "namespace", fn: gNamespace},
		"dict":            &builtin{name: "dict", fn: gDict},
		"raise_exception": &builtin{name: "raise_exception", fn: gRaise},
		"strftime_now":    &builtin{name: "strftime_now", fn: gStrftimeNow},
		"joiner":          &builtin{name: "joiner", fn: gJoiner},
	}
}

// gJoiner is Jinja's joiner(sep=", "): a callable that returns "" the first
// time and sep afterwards.
func gJoiner(_ *renderer, args []value, kw *dict) (value, error) {
	sep, err := argStr(args, kw, 0, "sep", ", ")
	if err != nil {
		return nil, err
	}
	used := false
	return &builtin{name: "joiner", fn: func(*renderer, []value, *dict) (value, error) {
		if !used {
			used = true
			return "", nil
		}
		return sep, nil
	}}, nil
}

func gRange(_ *renderer, args []value, _ *dict) (value, error) {
	var ns [3]int64
	ns[2] = 1
	if len(args) == 0 || len(args) > 3 {
		return nil, errorf("range expects 1 to 3 arguments, got %d", len(args))
	}
	for i, a := range args {
		n, ok := a.(int64)
		if !ok {
			return nil, errorf("range arguments must be integers, not %s", typeName(a))
		}
		ns[i] = n
	}
	start, stop, step := int64(0), ns[0], int64(1)
	if len(args) >= 2 {
		start, stop = ns[0], ns[1]
	}
	if len(args) == 3 {
		step = ns[2]
	}
	if step == 0 {
		return nil, errorf("range step must not be zero")
	}
	// Unsigned arithmetic: stop-start and -step overflow int64 at the
	// extremes (range(-2**63, 2**63-1) made a negative length).
	var count uint64
	if step > 0 && stop > start {
		count = (uint64(stop-start)-1)/uint64(step) + 1
	} else if step < 0 && stop < start {
		count = (uint64(start-stop)-1)/(-uint64(step)) + 1
	}
	if count > maxItems {
		return nil, errorf("%w: range of %d items", ErrBudget, count)
	}
	out := make([]value, count)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return &list{Items: out}, nil
}

func gNamespace(_ *renderer, args []value, kw *dict) (value, error) {
	d := newDict()
	d.Namespace = true
	for _, a := range args {
		src, ok := a.(*dict)
		if !ok {
			return nil, errorf("namespace() positional arguments must be mappings")
		}
		for i := range src.keys {
			d.Set(src.keys[i], src.vals[i])
		}
	}
	if kw != nil {
		for i := range kw.keys {
			d.Set(kw.keys[i], kw.vals[i])
		}
	}
	return d, nil
}

func gDict(_ *renderer, args []value, kw *dict) (value, error) {
	d := newDict()
	for _, a := range args {
		src, ok := a.(*dict)
		if !ok {
			return nil, errorf("dict() positional arguments must be mappings")
		}
		for i := range src.keys {
			d.Set(src.keys[i], src.vals[i])
		}
	}
	if kw != nil {
		for i := range kw.keys {
			d.Set(kw.keys[i], kw.vals[i])
		}
	}
	return d, nil
}

func gRaise(_ *renderer, args []value, _ *dict) (value, error) {
	msg := ""
	if len(args) > 0 {
		msg = toStr(args[0])
	}
	return nil, &ExceptionError{Message: msg}
}

// nowFunc is the clock strftime_now reads; tests replace it.
var nowFunc = time.Now

func gStrftimeNow(_ *renderer, args []value, _ *dict) (value, error) {
	if len(args) != 1 {
		return nil, errorf("strftime_now expects one format argument")
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, errorf("strftime_now format must be a string")
	}
	return strftime(nowFunc(), f), nil
}

// strftime formats t with the C/Python directives templates use. It
// appends to a byte slice through small helpers rather than fmt or
// strings.Builder, whose inlined calls made it several times larger.
func strftime(t time.Time, f string) string {
	b := make([]byte, 0, len(f)+16)
	year, month, day := t.Date()
	hour, minute, second := t.Clock()
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			b = append(b, c)
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			b = appendInt(b, year, 4, '0')
		case 'y':
			b = appendInt(b, year%100, 2, '0')
		case 'm':
			b = appendInt(b, int(month), 2, '0')
		case 'd':
			b = appendInt(b, day, 2, '0')
		case 'e':
			b = appendInt(b, day, 2, ' ')
		case '-':
			// %-d, %-m: no padding (glibc extension)
			if i+1 < len(f) {
				i++
				switch f[i] {
				case 'd':
					b = appendInt(b, day, 0, '0')
				case 'm':
					b = appendInt(b, int(month), 0, '0')
				case 'H':
					b = appendInt(b, hour, 0, '0')
				case 'I':
					b = appendInt(b, (hour+11)%12+1, 0, '0')
				default:
					b = append(b, '%', '-', f[i])
				}
			}
		case 'H':
			b = appendInt(b, hour, 2, '0')
		case 'I':
			b = appendInt(b, (hour+11)%12+1, 2, '0')
		case 'M':
			b = appendInt(b, minute, 2, '0')
		case 'S':
			b = appendInt(b, second, 2, '0')
		case 'p':
			if hour < 12 {
				b = append(b, "AM"...)
			} else {
				b = append(b, "PM"...)
			}
		case 'B':
			b = append(b, monthNames[month-1]...)
		case 'b', 'h':
			b = append(b, monthNames[month-1][:3]...)
		case 'A':
			b = append(b, dayNames[t.Weekday()]...)
		case 'a':
			b = append(b, dayNames[t.Weekday()][:3]...)
		case 'j':
			b = appendInt(b, t.YearDay(), 3, '0')
		case 'Z':
			z, _ := t.Zone()
			b = append(b, z...)
		case '%':
			b = append(b, '%')
		default:
			b = append(b, '%', f[i])
		}
	}
	return string(b)
}

// English names, as Python's strftime prints them in the C locale.
var (
	monthNames = [12]string{"January", "February", "March", "April", "May", "June",
		"July", "August", "September", "October", "November", "December"}
	dayNames = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
)

// appendInt appends n in decimal, padded to width with pad as printf's
// %0Nd or %Nd would (a zero-padded minus sign comes first). Not inlined:
// strftime calls it at many places.
//
//go:noinline
func appendInt(b []byte, n, width int, pad byte) []byte {
	var digits [20]byte
	s := strconv.AppendInt(digits[:0], int64(n), 10)
	if pad == '0' && n < 0 {
		b = append(b, '-')
		s = s[1:]
		width--
	}
	for i := len(s); i < width; i++ {
		b = append(b, pad)
	}
	return append(b, s...)
}

var strMethods = map[string]struct{}{
	"strip": {}, "lstrip": {}, "rstrip": {}, "startswith": {}, "endswith": {}, "split": {}, "rsplit": {},
	"replace": {}, "upper": {}, "lower": {}, "title": {}, "capitalize": {}, "find": {}, "rfind": {},
	"count": {}, "join": {}, "splitlines": {}, "isdigit": {}, "isspace": {}, "isalpha": {}, "format": {},
}

var dictMethods = map[string]struct{}{"items": {}, "keys": {}, "values": {}, "get": {}, "update": {}, "pop": {}, "copy": {}}

var listMethods = map[string]struct{}{"append": {}, "pop": {}, "index": {}, "count": {}, "extend": {}, "insert": {}, "copy": {}}

func stripArg(args []value) (string, bool, error) {
	if len(args) == 0 || args[0] == nil {
		return "", false, nil
	}
	s, ok := args[0].(string)
	if !ok {
		return "", false, errorf("strip argument must be a string or None")
	}
	return s, true, nil
}

func callMethod(r *renderer, m *method, args []value, kw *dict) (value, error) {
	switch x := m.recv.(type) {
	case string:
		return strMethod(x, m.name, args, kw)
	case *dict:
		return dictMethod(x, m.name, args)
	case *list:
		return listMethod(x, m.name, args)
	case *loopInfo:
		if len(args) == 0 {
			return nil, errorf("loop.cycle needs at least one argument")
		}
		return args[x.index0%len(args)], nil
	}
	return nil, errorf("no method %s on %s", m.name, typeName(m.recv))
}

func strMethod(s, name string, args []value, kw *dict) (value, error) {
	switch name {
	case "strip", "lstrip", "rstrip":
		chars, has, err := stripArg(args)
		if err != nil {
			return nil, err
		}
		switch {
		case name == "strip" && has:
			return strings.Trim(s, chars), nil
		case name == "strip":
			return strings.TrimFunc(s, unicode.IsSpace), nil
		case name == "lstrip" && has:
			return strings.TrimLeft(s, chars), nil
		case name == "lstrip":
			return strings.TrimLeftFunc(s, unicode.IsSpace), nil
		case has:
			return strings.TrimRight(s, chars), nil
		}
		return strings.TrimRightFunc(s, unicode.IsSpace), nil
	case "startswith", "endswith":
		if len(args) != 1 {
			return nil, errorf("%s expects one argument", name)
		}
		var cands []value
		switch a := args[0].(type) {
		case string:
			cands = []value{a}
		case *list:
			cands = a.Items
		default:
			return nil, errorf("%s argument must be a string or tuple, not %s", name, typeName(args[0]))
		}
		for _, c := range cands {
			cs, ok := c.(string)
			if !ok {
				return nil, errorf("%s tuple must contain strings", name)
			}
			if (name == "startswith" && strings.HasPrefix(s, cs)) || (name == "endswith" && strings.HasSuffix(s, cs)) {
				return true, nil
			}
		}
		return false, nil
	case "split", "rsplit":
		sepV := arg(args, kw, 0, "sep", nil)
		n, err := argInt(args, kw, 1, "maxsplit", -1)
		if err != nil {
			return nil, err
		}
		var parts []string
		if sepV == nil {
			parts = splitWhitespace(s, n, name == "rsplit")
		} else {
			sep, ok := sepV.(string)
			if !ok {
				return nil, errorf("split separator must be a string")
			}
			if sep == "" {
				return nil, errorf("empty separator")
			}
			if n < 0 {
				parts = strings.Split(s, sep)
			} else if name == "split" {
				parts = strings.SplitN(s, sep, int(min(n, math.MaxInt32))+1)
			} else {
				parts = rsplitN(s, sep, int(min(n, math.MaxInt32)))
			}
		}
		out := make([]value, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return &list{Items: out}, nil
	case "splitlines":
		lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		out := make([]value, len(lines))
		for i, p := range lines {
			out[i] = p
		}
		return &list{Items: out}, nil
	case "replace":
		if len(args) < 2 {
			return nil, errorf("replace expects two arguments")
		}
		old, ok1 := args[0].(string)
		nw, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return nil, errorf("replace arguments must be strings")
		}
		n, err := argInt(args, kw, 2, "count", -1)
		if err != nil {
			return nil, err
		}
		return replaceStr(s, old, nw, n)
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return title(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "find", "rfind", "count":
		if len(args) < 1 {
			return nil, errorf("%s expects an argument", name)
		}
		sub, ok := args[0].(string)
		if !ok {
			return nil, errorf("%s argument must be a string", name)
		}
		var i int
		switch name {
		case "find":
			i = strings.Index(s, sub)
		case "rfind":
			i = strings.LastIndex(s, sub)
		default:
			return int64(strings.Count(s, sub)), nil
		}
		if i < 0 {
			return int64(-1), nil
		}
		return int64(utf8.RuneCountInString(s[:i])), nil
	case "join":
		if len(args) != 1 {
			return nil, errorf("join expects one argument")
		}
		return fJoin(nil, args[0], []value{s}, nil)
	case "isdigit", "isspace", "isalpha":
		if s == "" {
			return false, nil
		}
		f := map[string]func(rune) bool{"isdigit": unicode.IsDigit, "isspace": unicode.IsSpace, "isalpha": unicode.IsLetter}[name]
		for _, r := range s {
			if !f(r) {
				return false, nil
			}
		}
		return true, nil
	case "format":
		// Positional "{}" substitution only.
		var b sbuf
		ai := 0
		for i := 0; i < len(s); i++ {
			if strings.HasPrefix(s[i:], "{}") && ai < len(args) {
				b.WriteString(toStr(args[ai]))
				if err := checkLen(b.Len()); err != nil {
					return nil, err
				}
				ai++
				i++
				continue
			}
			b.WriteByte(s[i])
		}
		return b.String(), nil
	}
	return nil, errorf("str has no method %s", name)
}

func splitWhitespace(s string, n int64, fromRight bool) []string {
	fields := strings.Fields(s)
	if n < 0 || int64(len(fields)) <= n+1 {
		return fields
	}
	if !fromRight {
		// Re-find the remainder of s after n fields.
		rest := s
		out := make([]string, 0, n+1)
		for i := int64(0); i < n; i++ {
			rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
			j := strings.IndexFunc(rest, unicode.IsSpace)
			out = append(out, rest[:j])
			rest = rest[j:]
		}
		return append(out, strings.TrimLeftFunc(rest, unicode.IsSpace))
	}
	rest := s
	var out []string
	for i := int64(0); i < n; i++ {
		rest = strings.TrimRightFunc(rest, unicode.IsSpace)
		j := strings.LastIndexFunc(rest, unicode.IsSpace)
		out = append([]string{rest[j+1:]}, out...)
		rest = rest[:j+1]
	}
	return append([]string{strings.TrimRightFunc(rest, unicode.IsSpace)}, out...)
}

func rsplitN(s, sep string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		j := strings.LastIndex(s, sep)
		if j < 0 {
			break
		}
		out = append([]string{s[j+len(sep):]}, out...)
		s = s[:j]
	}
	return append([]string{s}, out...)
}

func dictMethod(d *dict, name string, args []value) (value, error) {
	switch name {
	case "items":
		return dictItems(d), nil
	case "keys":
		return &list{Items: append([]value(nil), d.keys...)}, nil
	case "values":
		return &list{Items: append([]value(nil), d.vals...)}, nil
	case "get":
		if len(args) < 1 {
			return nil, errorf("get expects a key")
		}
		if v, ok := d.Get(args[0]); ok {
			return v, nil
		}
		if len(args) > 1 {
			return args[1], nil
		}
		return nil, nil
	case "pop":
		if len(args) < 1 {
			return nil, errorf("pop expects a key")
		}
		if v, ok := d.Get(args[0]); ok {
			d.delete(args[0])
			return v, nil
		}
		if len(args) > 1 {
			return args[1], nil
		}
		return nil, errorf("key %s not found", toStr(args[0]))
	case "update":
		for _, a := range args {
			src, ok := a.(*dict)
			if !ok {
				return nil, errorf("update expects a mapping")
			}
			for i := range src.keys {
				d.Set(src.keys[i], src.vals[i])
			}
		}
		return nil, nil
	case "copy":
		c := newDict()
		for i := range d.keys {
			c.Set(d.keys[i], d.vals[i])
		}
		return c, nil
	}
	return nil, errorf("dict has no method %s", name)
}

func listMethod(l *list, name string, args []value) (value, error) {
	switch name {
	case "append":
		if len(args) != 1 {
			return nil, errorf("append expects one argument")
		}
		if len(l.Items) >= maxItems {
			return nil, errorf("%w: list longer than %d", ErrBudget, maxItems)
		}
		l.Items = append(l.Items, args[0])
		return nil, nil
	case "extend":
		if len(args) != 1 {
			return nil, errorf("extend expects one argument")
		}
		items, err := iterate(args[0])
		if err != nil {
			return nil, err
		}
		if len(l.Items)+len(items) > maxItems {
			return nil, errorf("%w: list longer than %d", ErrBudget, maxItems)
		}
		l.Items = append(l.Items, items...)
		return nil, nil
	case "insert":
		if len(args) != 2 {
			return nil, errorf("insert expects two arguments")
		}
		i, ok := args[0].(int64)
		if !ok {
			return nil, errorf("insert index must be an integer")
		}
		n := int64(len(l.Items))
		if i < 0 {
			i = max(i+n, 0)
		}
		i = min(i, n)
		l.Items = append(l.Items, nil)
		copy(l.Items[i+1:], l.Items[i:])
		l.Items[i] = args[1]
		return nil, nil
	case "pop":
		if len(l.Items) == 0 {
			return nil, errorf("pop from empty list")
		}
		i := int64(len(l.Items) - 1)
		if len(args) > 0 {
			j, ok := args[0].(int64)
			if !ok {
				return nil, errorf("pop index must be an integer")
			}
			if j < 0 {
				j += int64(len(l.Items))
			}
			if j < 0 || j >= int64(len(l.Items)) {
				return nil, errorf("pop index out of range")
			}
			i = j
		}
		v := l.Items[i]
		l.Items = append(l.Items[:i], l.Items[i+1:]...)
		return v, nil
	case "index":
		if len(args) < 1 {
			return nil, errorf("index expects an argument")
		}
		for i, it := range l.Items {
			if equal(it, args[0]) {
				return int64(i), nil
			}
		}
		return nil, errorf("%s is not in list", toStr(args[0]))
	case "count":
		if len(args) < 1 {
			return nil, errorf("count expects an argument")
		}
		n := int64(0)
		for _, it := range l.Items {
			if equal(it, args[0]) {
				n++
			}
		}
		return n, nil
	case "copy":
		return &list{Items: append([]value(nil), l.Items...)}, nil
	}
	return nil, errorf("list has no method %s", name)
}
