package chat

// loopInfo is the "loop" variable inside for loops.
type loopInfo struct {
	index0 int
	items  []value
}

//go:noinline
func (r *renderer) execBody(body []node) error {
	for _, n := range body {
		if err := r.exec(n); err != nil {
			return err
		}
	}
	return nil
}

func (r *renderer) exec(n node) error {
	if err := r.step(); err != nil {
		return err
	}
	switch n := n.(type) {
	case *textNode:
		return r.write(n.s)
	case *outputNode:
		v, err := r.eval(n.e)
		if err != nil {
			return wrapPos(n.pos, err)
		}
		return wrapPos(n.pos, r.write(toStr(v)))
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c)
			if err != nil {
				return err
			}
			if truthy(v) {
				return r.execBody(n.bodies[i])
			}
		}
		if len(n.bodies) > len(n.conds) {
			return r.execBody(n.bodies[len(n.conds)])
		}
		return nil
	case *forNode:
		return r.execFor(n)
	case *setNode:
		return wrapPos(n.pos, r.execSet(n))
	case *macroNode:
		r.set(n.name, &macro{n: n})
		return nil
	case *filterBlockNode:
		s, err := r.capture(n.body)
		if err != nil {
			return err
		}
		var v value = s
		for _, f := range n.chain {
			args, kw, err := r.evalArgs(f.args, f.kwName, f.kwVal)
			if err != nil {
				return err
			}
			if v, err = f.fn(r, v, args, kw); err != nil {
				return wrapPos(f.pos, errorf("filter %s: %w", f.name, err))
			}
		}
		return r.write(toStr(v))
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return errorf("internal: unknown node %T", n)
}

// capture renders body into a string instead of the output, in a scope of
// its own as Jinja does for set and filter blocks: assignments inside do
// not leak out.
func (r *renderer) capture(body []node) (string, error) {
	saved := r.out
	r.out = sbuf{}
	r.scopes = append(r.scopes, map[string]value{})
	err := r.execBody(body)
	r.scopes = r.scopes[:len(r.scopes)-1]
	s := r.out.String()
	r.out = saved
	if err == nil {
		err = checkLen(r.out.Len() + len(s))
	}
	return s, err
}

func (r *renderer) execSet(n *setNode) error {
	var v value
	if n.block {
		s, err := r.capture(n.body)
		if err != nil {
			return err
		}
		v = s
	} else {
		var err error
		if v, err = r.eval(n.value); err != nil {
			return err
		}
	}
	if n.ns != "" {
		obj, ok := r.lookup(n.ns)
		d, isDict := obj.(*dict)
		if !ok || !isDict || !d.Namespace {
			return errorf("cannot assign attribute %q on %s: only namespace() objects allow it", n.attr, n.ns)
		}
		d.Set(n.attr, v)
		return nil
	}
	if len(n.targets) == 1 {
		r.set(n.targets[0], v)
		return nil
	}
	items, err := unpack(v, len(n.targets))
	if err != nil {
		return err
	}
	for i, t := range n.targets {
		r.set(t, items[i])
	}
	return nil
}

func unpack(v value, n int) ([]value, error) {
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	if len(items) != n {
		return nil, errorf("cannot unpack %d values into %d names", len(items), n)
	}
	return items, nil
}

func (r *renderer) execFor(n *forNode) error {
	seq, err := r.eval(n.iter)
	if err != nil {
		return err
	}
	if d, ok := seq.(*dict); ok && d.Namespace {
		return wrapPos(n.pos, errorf("namespace is not iterable"))
	}
	all, err := iterate(seq)
	if err != nil {
		return wrapPos(n.pos, err)
	}
	// Snapshot: the body may mutate the list being iterated.
	items := append([]value(nil), all...)
	r.scopes = append(r.scopes, map[string]value{})
	defer func() { r.scopes = r.scopes[:len(r.scopes)-1] }()
	if n.filter != nil {
		kept := items[:0]
		for _, it := range items {
			if err := r.bindTargets(n, it); err != nil {
				return err
			}
			c, err := r.eval(n.filter)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		clear(r.scopes[len(r.scopes)-1])
		return r.execBody(n.els)
	}
	// Jinja runs the else block when no iteration ran to its end: a loop
	// whose every pass hit continue or break counts as empty.
	completed := false
	for i, it := range items {
		if err := r.step(); err != nil {
			return err
		}
		// A fresh scope per iteration, as Jinja: assignments do not carry.
		clear(r.scopes[len(r.scopes)-1])
		r.set("loop", &loopInfo{index0: i, items: items})
		if err := r.bindTargets(n, it); err != nil {
			return err
		}
		err := r.execBody(n.body)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
		completed = completed || err == nil
	}
	if !completed && n.els != nil {
		clear(r.scopes[len(r.scopes)-1])
		return r.execBody(n.els)
	}
	return nil
}

func (r *renderer) bindTargets(n *forNode, it value) error {
	if len(n.targets) == 1 {
		r.set(n.targets[0], it)
		return nil
	}
	vals, err := unpack(it, len(n.targets))
	if err != nil {
		return wrapPos(n.pos, err)
	}
	for i, t := range n.targets {
		r.set(t, vals[i])
	}
	return nil
}

func (l *loopInfo) attr(name string) value {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index0 + 1)
	case "index0":
		return int64(l.index0)
	case "revindex":
		return int64(n - l.index0)
	case "revindex0":
		return int64(n - l.index0 - 1)
	case "first":
		return l.index0 == 0
	case "last":
		return l.index0 == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.index0 > 0 {
			return l.items[l.index0-1]
		}
	case "nextitem":
		if l.index0 < n-1 {
			return l.items[l.index0+1]
		}
	case "cycle":
		return &method{recv: l, name: "cycle"}
	}
	return undef{Name: name}
}
