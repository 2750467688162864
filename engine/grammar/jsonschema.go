package grammar

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// FromJSONSchema converts a JSON schema to GBNF grammar text for the JSON
// values it describes. It covers what llama.cpp's converter covers: type
// (also as a list), enum, const, properties with required and optional
// properties (emitted in property order), additionalProperties, items,
// prefixItems, minItems, maxItems, minLength, maxLength, pattern (a regular
// expression subset: literals, ., classes, \d \w \s, groups, |, * + ? {m,n};
// no anchors inside, lookaround or backreferences), the formats date, time,
// date-time and uuid, integer minimum/maximum and their exclusive forms,
// local $ref into the document ($defs, definitions, "#"), anyOf, oneOf (as
// anyOf) and allOf (merged). A keyword it cannot honour is an error naming
// it, never ignored; annotations (title, description, default, examples,
// ...) are ignored as the specification allows.
//
// As in llama.cpp, an object schema with properties and no
// additionalProperties admits no other keys, and prefixItems without items
// is an exact tuple. Counts (minItems, maxItems, minLength, maxLength,
// pattern repetitions) are limited to 2000, the grammar's repetition limit.
func FromJSONSchema(schema []byte) (string, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("json schema: %w", err)
	}
	c := &schemaConverter{doc: doc, rules: map[string]string{}, refs: map[string]string{}}
	name, err := c.visit(doc, "root", "#")
	if err != nil {
		return "", fmt.Errorf("json schema: %w", err)
	}
	if name != "root" {
		c.rules["root"] = name
	}
	names := make([]string, 0, len(c.rules))
	for n := range c.rules {
		if n != "root" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("root ::= " + c.rules["root"] + "\n")
	for _, n := range names {
		b.WriteString(n + " ::= " + c.rules[n] + "\n")
	}
	if b.Len() > MaxSourceBytes {
		return "", fmt.Errorf("json schema: the grammar would be %d bytes, more than %d", b.Len(), MaxSourceBytes)
	}
	return b.String(), nil
}

// CompileJSONSchema is FromJSONSchema followed by Parse.
func CompileJSONSchema(schema []byte) (*Grammar, error) {
	src, err := FromJSONSchema(schema)
	if err != nil {
		return nil, err
	}
	g, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("json schema: the converted grammar does not compile: %w", err)
	}
	return g, nil
}

type schemaConverter struct {
	doc   any
	rules map[string]string
	refs  map[string]string // $ref -> rule name
	depth int
}

// Keywords that do not constrain values.
var annotationKeywords = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "contentMediaType": true, "contentEncoding": true,
}

// Keywords the converter honours, by the type they constrain ("" for all).
var keywordType = map[string]string{
	"type": "", "enum": "", "const": "", "$ref": "", "anyOf": "", "oneOf": "", "allOf": "",
	"properties": "object", "required": "object", "additionalProperties": "object",
	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "integer", "maximum": "integer", "exclusiveMinimum": "integer", "exclusiveMaximum": "integer",
}

type primitive struct {
	body string
	deps []string
}

var primitives = map[string]primitive{
	"space":         {`( " " | "\n" [ \t]{0,16} )?`, nil},
	"boolean":       {`"true" | "false"`, nil},
	"null":          {`"null"`, nil},
	"integral-part": {`"0" | [1-9] [0-9]{0,15}`, nil},
	"decimal-part":  {`[0-9]{1,16}`, nil},
	"number":        {`"-"? integral-part ( "." decimal-part )? ( [eE] [-+]? [0-9]{1,3} )?`, []string{"integral-part", "decimal-part"}},
	"integer":       {`"-"? integral-part`, []string{"integral-part"}},
	"char":          {`[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )`, nil},
	"string":        {`"\"" char* "\""`, []string{"char"}},
	"value":         {`object | array | string | number | boolean | null`, []string{"object", "array", "string", "number", "boolean", "null"}},
	"object":        {`"{" space ( string space ":" space value space ( "," space string space ":" space value space )* )? "}"`, []string{"space", "string", "value"}},
	"array":         {`"[" space ( value space ( "," space value space )* )? "]"`, []string{"space", "value"}},
	"date":          {`[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] )`, nil},
	"time":          {`( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`, nil},
	"date-time":     {`date "T" time`, []string{"date", "time"}},
	"uuid":          {`[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`, nil},
}

func (c *schemaConverter) prim(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	p := primitives[name]
	c.rules[name] = p.body
	for _, d := range p.deps {
		c.prim(d)
	}
	return name
}

// addRule adds a rule under name (made unique) and returns the name used.
func (c *schemaConverter) addRule(name, body string) string {
	name = ruleName(name)
	if old, ok := c.rules[name]; !ok || old == body {
		c.rules[name] = body
		return name
	}
	for i := 2; ; i++ {
		n := name + "-" + strconv.Itoa(i)
		if old, ok := c.rules[n]; !ok || old == body {
			c.rules[n] = body
			return n
		}
	}
}

// ruleName keeps [a-zA-Z0-9-] and turns other runs into one '-'.
func ruleName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < 128 && isWordChar(byte(r)) {
			b.WriteRune(r)
			dash = r == '-'
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() > 200 {
			break
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

// lit is s as a GBNF string literal.
func lit(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (c *schemaConverter) visit(s any, name, path string) (string, error) {
	c.depth++
	defer func() { c.depth-- }()
	if c.depth > 2*maxSchemaDepth {
		return "", fmt.Errorf("%s: schema nested too deeply", path)
	}
	switch t := s.(type) {
	case bool:
		if t {
			return c.prim("value"), nil
		}
		return "", fmt.Errorf("%s: the schema false admits no value", path)
	case *object:
		return c.visitObject(t, name, path)
	}
	return "", fmt.Errorf("%s: a schema must be an object or a boolean", path)
}

func (c *schemaConverter) visitObject(s *object, name, path string) (string, error) {
	var constraints []string
	for _, k := range s.keys {
		if annotationKeywords[k] {
			continue
		}
		if _, ok := keywordType[k]; !ok {
			return "", fmt.Errorf("%s: keyword %q is not supported", path, k)
		}
		constraints = append(constraints, k)
	}
	has := func(k string) bool { _, ok := s.vals[k]; return ok }
	only := func(kw string) error {
		for _, k := range constraints {
			if k != kw {
				return fmt.Errorf("%s: %q beside %q is not supported", path, k, kw)
			}
		}
		return nil
	}
	switch {
	case len(constraints) == 0:
		return c.addRule(name, c.prim("value")), nil
	case has("$ref"):
		if err := only("$ref"); err != nil {
			return "", err
		}
		return c.ref(s.vals["$ref"], name, path)
	case has("anyOf") || has("oneOf"):
		kw := "anyOf"
		if has("oneOf") {
			kw = "oneOf"
		}
		if has("anyOf") && has("oneOf") {
			return "", fmt.Errorf("%s: anyOf together with oneOf is not supported", path)
		}
		alts, ok := s.vals[kw].([]any)
		if !ok || len(alts) == 0 {
			return "", fmt.Errorf("%s/%s: must be a non-empty array", path, kw)
		}
		// keywords beside the alternatives apply to each of them
		var siblings *object
		if only(kw) != nil {
			siblings = &object{vals: map[string]any{}}
			for _, k := range constraints {
				if k != kw {
					siblings.keys = append(siblings.keys, k)
					siblings.vals[k] = s.vals[k]
				}
			}
		}
		var parts []string
		for i, a := range alts {
			if siblings != nil {
				a = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{siblings, a}}}
			}
			r, err := c.visit(a, fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("%s/%s/%d", path, kw, i))
			if err != nil {
				return "", err
			}
			parts = append(parts, r)
		}
		return c.addRule(name, strings.Join(parts, " | ")), nil
	case has("allOf"):
		merged, err := c.mergeAllOf(s, path)
		if err != nil {
			return "", err
		}
		return c.visitObject(merged, name, path)
	case has("const"):
		var b strings.Builder
		encodeCompact(&b, s.vals["const"])
		return c.addRule(name, lit(b.String())), nil
	case has("enum"):
		vals, ok := s.vals["enum"].([]any)
		if !ok || len(vals) == 0 {
			return "", fmt.Errorf("%s/enum: must be a non-empty array", path)
		}
		var parts []string
		for _, v := range vals {
			var b strings.Builder
			encodeCompact(&b, v)
			parts = append(parts, lit(b.String()))
		}
		return c.addRule(name, strings.Join(parts, " | ")), nil
	}

	typ, err := schemaType(s, constraints, path)
	if err != nil {
		return "", err
	}
	if list, ok := typ.([]string); ok {
		var parts []string
		for i, t := range list {
			r, err := c.visitTyped(s, t, fmt.Sprintf("%s-%d", name, i), path)
			if err != nil {
				return "", err
			}
			parts = append(parts, r)
		}
		return c.addRule(name, strings.Join(parts, " | ")), nil
	}
	return c.visitTyped(s, typ.(string), name, path)
}

// schemaType returns the type (a string or a list of strings), inferred
// from the keywords when "type" is absent.
func schemaType(s *object, constraints []string, path string) (any, error) {
	if t, ok := s.vals["type"]; ok {
		switch tv := t.(type) {
		case string:
			return tv, nil
		case []any:
			var list []string
			for _, e := range tv {
				es, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("%s/type: must be a string or a list of strings", path)
				}
				list = append(list, es)
			}
			if len(list) == 0 {
				return nil, fmt.Errorf("%s/type: empty list", path)
			}
			if len(list) == 1 {
				return list[0], nil
			}
			return list, nil
		}
		return nil, fmt.Errorf("%s/type: must be a string or a list of strings", path)
	}
	inferred := ""
	for _, k := range constraints {
		t := keywordType[k]
		if t == "" {
			continue
		}
		if inferred != "" && inferred != t {
			return nil, fmt.Errorf("%s: keywords of both %s and %s without a type", path, inferred, t)
		}
		inferred = t
	}
	if inferred == "" {
		return "any", nil
	}
	return inferred, nil
}

func (c *schemaConverter) visitTyped(s *object, typ, name, path string) (string, error) {
	switch typ {
	case "any":
		return c.addRule(name, c.prim("value")), nil
	case "null", "boolean":
		return c.addRule(name, c.prim(typ)), nil
	case "number":
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := s.vals[k]; ok {
				return "", fmt.Errorf("%s: %q on type number is not supported (only on integer)", path, k)
			}
		}
		return c.addRule(name, c.prim("number")), nil
	case "integer":
		return c.integer(s, name, path)
	case "string":
		return c.str(s, name, path)
	case "array":
		return c.array(s, name, path)
	case "object":
		return c.object(s, name, path)
	}
	return "", fmt.Errorf("%s: unknown type %q", path, typ)
}

func (c *schemaConverter) ref(v any, name, path string) (string, error) {
	ref, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s/$ref: must be a string", path)
	}
	if r, ok := c.refs[ref]; ok {
		return r, nil
	}
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return "", fmt.Errorf("%s/$ref: %q is not a reference into this document (remote references are not supported)", path, ref)
	}
	target := c.doc
	if ref != "#" {
		for _, part := range strings.Split(ref[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch t := target.(type) {
			case *object:
				next, ok := t.get(part)
				if !ok {
					return "", fmt.Errorf("%s/$ref: %q not found", path, ref)
				}
				target = next
			case []any:
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(t) {
					return "", fmt.Errorf("%s/$ref: %q not found", path, ref)
				}
				target = t[i]
			default:
				return "", fmt.Errorf("%s/$ref: %q not found", path, ref)
			}
		}
	}
	rn := "root"
	if ref != "#" {
		rn = ruleName("ref-" + ref[strings.LastIndex(ref, "/")+1:])
		for i := 2; c.rules[rn] != ""; i++ {
			rn = ruleName(fmt.Sprintf("ref-%s-%d", ref[strings.LastIndex(ref, "/")+1:], i))
		}
		c.rules[rn] = "(pending)" // reserve the name: the target may refer back
	}
	c.refs[ref] = rn
	if ref == "#" {
		return rn, nil
	}
	r, err := c.visit(target, rn+"-def", ref)
	if err != nil {
		return "", err
	}
	c.rules[rn] = r
	return rn, nil
}

// mergeAllOf folds allOf's schemas (references resolved) into one: their
// properties and required lists join; any other keyword must agree.
func (c *schemaConverter) mergeAllOf(s *object, path string) (*object, error) {
	out := &object{vals: map[string]any{}}
	props := &object{vals: map[string]any{}}
	var required []any
	var add func(o *object, at string, depth int) error
	add = func(o *object, at string, depth int) error {
		if depth > maxSchemaDepth {
			return fmt.Errorf("%s: allOf nested too deeply", at)
		}
		for _, k := range o.keys {
			v := o.vals[k]
			switch k {
			case "allOf":
				list, ok := v.([]any)
				if !ok || len(list) == 0 {
					return fmt.Errorf("%s/allOf: must be a non-empty array", at)
				}
				for i, e := range list {
					sub := fmt.Sprintf("%s/allOf/%d", at, i)
					so, err := c.resolveShallow(e, sub)
					if err != nil {
						return err
					}
					if err := add(so, sub, depth+1); err != nil {
						return err
					}
				}
				continue
			case "properties":
				po, ok := v.(*object)
				if !ok {
					return fmt.Errorf("%s/properties: must be an object", at)
				}
				for _, pk := range po.keys {
					if _, dup := props.vals[pk]; dup {
						return fmt.Errorf("%s: property %q defined twice in allOf", at, pk)
					}
					props.keys = append(props.keys, pk)
					props.vals[pk] = po.vals[pk]
				}
				continue
			case "required":
				r, ok := v.([]any)
				if !ok {
					return fmt.Errorf("%s/required: must be an array", at)
				}
				required = append(required, r...)
				continue
			}
			if annotationKeywords[k] {
				continue
			}
			if old, ok := out.vals[k]; ok && k == "enum" {
				// both enums hold: keep the common values
				ol, ok1 := old.([]any)
				nl, ok2 := v.([]any)
				if !ok1 || !ok2 {
					return fmt.Errorf("%s/enum: must be an array", at)
				}
				keep := map[string]bool{}
				for _, x := range nl {
					var b strings.Builder
					encodeCompact(&b, x)
					keep[b.String()] = true
				}
				var common []any
				for _, x := range ol {
					var b strings.Builder
					encodeCompact(&b, x)
					if keep[b.String()] {
						common = append(common, x)
					}
				}
				if len(common) == 0 {
					return fmt.Errorf("%s: the enums of allOf have no value in common", at)
				}
				out.vals[k] = common
				continue
			}
			if old, ok := out.vals[k]; ok {
				var a, b strings.Builder
				encodeCompact(&a, old)
				encodeCompact(&b, v)
				if a.String() != b.String() {
					return fmt.Errorf("%s: allOf with different values of %q is not supported", at, k)
				}
				continue
			}
			out.keys = append(out.keys, k)
			out.vals[k] = v
		}
		return nil
	}
	if err := add(s, path, 0); err != nil {
		return nil, err
	}
	if len(props.keys) > 0 {
		out.keys = append(out.keys, "properties")
		out.vals["properties"] = props
	}
	if len(required) > 0 {
		out.keys = append(out.keys, "required")
		out.vals["required"] = required
	}
	return out, nil
}

// resolveShallow follows $ref chains (a few levels) to an object schema.
func (c *schemaConverter) resolveShallow(v any, path string) (*object, error) {
	for range 16 {
		o, ok := v.(*object)
		if !ok {
			if b, isBool := v.(bool); isBool && b {
				return &object{vals: map[string]any{}}, nil
			}
			return nil, fmt.Errorf("%s: must be a schema object", path)
		}
		r, ok := o.vals["$ref"].(string)
		if !ok {
			return o, nil
		}
		if !strings.HasPrefix(r, "#/") {
			return nil, fmt.Errorf("%s/$ref: %q is not a reference into this document", path, r)
		}
		var target any = c.doc
		for _, part := range strings.Split(r[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch t := target.(type) {
			case *object:
				if target, ok = t.get(part); !ok {
					return nil, fmt.Errorf("%s/$ref: %q not found", path, r)
				}
			case []any: // an index, as into the tools' anyOf
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(t) {
					return nil, fmt.Errorf("%s/$ref: %q not found", path, r)
				}
				target = t[i]
			default:
				return nil, fmt.Errorf("%s/$ref: %q not found", path, r)
			}
		}
		v = target
	}
	return nil, fmt.Errorf("%s: $ref chain too long", path)
}

// count reads a non-negative integer keyword bounded by the grammar's
// repetition limit; def when absent.
func count(s *object, k, path string, def int) (int, error) {
	v, ok := s.vals[k]
	if !ok {
		return def, nil
	}
	n, ok := v.(number)
	if !ok {
		return 0, fmt.Errorf("%s/%s: must be a number", path, k)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || i < 0 {
		return 0, fmt.Errorf("%s/%s: must be a non-negative integer", path, k)
	}
	if i > maxRepetition {
		return 0, fmt.Errorf("%s/%s: %d is above the supported limit of %d", path, k, i, maxRepetition)
	}
	return int(i), nil
}

// repeat is item repeated min..max times (max < 0: no maximum).
func repeat(item string, lo, hi int) string {
	switch {
	case hi == 0:
		return ""
	case lo == 0 && hi == 1:
		return item + "?"
	case lo == 0 && hi < 0:
		return item + "*"
	case lo == 1 && hi < 0:
		return item + "+"
	case hi < 0:
		return fmt.Sprintf("%s{%d,}", item, lo)
	case lo == hi:
		if lo == 1 {
			return item
		}
		return fmt.Sprintf("%s{%d}", item, lo)
	}
	return fmt.Sprintf("%s{%d,%d}", item, lo, hi)
}

func (c *schemaConverter) str(s *object, name, path string) (string, error) {
	_, hasPattern := s.vals["pattern"]
	_, hasFormat := s.vals["format"]
	_, hasMin := s.vals["minLength"]
	_, hasMax := s.vals["maxLength"]
	switch {
	case hasPattern && (hasFormat || hasMin || hasMax):
		return "", fmt.Errorf("%s: pattern together with format, minLength or maxLength is not supported", path)
	case hasFormat && (hasMin || hasMax):
		return "", fmt.Errorf("%s: format together with minLength or maxLength is not supported", path)
	case hasPattern:
		p, ok := s.vals["pattern"].(string)
		if !ok {
			return "", fmt.Errorf("%s/pattern: must be a string", path)
		}
		body, err := patternToGBNF(p)
		if err != nil {
			return "", fmt.Errorf("%s/pattern: %w", path, err)
		}
		c.prim("char")
		return c.addRule(name, `"\"" `+body+` "\""`), nil
	case hasFormat:
		f, _ := s.vals["format"].(string)
		switch f {
		case "date", "time", "date-time", "uuid":
			return c.addRule(name, `"\"" `+c.prim(f)+` "\""`), nil
		}
		return "", fmt.Errorf("%s/format: format %q is not supported (date, time, date-time and uuid are)", path, s.vals["format"])
	case hasMin || hasMax:
		lo, err := count(s, "minLength", path, 0)
		if err != nil {
			return "", err
		}
		hi, err := count(s, "maxLength", path, -1)
		if err != nil {
			return "", err
		}
		if hi >= 0 && hi < lo {
			return "", fmt.Errorf("%s: maxLength %d below minLength %d", path, hi, lo)
		}
		return c.addRule(name, `"\"" `+repeat(c.prim("char"), lo, hi)+` "\""`), nil
	}
	return c.addRule(name, c.prim("string")), nil
}

func (c *schemaConverter) array(s *object, name, path string) (string, error) {
	sp := c.prim("space")
	lo, err := count(s, "minItems", path, 0)
	if err != nil {
		return "", err
	}
	hi, err := count(s, "maxItems", path, -1)
	if err != nil {
		return "", err
	}
	if hi >= 0 && hi < lo {
		return "", fmt.Errorf("%s: maxItems %d below minItems %d", path, hi, lo)
	}
	items, hasItems := s.vals["items"]
	prefix, hasPrefix := s.vals["prefixItems"]
	if _, isList := prefix.([]any); hasPrefix && !isList && !hasItems {
		// a schema instead of a list: the item schema, as llama.cpp reads it
		items, hasItems, hasPrefix = prefix, true, false
	}
	if tuple, ok := items.([]any); ok { // the older tuple form of items
		if hasPrefix {
			return "", fmt.Errorf("%s: items as a list together with prefixItems", path)
		}
		prefix, hasPrefix, hasItems = tuple, true, false
		if _, ok := s.vals["additionalItems"]; ok {
			return "", fmt.Errorf("%s: additionalItems is not supported", path)
		}
	}
	if hasPrefix {
		list, ok := prefix.([]any)
		if !ok {
			return "", fmt.Errorf("%s/prefixItems: must be an array", path)
		}
		var parts []string
		for i, it := range list {
			r, err := c.visit(it, fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return "", err
			}
			parts = append(parts, r+" "+sp)
		}
		body := strings.Join(parts, ` "," `+sp+` `)
		n := len(list)
		extraLo, extraHi := 0, 0
		if hasItems {
			if b, ok := items.(bool); !ok || b {
				extraLo, extraHi = max(0, lo-n), -1
				if hi >= 0 {
					extraHi = max(0, hi-n)
				}
			}
		}
		if !hasItems || extraHi == 0 {
			if lo > n || hi >= 0 && hi < n {
				return "", fmt.Errorf("%s: minItems/maxItems contradict the %d prefixItems", path, n)
			}
		}
		if extraHi != 0 {
			it, err := c.visit(items, name+"-rest", path+"/items")
			if err != nil {
				return "", err
			}
			more := repeat(`( "," `+sp+` `+it+` `+sp+` )`, extraLo, extraHi)
			if n == 0 {
				return c.arrayOf(name, it, lo, hi), nil
			}
			body += " " + more
		}
		if n == 0 {
			return c.addRule(name, `"[" `+sp+` "]"`), nil
		}
		return c.addRule(name, `"[" `+sp+` `+body+` "]"`), nil
	}
	if !hasItems {
		items = true
	}
	if b, ok := items.(bool); ok && !b {
		if lo > 0 {
			return "", fmt.Errorf("%s: items false with minItems %d", path, lo)
		}
		return c.addRule(name, `"[" `+sp+` "]"`), nil
	}
	it, err := c.visit(items, name+"-item", path+"/items")
	if err != nil {
		return "", err
	}
	return c.arrayOf(name, it, lo, hi), nil
}

func (c *schemaConverter) arrayOf(name, it string, lo, hi int) string {
	sp := c.prim("space")
	if hi == 0 {
		return c.addRule(name, `"[" `+sp+` "]"`)
	}
	restHi := -1
	if hi > 0 {
		restHi = hi - 1
	}
	seq := it + " " + sp
	if r := repeat(`( "," `+sp+` `+it+` `+sp+` )`, max(0, lo-1), restHi); r != "" {
		seq += " " + r
	}
	if lo == 0 {
		seq = "( " + seq + " )?"
	}
	return c.addRule(name, `"[" `+sp+` `+seq+` "]"`)
}

type prop struct {
	name     string
	rule     string
	required bool
}

func (c *schemaConverter) object(s *object, name, path string) (string, error) {
	sp := c.prim("space")
	var props []prop
	seen := map[string]bool{}
	if pv, ok := s.vals["properties"]; ok {
		po, ok := pv.(*object)
		if !ok {
			return "", fmt.Errorf("%s/properties: must be an object", path)
		}
		for _, k := range po.keys {
			r, err := c.visit(po.vals[k], name+"-"+k, path+"/properties/"+k)
			if err != nil {
				return "", err
			}
			props = append(props, prop{name: k, rule: r})
			seen[k] = true
		}
	}
	if rv, ok := s.vals["required"]; ok {
		list, ok := rv.([]any)
		if !ok {
			return "", fmt.Errorf("%s/required: must be an array", path)
		}
		for _, e := range list {
			k, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("%s/required: must list strings", path)
			}
			if !seen[k] {
				// required but not described: any value
				props = append(props, prop{name: k, rule: c.prim("value")})
				seen[k] = true
			}
			for i := range props {
				if props[i].name == k {
					props[i].required = true
				}
			}
		}
	}
	// additional properties: llama.cpp's convention, none when properties
	// are listed unless asked for
	var extra string
	add, hasAdd := s.vals["additionalProperties"]
	if !hasAdd && len(props) == 0 {
		add, hasAdd = true, true
	}
	if hasAdd {
		if b, ok := add.(bool); !ok || b {
			val, err := c.visit(add, name+"-additional-value", path+"/additionalProperties")
			if err != nil {
				return "", err
			}
			key := c.prim("string")
			if len(props) > 0 {
				names := make([]string, len(props))
				for i, p := range props {
					names[i] = p.name
				}
				key = c.addRule(name+"-additional-key", c.notStrings(names))
			}
			extra = c.addRule(name+"-additional-kv", key+" "+sp+` ":" `+sp+` `+val+" "+sp)
		}
	}
	if len(props) == 0 && extra == "" {
		return c.addRule(name, `"{" `+sp+` "}"`), nil
	}

	kvs := make([]string, len(props))
	for i, p := range props {
		kvs[i] = c.addRule(name+"-"+p.name+"-kv", lit(quoteJSON(p.name))+" "+sp+` ":" `+sp+` `+p.rule+" "+sp)
	}
	comma := `"," ` + sp + ` `
	// after[i]: properties i.. when one is already written (each needs a
	// comma); first[i]: properties i.. when none is written yet
	after := make([]string, len(props)+1)
	if extra != "" {
		after[len(props)] = "( " + comma + extra + " )*"
	}
	for i := len(props) - 1; i >= 0; i-- {
		item := comma + kvs[i]
		if !props[i].required {
			item = "( " + item + " )?"
		}
		after[i] = strings.TrimSpace(item + " " + after[i+1])
	}
	first := ""
	if extra != "" {
		first = "( " + extra + " ( " + comma + extra + " )* )?"
	}
	for i := len(props) - 1; i >= 0; i-- {
		withThis := strings.TrimSpace(kvs[i] + " " + after[i+1])
		switch {
		case props[i].required:
			first = withThis
		case first == "":
			first = "( " + withThis + " )?"
		default:
			first = "( " + withThis + " | " + first + " )"
		}
	}
	return c.addRule(name, `"{" `+sp+` `+first+` "}"`), nil
}

// notStrings is a JSON string whose content is none of names (compared as
// written, escapes not decoded).
func (c *schemaConverter) notStrings(names []string) string {
	type trieNode struct {
		kids map[rune]*trieNode
		keys []rune
		end  bool
	}
	root := &trieNode{kids: map[rune]*trieNode{}}
	for _, n := range names {
		t := root
		for _, r := range n {
			k, ok := t.kids[r]
			if !ok {
				k = &trieNode{kids: map[rune]*trieNode{}}
				t.kids[r] = k
				t.keys = append(t.keys, r)
			}
			t = k
		}
		t.end = true
	}
	ch := c.prim("char")
	var walk func(t *trieNode) string
	walk = func(t *trieNode) string {
		var alts []string
		var excl strings.Builder
		for _, r := range t.keys {
			if r == '"' || r == '\\' || r < 0x20 {
				// names with these are written escaped; any escape is a
				// different spelling, so they never collide with "char"
				continue
			}
			alts = append(alts, lit(string(r))+" "+walk(t.kids[r]))
			excl.WriteString(classChar(uint32(r)))
		}
		alts = append(alts, `( [^"\\\x00-\x1F`+excl.String()+`] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) ) `+ch+"*")
		body := "( " + strings.Join(alts, " | ") + " )"
		if !t.end {
			body += "?"
		}
		return body
	}
	return `"\"" ` + walk(root) + ` "\""`
}

// classChar writes cp for use inside a GBNF class.
func classChar(cp uint32) string {
	switch {
	case cp == '\\' || cp == ']' || cp == '[' || cp == '-' || cp == '^' || cp == '"':
		return `\` + string(rune(cp))
	case cp < 0x20 || cp == 0x7f:
		return fmt.Sprintf(`\x%02X`, cp)
	case cp > 0xFFFF:
		return fmt.Sprintf(`\U%08X`, cp)
	case cp >= 0xD800 && cp <= 0xDFFF:
		return fmt.Sprintf(`\u%04X`, cp)
	}
	return string(rune(cp))
}

func (c *schemaConverter) integer(s *object, name, path string) (string, error) {
	var lo, hi int64
	hasLo, hasHi := false, false
	bound := func(k string, up bool, delta int) (bool, error) {
		v, ok := s.vals[k]
		if !ok {
			return false, nil
		}
		n, ok := v.(number)
		if !ok {
			return false, fmt.Errorf("%s/%s: must be a number", path, k)
		}
		i, ok, inRange := integerBound(string(n), up, delta)
		if !ok {
			return false, fmt.Errorf("%s/%s: bad number %s", path, k, n)
		}
		if !inRange {
			return false, fmt.Errorf("%s/%s: %s is outside the 64-bit range", path, k, n)
		}
		if up {
			lo = i
		} else {
			hi = i
		}
		return true, nil
	}
	var err error
	for _, b := range []struct {
		k     string
		up    bool
		delta int
	}{{"minimum", true, 0}, {"exclusiveMinimum", true, 1}, {"maximum", false, 0}, {"exclusiveMaximum", false, -1}} {
		if _, ok := s.vals[b.k]; !ok {
			continue
		}
		if b.up && hasLo || !b.up && hasHi {
			return "", fmt.Errorf("%s: both %q and its exclusive form are not supported", path, b.k)
		}
		var got bool
		if got, err = bound(b.k, b.up, b.delta); err != nil {
			return "", err
		}
		if b.up {
			hasLo = hasLo || got
		} else {
			hasHi = hasHi || got
		}
	}
	if !hasLo && !hasHi {
		return c.addRule(name, c.prim("integer")), nil
	}
	if hasLo && hasHi && lo > hi {
		return "", fmt.Errorf("%s: no integer lies between the minimum and the maximum", path)
	}
	var l, h *int64
	if hasLo {
		l = &lo
	}
	if hasHi {
		h = &hi
	}
	return c.addRule(name, "( "+intRange(l, h)+" )"), nil
}

// integerBound is the integer bound a JSON number text sets: rounded up
// (up, a minimum) or down to an integer, and moved by delta (+1 or -1, an
// exclusive bound) when the number is an integer already. ok is false for
// text that is not a decimal number; inRange is false when the bound lies
// outside int64. It works on the decimal digits with uint64 arithmetic
// and explicit overflow checks, so any exponent is handled exactly.
func integerBound(text string, up bool, delta int) (v int64, ok, inRange bool) {
	neg, digits, exp, ok := splitDecimal(text)
	if !ok {
		return 0, false, false
	}
	// the value is ±digits × 10^exp, digits without leading or trailing zeros
	var whole string // the integer part of the magnitude
	exact := true
	switch {
	case digits == "":
	case exp >= 0:
		if len(digits)+exp > 20 {
			return 0, true, false // at least 10^20
		}
		whole = digits + strings.Repeat("0", exp)
	default:
		exact = false // trailing zeros are gone, so a fraction remains
		if -exp < len(digits) {
			whole = digits[:len(digits)+exp]
		}
	}
	var mag uint64
	if whole != "" {
		m, err := strconv.ParseUint(whole, 10, 64)
		if err != nil {
			return 0, true, false // above 2^64
		}
		mag = m
	}
	// value = ±(mag + fraction); adj moves the integer ±mag to the bound
	adj := 0
	switch {
	case exact:
		adj = delta
	case up && !neg: // ceil(mag.f) = mag+1
		adj = 1
	case !up && neg: // floor(-mag.f) = -mag-1
		adj = -1
	}
	v, inRange = addToSigned(neg, mag, adj)
	return v, true, inRange
}

// addToSigned is ±mag + adj (adj in -1..1) when it fits in int64.
func addToSigned(neg bool, mag uint64, adj int) (int64, bool) {
	const maxMag = 1 << 63 // the magnitude of math.MinInt64
	if !neg {
		switch {
		case adj < 0 && mag == 0:
			return -1, true
		case adj < 0:
			mag--
		case adj > 0:
			if mag == math.MaxUint64 {
				return 0, false
			}
			mag++
		}
		if mag > math.MaxInt64 {
			return 0, false
		}
		return int64(mag), true
	}
	switch {
	case adj > 0 && mag == 0:
		return 1, true
	case adj > 0:
		mag--
	case adj < 0:
		if mag == math.MaxUint64 {
			return 0, false
		}
		mag++
	}
	if mag > maxMag {
		return 0, false
	}
	return int64(0 - mag), true // two's complement: 2^63 becomes MinInt64
}

// splitDecimal splits a JSON number into its sign, its significant
// decimal digits (no leading or trailing zeros; "" for zero) and the power
// of ten they are scaled by. Exponents are clamped far outside any int64
// (the digits are at most a schema long), so they cannot overflow.
func splitDecimal(text string) (neg bool, digits string, exp int, ok bool) {
	s := text
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	intEnd := 0
	for intEnd < len(s) && s[intEnd] >= '0' && s[intEnd] <= '9' {
		intEnd++
	}
	intPart, frac := s[:intEnd], ""
	s = s[intEnd:]
	if strings.HasPrefix(s, ".") {
		i := 1
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac, s = s[1:i], s[i:]
		if frac == "" {
			return false, "", 0, false
		}
	}
	if intPart == "" {
		return false, "", 0, false
	}
	if s != "" {
		if s[0] != 'e' && s[0] != 'E' {
			return false, "", 0, false
		}
		s = s[1:]
		eneg := false
		if s != "" && (s[0] == '+' || s[0] == '-') {
			eneg, s = s[0] == '-', s[1:]
		}
		if s == "" {
			return false, "", 0, false
		}
		const clamp = 1 << 30
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false, "", 0, false
			}
			if exp < clamp {
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if eneg {
			exp = -exp
		}
	}
	digits = strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	trimmed := strings.TrimRight(digits, "0")
	exp += len(digits) - len(trimmed)
	return neg, trimmed, exp, true
}

// intRange is GBNF for the integers in [lo, hi] written as JSON writes them
// (nil: unbounded on that side; unbounded runs stop at 19 digits).
func intRange(lo, hi *int64) string {
	const maxDigits = 19
	var alts []string
	// negative part: -x for x in [max(1, -hi), -lo]
	if lo == nil || *lo < 0 {
		a := uint64(1)
		if hi != nil && *hi < 0 {
			a = 0 - uint64(*hi) // the magnitude, also of MinInt64
		}
		var b *uint64
		if lo != nil {
			m := 0 - uint64(*lo)
			b = &m
		}
		alts = append(alts, `"-" ( `+natRange(a, b, maxDigits)+` )`)
	}
	// non-negative part: [max(0, lo), hi]
	if hi == nil || *hi >= 0 {
		a := uint64(0)
		if lo != nil && *lo > 0 {
			a = uint64(*lo)
		}
		var b *uint64
		if hi != nil {
			m := uint64(*hi)
			b = &m
		}
		alts = append(alts, natRange(a, b, maxDigits))
	}
	return strings.Join(alts, " | ")
}

// natRange is GBNF for the naturals in [a, b] without leading zeros (b
// nil: up to maxDigits digits).
func natRange(a uint64, b *uint64, maxDigits int) string {
	as := strconv.FormatUint(a, 10)
	var alts []string
	if b == nil {
		for l := len(as); l <= maxDigits; l++ {
			lo := as
			if l > len(as) {
				// every number of l digits; the rest in one repetition
				alts = append(alts, fmt.Sprintf("[1-9] [0-9]{%d,%d}", l-1, maxDigits-1))
				break
			}
			alts = append(alts, sameLength(lo, strings.Repeat("9", l)))
		}
		return strings.Join(alts, " | ")
	}
	bs := strconv.FormatUint(*b, 10)
	for l := len(as); l <= len(bs); l++ {
		lo, hi := as, bs
		if l > len(as) {
			lo = "1" + strings.Repeat("0", l-1)
		}
		if l < len(bs) {
			hi = strings.Repeat("9", l)
		}
		alts = append(alts, sameLength(lo, hi))
	}
	return strings.Join(alts, " | ")
}

// sameLength is GBNF for the decimal strings of lo's length between lo and
// hi inclusive (lo <= hi, same length).
func sameLength(lo, hi string) string {
	if lo == "" {
		return `""`
	}
	n := len(lo)
	if lo == strings.Repeat("0", n) && hi == strings.Repeat("9", n) && n > 1 {
		return fmt.Sprintf("[0-9]{%d}", n)
	}
	if lo[0] == hi[0] {
		rest := ""
		if n > 1 {
			rest = " " + sameLength(lo[1:], hi[1:])
		}
		return "( " + lit(lo[:1]) + rest + " )"
	}
	digits := func(x, y byte) string {
		if x == y {
			return "[" + string(x) + "]"
		}
		return "[" + string(x) + "-" + string(y) + "]"
	}
	if n == 1 {
		return digits(lo[0], hi[0])
	}
	tail := func(k int) string {
		if k == 1 {
			return "[0-9]"
		}
		return fmt.Sprintf("[0-9]{%d}", k)
	}
	var alts []string
	loStart, hiEnd := lo[0], hi[0]
	if lo[1:] != strings.Repeat("0", n-1) {
		alts = append(alts, lit(lo[:1])+" "+sameLength(lo[1:], strings.Repeat("9", n-1)))
		loStart++
	}
	full := hiEnd
	if hi[1:] != strings.Repeat("9", n-1) {
		full--
	}
	if loStart <= full {
		alts = append(alts, digits(loStart, full)+" "+tail(n-1))
	}
	if hi[1:] != strings.Repeat("9", n-1) {
		alts = append(alts, lit(hi[:1])+" "+sameLength(strings.Repeat("0", n-1), hi[1:]))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}
