package chat

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// strMethods, dictMethods and listMethods name the Python methods a
// template may call on a string, dict or list; callMethod runs them.
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
			d.setAll(src)
		}
		return nil, nil
	case "copy":
		c := newDict()
		c.setAll(d)
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
