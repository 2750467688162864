package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Budgets that keep a hostile template from looping forever or exhausting
// memory. Real chat templates use a tiny fraction of them.
const (
	// MaxSteps bounds evaluated nodes and loop iterations per render.
	MaxSteps = 5_000_000
	// MaxOutput bounds the rendered text and any single string built while
	// rendering, in bytes.
	MaxOutput = 16 << 20
	// maxCallDepth bounds macro recursion.
	maxCallDepth = 64
	// maxItems bounds lists made by range() and list repetition.
	maxItems = 1 << 20
)

// ErrBudget is returned (wrapped) when a render exceeds MaxSteps, MaxOutput
// or the recursion bound.
var ErrBudget = errors.New("chat template exceeded its evaluation budget")

// ExceptionError is what the template's raise_exception(msg) returns.
type ExceptionError struct{ Message string }

func (e *ExceptionError) Error() string { return "chat template raised: " + e.Message }

// RenderError is a failure while rendering, with where in the template.
type RenderError struct {
	Pos Pos
	Err error
}

func (e *RenderError) Error() string { return fmt.Sprintf("chat template: %s: %v", e.Pos, e.Err) }
func (e *RenderError) Unwrap() error { return e.Err }

var (
	errBreak    = errors.New("break outside loop")
	errContinue = errors.New("continue outside loop")
)

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

// loopInfo is the "loop" variable inside for loops.
type loopInfo struct {
	index0 int
	items  []value
}

type renderer struct {
	out    sbuf
	scopes []map[string]value
	steps  int
	depth  int
}

//go:noinline
func (r *renderer) step() error {
	r.steps++
	if r.steps > MaxSteps {
		return errorf("%w: more than %d steps", ErrBudget, MaxSteps)
	}
	return nil
}

// charge counts the work of an operation over v against the step budget,
// so bulk operations on large values cannot run unbounded.
func (r *renderer) charge(vs ...value) error {
	for _, v := range vs {
		switch x := v.(type) {
		case string:
			r.steps += len(x) / 64
		case *list:
			r.steps += len(x.Items)
		case *dict:
			r.steps += x.Len()
		}
	}
	if r.steps > MaxSteps {
		return errorf("%w: more than %d steps", ErrBudget, MaxSteps)
	}
	return nil
}

func (r *renderer) lookup(name string) (value, bool) {
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if v, ok := r.scopes[i][name]; ok {
			return v, true
		}
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

func (r *renderer) set(name string, v value) { r.scopes[len(r.scopes)-1][name] = v }

func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > MaxOutput {
		return errorf("%w: output larger than %d bytes", ErrBudget, MaxOutput)
	}
	r.out.WriteString(s)
	return nil
}

func wrapPos(pos Pos, err error) error {
	if err == nil || err == errBreak || err == errContinue {
		return err
	}
	var re *RenderError
	if errors.As(err, &re) {
		return err
	}
	return &RenderError{Pos: pos, Err: err}
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

//go:noinline
func checkLen(n int) error {
	if n > MaxOutput {
		return errorf("%w: string larger than %d bytes", ErrBudget, MaxOutput)
	}
	return nil
}

func arith(op string, a, b value) (value, error) {
	if op == "~" {
		s1, s2 := toStr(a), toStr(b)
		if err := checkLen(len(s1) + len(s2)); err != nil {
			return nil, err
		}
		return s1 + s2, nil
	}
	if isUndefined(a) || isUndefined(b) {
		name := ""
		if u, ok := a.(undef); ok {
			name = u.Name
		} else if u, ok := b.(undef); ok {
			name = u.Name
		}
		if name != "" {
			return nil, errorf("%q is undefined (in operator %s)", name, op)
		}
		return nil, errorf("undefined value in operator %s", op)
	}
	switch op {
	case "+":
		switch x := a.(type) {
		case string:
			if y, ok := b.(string); ok {
				if err := checkLen(len(x) + len(y)); err != nil {
					return nil, err
				}
				return x + y, nil
			}
		case *list:
			if y, ok := b.(*list); ok {
				if len(x.Items)+len(y.Items) > maxItems {
					return nil, errorf("%w: list longer than %d", ErrBudget, maxItems)
				}
				items := make([]value, 0, len(x.Items)+len(y.Items))
				items = append(append(items, x.Items...), y.Items...)
				return &list{Items: items, Tuple: x.Tuple}, nil
			}
		}
	case "%":
		if f, ok := a.(string); ok {
			args := []value{b}
			if l, ok := b.(*list); ok && l.Tuple {
				args = l.Items
			}
			return pyFormat(f, args)
		}
	case "*":
		if s, n, ok := seqTimes(a, b); ok {
			return repeat(s, n)
		}
		if s, n, ok := seqTimes(b, a); ok {
			return repeat(s, n)
		}
	}
	ai, af, afl, aok := toNumber(a)
	bi, bf, bfl, bok := toNumber(b)
	if !aok || !bok {
		return nil, errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
	}
	isFloat := afl || bfl
	switch op {
	case "+":
		if isFloat {
			return af + bf, nil
		}
		return addInt(ai, bi)
	case "-":
		if isFloat {
			return af - bf, nil
		}
		return subInt(ai, bi)
	case "*":
		if isFloat {
			return af * bf, nil
		}
		return mulInt(ai, bi)
	case "/":
		if bf == 0 {
			return nil, errorf("division by zero")
		}
		return af / bf, nil
	case "//":
		if bf == 0 {
			return nil, errorf("integer division or modulo by zero")
		}
		if isFloat {
			return pyFloorDiv(af, bf), nil
		}
		q := ai / bi
		if (ai%bi != 0) && ((ai < 0) != (bi < 0)) {
			q--
		}
		return q, nil
	case "%":
		if bf == 0 {
			return nil, errorf("integer division or modulo by zero")
		}
		if isFloat {
			m := math.Mod(af, bf)
			if m != 0 && (m < 0) != (bf < 0) {
				m += bf
			}
			return m, nil
		}
		m := ai % bi
		if m != 0 && (m < 0) != (bi < 0) {
			m += bi
		}
		return m, nil
	case "**":
		if !isFloat && bi >= 0 {
			return powInt(ai, bi)
		}
		return math.Pow(af, bf), nil
	}
	return nil, errorf("unknown operator %s", op)
}

// pyFloorDiv is Python's float //, computed from fmod as CPython does so
// that 7 // 0.1 is 69.0 like there.
func pyFloorDiv(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div--
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	fl := math.Floor(div)
	if div-fl > 0.5 {
		fl++
	}
	return fl
}

func seqTimes(a, b value) (value, int64, bool) {
	var n int64
	switch x := b.(type) {
	case int64:
		n = x
	case bool:
		n, _, _, _ = toNumber(x)
	default:
		return nil, 0, false
	}
	switch a.(type) {
	case string, *list:
		return a, n, true
	}
	return nil, 0, false
}

func repeat(s value, n int64) (value, error) {
	if n < 0 {
		n = 0
	}
	// The bounds divide rather than multiply: len*n overflows int64 for
	// n near 2^63.
	switch x := s.(type) {
	case string:
		if len(x) == 0 || n == 0 {
			return "", nil
		}
		if n > MaxOutput/int64(len(x)) {
			return nil, errorf("%w: string larger than %d bytes", ErrBudget, MaxOutput)
		}
		return strings.Repeat(x, int(n)), nil
	case *list:
		if len(x.Items) == 0 || n == 0 {
			return &list{Items: []value{}, Tuple: x.Tuple}, nil
		}
		if n > maxItems/int64(len(x.Items)) {
			return nil, errorf("%w: list longer than %d", ErrBudget, maxItems)
		}
		items := make([]value, 0, len(x.Items)*int(n))
		for i := int64(0); i < n; i++ {
			items = append(items, x.Items...)
		}
		return &list{Items: items, Tuple: x.Tuple}, nil
	}
	return nil, errorf("cannot repeat %s", typeName(s))
}

// Integer arithmetic is int64: a result Python would make a big integer
// is an error here instead of a silently wrapped number.
var errOverflow = errors.New("integer overflow")

func addInt(a, b int64) (value, error) {
	c := a + b
	if (c > a) != (b > 0) {
		return nil, errorf("%w: %d + %d", errOverflow, a, b)
	}
	return c, nil
}

func subInt(a, b int64) (value, error) {
	c := a - b
	if (c < a) != (b > 0) {
		return nil, errorf("%w: %d - %d", errOverflow, a, b)
	}
	return c, nil
}

func mulInt(a, b int64) (value, error) {
	if a == 0 || b == 0 {
		return int64(0), nil
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return nil, errorf("%w: %d * %d", errOverflow, a, b)
	}
	return c, nil
}

func powInt(base, e int64) (value, error) {
	res := int64(1)
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r, err := mulInt(res, base)
			if err != nil {
				return nil, err
			}
			res = r.(int64)
		}
		if e > 1 {
			b, err := mulInt(base, base)
			if err != nil {
				return nil, err
			}
			base = b.(int64)
		}
	}
	return res, nil
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
