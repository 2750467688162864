package chat

import (
	"time"
)

// globals are the functions every template can call: Jinja's range,
// namespace, dict and joiner, and Hugging Face's raise_exception and
// strftime_now.
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
	return fillDict(d, "namespace", args, kw)
}

func gDict(_ *renderer, args []value, kw *dict) (value, error) {
	return fillDict(newDict(), "dict", args, kw)
}

// fillDict sets into d the entries of the positional mappings, then the
// keyword arguments, as dict() and namespace() take them.
func fillDict(d *dict, fn string, args []value, kw *dict) (value, error) {
	for _, a := range args {
		src, ok := a.(*dict)
		if !ok {
			return nil, errorf("%s() positional arguments must be mappings", fn)
		}
		d.setAll(src)
	}
	if kw != nil {
		d.setAll(kw)
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
