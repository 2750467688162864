package grammar

import (
	"fmt"
	"sort"
	"strings"
)

// gemma4Args is the GBNF of the arguments of the i-th function in Gemma
// 4's syntax: the parameters of the object schema params, sorted by name,
// as name:VALUE joined by "," (each optional unless required). A value of
// a string (with minLength/maxLength at most), string enum or const,
// integer, number or boolean schema follows it; a string is written
// between quote markers, its text without "<", ",", "}" or "]" and not
// starting like a number, so that the reply reads back also when the
// detokenizer drops the markers. A value of any other schema (objects,
// arrays) is any Gemma 4 value: its schema is not enforced.
func gemma4Args(c *schemaConverter, params any, i int, quote string) (string, error) {
	obj, ok := params.(*object)
	if !ok {
		return "", fmt.Errorf("#/anyOf/%d: the parameters schema must be an object", i)
	}
	props, required, err := paramsOf(obj, i)
	if err != nil || props == nil {
		return "", err
	}
	names := append([]string(nil), props.keys...)
	sort.Strings(names)
	elems := make([]string, len(names))
	for k, name := range names {
		v, err := gemma4Value(c, props.vals[name], fmt.Sprintf("tool-call-%d-arg-%d", i, k), quote)
		if err != nil {
			return "", fmt.Errorf("#/anyOf/%d/properties/%s: %w", i, name, err)
		}
		elems[k] = seq(GBNFLiteral(name+":"), v)
	}
	// first(k): the elements from k on, none written yet; more(k): the
	// same after one was (each then starts with ",").
	more := make([]string, len(names)+1)
	for k := len(names) - 1; k >= 0; k-- {
		e := "( " + seq(GBNFLiteral(","), elems[k]) + " )"
		if !required[names[k]] {
			e += "?"
		}
		more[k] = seq(e, more[k+1])
	}
	next := `""`
	for k := len(names) - 1; k >= 0; k-- {
		body := seq(elems[k], more[k+1])
		if !required[names[k]] {
			body = "( " + body + " ) | " + next
		}
		next = c.addRule(fmt.Sprintf("tool-call-%d-args-from-%d", i, k), body)
	}
	return next, nil
}

// paramsOf reads an object schema's properties and required names.
func paramsOf(obj *object, i int) (*object, map[string]bool, error) {
	var props *object
	if pv, ok := obj.get("properties"); ok {
		if props, ok = pv.(*object); !ok {
			return nil, nil, fmt.Errorf("#/anyOf/%d/properties: must be an object", i)
		}
	}
	required := map[string]bool{}
	if rv, ok := obj.get("required"); ok {
		list, ok := rv.([]any)
		if !ok {
			return nil, nil, fmt.Errorf("#/anyOf/%d/required: must be an array", i)
		}
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	if props == nil && len(required) > 0 {
		return nil, nil, fmt.Errorf("#/anyOf/%d: required parameters without properties", i)
	}
	return props, required, nil
}

// gemma4Value is the GBNF of one argument value (see gemma4Args).
func gemma4Value(c *schemaConverter, s any, name, quote string) (string, error) {
	obj, err := c.resolveShallow(s, name)
	if err != nil {
		return "", err
	}
	var words []string
	typ, _ := obj.get("type")
	for _, k := range obj.keys {
		switch v := obj.vals[k]; {
		case annotationKeywords[k], k == "type", k == "minLength", k == "maxLength":
		case k == "const":
			w, ok := v.(string)
			if !ok {
				return gemma4Any(c, quote), nil
			}
			words = append(words, w)
		case k == "enum":
			list, _ := v.([]any)
			for _, it := range list {
				w, ok := it.(string)
				if !ok {
					return gemma4Any(c, quote), nil
				}
				words = append(words, w)
			}
		default:
			return gemma4Any(c, quote), nil
		}
	}
	if len(words) > 0 {
		alts := make([]string, len(words))
		for i, w := range words {
			if w == "" || strings.ContainsAny(w, "<,}]") || gemma4NumberLike(w) {
				return "", fmt.Errorf("the enum value %q cannot be written unambiguously", w)
			}
			alts[i] = seq(quote, GBNFLiteral(w), quote)
		}
		return c.addRule(name, strings.Join(alts, " | ")), nil
	}
	switch typ {
	case "integer", "number", "boolean":
		return c.visit(obj, name, name)
	case "string":
		lo, err := count(obj, "minLength", name, 0)
		if err != nil {
			return "", err
		}
		hi, err := count(obj, "maxLength", name, -1)
		if err != nil {
			return "", err
		}
		if hi >= 0 && hi < lo {
			return "", fmt.Errorf("maxLength %d below minLength %d", hi, lo)
		}
		if hi == 0 {
			return "", fmt.Errorf("an empty string cannot be written unambiguously")
		}
		restLo, restHi := 0, -1
		if lo > 0 {
			restLo = lo - 1
		}
		if hi > 0 {
			restHi = hi - 1
		}
		return c.addRule(name, seq(quote, `[^<,}\]"{[0-9\-+. \t\r\n]`, repeat(`[^<,}\]]`, restLo, restHi), quote)), nil
	}
	return gemma4Any(c, quote), nil
}

// gemma4NumberLike says a string's first character could start a number or
// a value other than a string.
func gemma4NumberLike(w string) bool {
	return strings.ContainsRune("\"{[0123456789-+. \t\r\n", rune(w[0])) || w == "true" || w == "false" || w == "null" || w == "None"
}

// gemma4Any is any Gemma 4 value (strings as gemma4Value writes them).
func gemma4Any(c *schemaConverter, quote string) string {
	str := seq(quote, `[^<,}\]"{[0-9\-+. \t\r\n]`, `[^<,}\]]{0,200}`, quote)
	num := c.prim("number")
	c.rules["gemma4-value"] = "( " + str + " ) | " + num + ` | "true" | "false" | "null" | "{" ( gemma4-pair ( "," gemma4-pair ){0,31} )? "}" | "[" ( gemma4-value ( "," gemma4-value ){0,31} )? "]"`
	c.rules["gemma4-pair"] = `[a-zA-Z_] [a-zA-Z0-9_]{0,63} ":" gemma4-value`
	return "gemma4-value"
}
