package chat

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// filterFunc is a Jinja filter, as in "x | trim": the value, then the
// filter's positional and keyword arguments.
type filterFunc func(r *renderer, v value, args []value, kw *dict) (value, error)

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
		key := compareKey(get, cs)
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
