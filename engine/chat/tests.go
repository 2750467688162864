package chat

import (
	"unicode"
)

// testFunc is a Jinja test, as in "x is defined" or "x is divisibleby(3)".
type testFunc func(v value, args []value) (bool, error)

// tests are the Jinja tests by name.
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
