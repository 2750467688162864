package chat

import "strings"

func (r *renderer) eval(e expr) (value, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := r.lookup(e.name); ok {
			return v, nil
		}
		return undef{Name: e.name}, nil
	case *listExpr:
		l := &list{Items: make([]value, len(e.items)), Tuple: e.tuple}
		for i, x := range e.items {
			v, err := r.eval(x)
			if err != nil {
				return nil, err
			}
			l.Items[i] = v
		}
		return l, nil
	case *dictExpr:
		d := newDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i])
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i])
			if err != nil {
				return nil, err
			}
			if !d.Set(k, v) {
				return nil, errorf("unhashable dict key of type %s", typeName(k))
			}
		}
		return d, nil
	case *attrExpr:
		obj, err := r.eval(e.obj)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.name), nil
	case *indexExpr:
		obj, err := r.eval(e.obj)
		if err != nil {
			return nil, err
		}
		idx, err := r.eval(e.idx)
		if err != nil {
			return nil, err
		}
		return getItem(obj, idx), nil
	case *sliceExpr:
		return r.evalSlice(e)
	case *callExpr:
		return r.evalCall(e)
	case *filterExpr:
		v, err := r.eval(e.arg)
		if err != nil {
			return nil, err
		}
		args, kw, err := r.evalArgs(e.args, e.kwName, e.kwVal)
		if err != nil {
			return nil, err
		}
		if err := r.charge(v); err != nil {
			return nil, err
		}
		out, err := e.fn(r, v, args, kw)
		if err != nil {
			return nil, wrapPos(e.pos, errorf("filter %s: %w", e.name, err))
		}
		return out, nil
	case *testExpr:
		v, err := r.eval(e.arg)
		if err != nil {
			return nil, err
		}
		args, _, err := r.evalArgs(e.args, nil, nil)
		if err != nil {
			return nil, err
		}
		ok, err := e.fn(v, args)
		if err != nil {
			return nil, wrapPos(e.pos, errorf("test %s: %w", e.name, err))
		}
		return ok != e.neg, nil
	case *unaryExpr:
		v, err := r.eval(e.x)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(v), nil
		case "-":
			switch x := v.(type) {
			case int64:
				return -x, nil
			case float64:
				return -x, nil
			case bool:
				if x {
					return int64(-1), nil
				}
				return int64(0), nil
			}
			return nil, wrapPos(e.pos, errorf("bad operand type for unary -: %s", typeName(v)))
		default:
			if _, _, _, ok := toNumber(v); !ok {
				return nil, wrapPos(e.pos, errorf("bad operand type for unary +: %s", typeName(v)))
			}
			return v, nil
		}
	case *condExpr:
		c, err := r.eval(e.cond)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(e.yes)
		}
		if e.no == nil {
			return undef{}, nil
		}
		return r.eval(e.no)
	case *binExpr:
		return r.evalBin(e)
	case *compareExpr:
		l, err := r.eval(e.first)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i])
			if err != nil {
				return nil, err
			}
			if err := r.charge(rv); err != nil {
				return nil, err
			}
			ok, err := compareOp(op, l, rv)
			if err != nil {
				return nil, wrapPos(e.pos, err)
			}
			if !ok {
				return false, nil
			}
			l = rv
		}
		return true, nil
	}
	return nil, errorf("internal: unknown expression %T", e)
}

func compareOp(op string, a, b value) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in", "notin":
		ok, err := contains(b, a)
		if err != nil {
			return false, err
		}
		return ok == (op == "in"), nil
	}
	c, err := compare(a, b)
	if err != nil {
		return false, errorf("'%s' not supported: %w", op, err)
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// contains is Python's "needle in hay".
func contains(hay, needle value) (bool, error) {
	switch h := hay.(type) {
	case string:
		s, ok := needle.(string)
		if !ok {
			if isUndefined(needle) {
				return false, errorf("'in <string>' requires string as left operand, not undefined")
			}
			return false, errorf("'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(h, s), nil
	case *list:
		for _, it := range h.Items {
			if equal(it, needle) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		_, ok := h.Get(needle)
		return ok, nil
	case undef:
		return false, nil
	}
	return false, errorf("argument of type %s is not iterable", typeName(hay))
}

func (r *renderer) evalBin(e *binExpr) (value, error) {
	l, err := r.eval(e.l)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(e.r)
	}
	rv, err := r.eval(e.r)
	if err != nil {
		return nil, err
	}
	v, err := arith(e.op, l, rv)
	if err != nil {
		return nil, wrapPos(e.pos, err)
	}
	return v, r.charge(v)
}
