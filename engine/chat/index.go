package chat

func (r *renderer) evalSlice(e *sliceExpr) (value, error) {
	obj, err := r.eval(e.obj)
	if err != nil {
		return nil, err
	}
	var b [3]value
	for i, x := range []expr{e.start, e.stop, e.stp} {
		b[i] = nil
		if x != nil {
			if b[i], err = r.eval(x); err != nil {
				return nil, err
			}
		}
	}
	if err := r.charge(obj); err != nil {
		return nil, err
	}
	v, err := slice(obj, b[0], b[1], b[2])
	if err != nil {
		return nil, wrapPos(e.pos, err)
	}
	return v, nil
}

// slice implements Python's seq[start:stop:step] for lists and strings.
func slice(obj, start, stop, step value) (value, error) {
	var n int
	var runes []rune
	var items []value
	tuple := false
	switch x := obj.(type) {
	case string:
		runes = []rune(x)
		n = len(runes)
	case *list:
		items = x.Items
		tuple = x.Tuple
		n = len(items)
	default:
		// Jinja: a failed subscript is undefined, not an error.
		return undef{}, nil
	}
	st := int64(1)
	if step != nil {
		s, ok := step.(int64)
		if !ok {
			return nil, errorf("slice step must be an integer")
		}
		if s == 0 {
			return nil, errorf("slice step cannot be zero")
		}
		st = s
	}
	norm := func(v value, def int64) (int64, error) {
		if v == nil {
			return def, nil
		}
		i, ok := v.(int64)
		if !ok {
			return 0, errorf("slice indices must be integers or none")
		}
		if i < 0 {
			i += int64(n)
			if i < 0 {
				if st < 0 {
					i = -1
				} else {
					i = 0
				}
			}
		} else if i >= int64(n) {
			if st < 0 {
				i = int64(n) - 1
			} else {
				i = int64(n)
			}
		}
		return i, nil
	}
	var lo, hi int64
	var err error
	if st > 0 {
		if lo, err = norm(start, 0); err != nil {
			return nil, err
		}
		if hi, err = norm(stop, int64(n)); err != nil {
			return nil, err
		}
	} else {
		if lo, err = norm(start, int64(n)-1); err != nil {
			return nil, err
		}
		if hi, err = norm(stop, -1); err != nil {
			return nil, err
		}
	}
	// Count the indices first, in unsigned arithmetic: lo + k*st can
	// overflow int64 for a step near 2^63 (lo and hi are within [-1, n]).
	var count uint64
	switch {
	case st > 0 && hi > lo:
		count = (uint64(hi-lo)-1)/uint64(st) + 1
	case st < 0 && lo > hi:
		count = (uint64(lo-hi)-1)/(-uint64(st)) + 1
	}
	idx := make([]int, count)
	for k := range idx {
		idx[k] = int(lo + int64(k)*st)
	}
	if runes != nil || items == nil && isStr(obj) {
		out := make([]rune, len(idx))
		for j, i := range idx {
			out[j] = runes[i]
		}
		return string(out), nil
	}
	out := make([]value, len(idx))
	for j, i := range idx {
		out[j] = items[i]
	}
	return &list{Items: out, Tuple: tuple}, nil
}

func isStr(v value) bool { _, ok := v.(string); return ok }

// getAttr is obj.name: methods and loop fields first, then dict keys.
func getAttr(obj value, name string) value {
	switch x := obj.(type) {
	case *loopInfo:
		return x.attr(name)
	case *dict:
		if !x.Namespace {
			if _, ok := dictMethods[name]; ok {
				return &method{recv: obj, name: name}
			}
		}
		if v, ok := x.Get(name); ok {
			return v
		}
	case string:
		if _, ok := strMethods[name]; ok {
			return &method{recv: obj, name: name}
		}
	case *list:
		if _, ok := listMethods[name]; ok {
			return &method{recv: obj, name: name}
		}
	}
	return undef{Name: name}
}

// getItem is obj[key]: dict keys and sequence indexes first, then
// attributes; a miss is undefined, as in Jinja.
func getItem(obj, key value) value {
	switch x := obj.(type) {
	case *dict:
		if v, ok := x.Get(key); ok {
			return v
		}
	case *list:
		if i, ok := key.(int64); ok {
			if i < 0 {
				i += int64(len(x.Items))
			}
			if i >= 0 && i < int64(len(x.Items)) {
				return x.Items[i]
			}
			return undef{}
		}
	case string:
		if i, ok := key.(int64); ok {
			rs := []rune(x)
			if i < 0 {
				i += int64(len(rs))
			}
			if i >= 0 && i < int64(len(rs)) {
				return string(rs[i])
			}
			return undef{}
		}
	}
	if s, ok := key.(string); ok {
		return getAttr(obj, s)
	}
	return undef{}
}
