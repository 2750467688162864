package chat

import (
	"errors"
	"math"
	"strings"
)

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
