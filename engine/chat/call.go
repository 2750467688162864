package chat

// macro is a template-defined macro, callable from expressions.
type macro struct{ n *macroNode }

// builtin is a global function such as range() or namespace().
type builtin struct {
	name string
	fn   func(r *renderer, args []value, kw *dict) (value, error)
}

// method is a bound method of a string, list or dict (s.strip, d.items).
type method struct {
	recv value
	name string
}

func (r *renderer) evalArgs(args []expr, kwName []string, kwVal []expr) ([]value, *dict, error) {
	var out []value
	for _, a := range args {
		if st, ok := a.(*starExpr); ok {
			v, err := r.eval(st.x)
			if err != nil {
				return nil, nil, err
			}
			items, err := iterate(v)
			if err != nil {
				return nil, nil, errorf("argument after *: %w", err)
			}
			out = append(out, items...)
			continue
		}
		v, err := r.eval(a)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, v)
	}
	var kw *dict
	if len(kwName) > 0 {
		kw = newDict()
		for i, k := range kwName {
			v, err := r.eval(kwVal[i])
			if err != nil {
				return nil, nil, err
			}
			kw.Set(k, v)
		}
	}
	return out, kw, nil
}

func (r *renderer) evalCall(e *callExpr) (value, error) {
	fn, err := r.eval(e.fn)
	if err != nil {
		return nil, err
	}
	args, kw, err := r.evalArgs(e.args, e.kwName, e.kwVal)
	if err != nil {
		return nil, err
	}
	var v value
	switch f := fn.(type) {
	case *builtin:
		v, err = f.fn(r, args, kw)
	case *method:
		if err = r.charge(f.recv); err == nil {
			v, err = callMethod(r, f, args, kw)
		}
	case *macro:
		v, err = r.callMacro(f, args, kw)
	case *loopInfo:
		err = errorf("loop is not callable")
	case undef:
		if f.Name != "" {
			err = errorf("%q is undefined and cannot be called", f.Name)
		} else {
			err = errorf("undefined value is not callable")
		}
	default:
		err = errorf("%s is not callable", typeName(fn))
	}
	if err != nil {
		return nil, wrapPos(e.pos, err)
	}
	return v, nil
}

func (r *renderer) callMacro(m *macro, args []value, kw *dict) (value, error) {
	if r.depth >= maxCallDepth {
		return nil, errorf("%w: macro calls nested deeper than %d", ErrBudget, maxCallDepth)
	}
	n := m.n
	if len(args) > len(n.params) {
		return nil, errorf("macro %s takes %d arguments, got %d", n.name, len(n.params), len(args))
	}
	scope := map[string]value{}
	// Defaults are evaluated in the caller's scope before binding.
	for i, p := range n.params {
		switch {
		case i < len(args):
			scope[p] = args[i]
		case kw != nil:
			if v, ok := kw.Get(p); ok {
				scope[p] = v
				continue
			}
			fallthrough
		default:
			if n.defaults[i] != nil {
				v, err := r.eval(n.defaults[i])
				if err != nil {
					return nil, err
				}
				scope[p] = v
			} else {
				scope[p] = undef{Name: p}
			}
		}
	}
	if kw != nil {
		for _, k := range kw.keys {
			found := false
			for _, p := range n.params {
				if k == p {
					found = true
				}
			}
			if !found {
				return nil, errorf("macro %s has no parameter %v", n.name, k)
			}
		}
	}
	savedOut := r.out
	savedScopes := r.scopes
	r.out = sbuf{}
	// Macros see the template's top-level names and their own arguments.
	r.scopes = []map[string]value{savedScopes[0], scope}
	r.depth++
	err := r.execBody(n.body)
	r.depth--
	s := r.out.String()
	r.out = savedOut
	r.scopes = savedScopes
	if err == errBreak || err == errContinue {
		err = errorf("%v", err)
	}
	if err != nil {
		return nil, err
	}
	if err := checkLen(r.out.Len() + len(s)); err != nil {
		return nil, err
	}
	return s, nil
}
