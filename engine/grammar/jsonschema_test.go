package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/moonlm/moonlm/engine/tokenizer"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

func mustSchema(t testing.TB, schema string) *Grammar {
	t.Helper()
	g, err := CompileJSONSchema([]byte(schema))
	if err != nil {
		t.Fatalf("CompileJSONSchema(%s): %v", schema, err)
	}
	return g
}

// schemaCases are schemas with outputs they must accept and reject.
var schemaCases = []struct {
	schema    string
	good, bad []string
}{
	{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]}`,
		[]string{`{"b":"x"}`, `{"a":1,"b":"x"}`, `{ "a": -5, "b": "", "c": true }`, `{"b":"x","c":false}`},
		[]string{`{}`, `{"a":1}`, `{"b":"x","a":1}`, `{"b":"x","d":1}`, `{"a":1.5,"b":"x"}`, `{"b":"x",}`}},
	{`{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"null"}}}`,
		[]string{`{}`, `{"x":1.5e3}`, `{"y":null}`, `{"x":0,"y":null}`},
		[]string{`{"y":null,"x":1}`, `{"x":01}`, `{,}`}},
	{`{"type":"object","properties":{"k":{"type":"string"}},"additionalProperties":{"type":"integer"}}`,
		[]string{`{"k":"v","n":1}`, `{"z":2,"kk":3}`, `{"k":"v"}`, `{"ka":1}`},
		[]string{`{"k":1}`, `{"k":"v","n":"s"}`, `{"n":1,"k":"v"}`}},
	{`{"type":"object"}`, []string{`{}`, `{"any":[1,{"x":null}]}`}, []string{`[]`}},
	{`{"type":"object","properties":{},"additionalProperties":false}`, []string{`{}`}, []string{`{"a":1}`}},
	{`{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}`,
		[]string{`[1,2]`, `[1, 2, 3]`}, []string{`[]`, `[1]`, `[1,2,3,4]`, `[1,"a"]`}},
	{`{"type":"array","items":{"type":"string"},"maxItems":0}`, []string{`[]`}, []string{`[""]`}},
	{`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}`,
		[]string{`["a",1]`}, []string{`["a"]`, `["a",1,2]`, `[1,"a"]`}},
	{`{"type":"array","prefixItems":[{"const":1}],"items":{"type":"boolean"},"maxItems":3}`,
		[]string{`[1]`, `[1,true]`, `[1,true,false]`}, []string{`[true]`, `[1,true,true,true]`}},
	{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"é\n"`}, []string{`"a"`, `"abcd"`}},
	{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`}, []string{`"2024-13-01"`, `"24-01-01"`}},
	{`{"type":"string","format":"time"}`, []string{`"23:59:59Z"`, `"01:02:03.123+05:30"`}, []string{`"24:00:00Z"`, `"12:00:00"`}},
	{`{"type":"string","format":"date-time"}`, []string{`"2024-01-02T03:04:05Z"`}, []string{`"2024-01-02 03:04:05Z"`}},
	{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
	{`{"type":"string","pattern":"^[A-Z]{2}-\\d{3}(\\.x)?$"}`, []string{`"AB-123"`, `"XY-000.x"`}, []string{`"AB-12"`, `"ab-123"`, `"AB-123.y"`}},
	{`{"type":"string","pattern":"a\"b\\\\c"}`, []string{`"a\"b\\c"`, `"xxa\"b\\cyy"`}, []string{`"a"b\c"`, `"abc"`}},
	{`{"type":"string","pattern":"^(?:cat|dog)s?[^\\s]*$"}`, []string{`"cats"`, `"dog!x"`}, []string{`"cow"`, `"cat x"`}},
	{`{"enum":["red","green",1,null,{"a":[true]}]}`, []string{`"red"`, `1`, `null`, `{"a":[true]}`}, []string{`"blue"`, `2`, `{"a": [true]}`}},
	{`{"const":"a<b&c"}`, []string{`"a<b&c"`}, []string{`"a\u003cb&c"`}},
	{`{"type":["string","null"],"maxLength":1}`, []string{`"a"`, `null`}, []string{`"ab"`, `1`}},
	{`{"anyOf":[{"type":"integer"},{"type":"array","items":{"$ref":"#/$defs/leaf"}}],"$defs":{"leaf":{"enum":["x","y"]}}}`,
		[]string{`3`, `["x","y"]`, `[]`}, []string{`["z"]`, `"x"`}},
	{`{"oneOf":[{"type":"boolean"},{"type":"null"}]}`, []string{`true`, `null`}, []string{`1`}},
	{`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}}}]}`,
		[]string{`{"a":1}`, `{"a":1,"b":"x"}`}, []string{`{"b":"x"}`}},
	{`{"$ref":"#/definitions/node","definitions":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/definitions/node"},{"type":"null"}]}},"required":["v","next"]}}}`,
		[]string{`{"v":1,"next":null}`, `{"v":1,"next":{"v":2,"next":null}}`}, []string{`{"v":1}`, `{"v":1,"next":{"v":2}}`}},
	{`{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}},"required":["kids"]}`,
		[]string{`{"kids":[]}`, `{"kids":[{"kids":[]}]}`}, []string{`{"kids":[1]}`}},
	{`true`, []string{`1`, `{"a":[]}`}, []string{`{`}},
	{`{}`, []string{`"s"`}, []string{`s`}},
	{`{"title":"T","description":"d","type":"boolean","default":true}`, []string{`false`}, []string{`0`}},
	{`{"type":"object","required":["x"]}`, []string{`{"x":[1]}`}, []string{`{}`}},
	// keywords beside anyOf apply to every branch
	{`{"type":"object","anyOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"null"}},"required":["b"]}]}`,
		[]string{`{"a":1}`, `{"b":null}`}, []string{`{"a":1,"b":null}`, `{}`, `1`}},
	{`{"allOf":[{"enum":["a","b","c"]},{"enum":["b","c","d"]}]}`, []string{`"b"`, `"c"`}, []string{`"a"`, `"d"`}},
	{`{"type":"object","allOf":[{"properties":{"a":{"const":1}},"required":["a"]},{"anyOf":[{"properties":{"c":{"const":2}},"required":["c"]},{"properties":{"d":{"const":3}},"required":["d"]}]}]}`,
		[]string{`{"a":1,"c":2}`, `{"a":1,"d":3}`}, []string{`{"a":1}`, `{"c":2}`, `{"a":1,"c":2,"d":3}`}},
	{`{"type":"array","prefixItems":{"type":"boolean"}}`, []string{`[]`, `[true,false]`}, []string{`[1]`}},
}

func TestJSONSchemaSamples(t *testing.T) {
	for _, c := range schemaCases {
		g := mustSchema(t, c.schema)
		for _, s := range c.good {
			if !acceptString(t, g, s) || !completeOK(g, s) {
				src, _ := FromJSONSchema([]byte(c.schema))
				t.Errorf("%s should accept %s\n%s", c.schema, s, src)
			}
		}
		for _, s := range c.bad {
			if acceptString(t, g, s) || completeOK(g, s) {
				src, _ := FromJSONSchema([]byte(c.schema))
				t.Errorf("%s should reject %s\n%s", c.schema, s, src)
			}
		}
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	cases := []struct{ schema, msg string }{
		{`{"type":"array","uniqueItems":true}`, `"uniqueItems" is not supported`},
		{`{"type":"object","patternProperties":{"a":{}}}`, `"patternProperties" is not supported`},
		{`{"not":{"type":"string"}}`, `"not" is not supported`},
		{`{"if":{},"then":{}}`, `"if" is not supported`},
		{`{"type":"number","minimum":0}`, `"minimum" on type number`},
		{`{"type":"integer","multipleOf":2}`, `"multipleOf" is not supported`},
		{`{"type":"string","format":"email"}`, `format "email" is not supported`},
		{`{"$ref":"https://example.com/s.json"}`, `remote references are not supported`},
		{`{"$ref":"#/$defs/missing"}`, `not found`},
		{`{"type":"string","pattern":"^(?=a)b$"}`, `lookaround`},
		{`{"type":"string","pattern":"(a)\\1"}`, `backreference`},
		{`{"type":"string","pattern":"a^b"}`, `anchors inside`},
		{`{"type":"string","maxLength":5000}`, `above the supported limit`},
		{`{"type":"integer","minimum":5,"maximum":4}`, `no integer`},
		{`{"type":"integer","minimum":1e30}`, `outside the 64-bit range`},
		{`{"type":"strange"}`, `unknown type "strange"`},
		{`{"anyOf":[{"type":"string"}],"oneOf":[{}]}`, `anyOf together with oneOf`},
		{`{"allOf":[{"enum":[1,2]},{"enum":[3]}]}`, `no value in common`},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, `different values of "type"`},
		{`false`, `admits no value`},
		{`{"type":"string"} x`, `after the top-level value`},
		{`{"a":1,"a":2}`, `duplicate key`},
		{`[1]`, `must be an object or a boolean`},
		{`{"enum":[]}`, `non-empty array`},
		{`{"type":"array","prefixItems":[{}],"minItems":2}`, `contradict`},
		{`{"minimum":1,"maxLength":2}`, `keywords of both`},
	}
	for _, c := range cases {
		_, err := FromJSONSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %q", c.schema, err, c.msg)
		}
	}
	deep := strings.Repeat(`{"type":"array","items":`, 100) + "{}" + strings.Repeat("}", 100)
	if _, err := FromJSONSchema([]byte(deep)); err == nil {
		t.Error("a schema nested 100 deep was accepted")
	}
}

// Integer ranges: every integer near the bounds is accepted exactly when
// it lies in the range.
func TestJSONSchemaIntegerRanges(t *testing.T) {
	bounds := []struct {
		lo, hi *int64
		keys   string
	}{}
	p := func(v int64) *int64 { return &v }
	for _, b := range [][2]*int64{
		{p(0), p(150)}, {p(-15), p(7)}, {p(-120), p(-3)}, {p(7), nil}, {nil, p(-7)}, {nil, p(99)}, {p(-99), nil},
		{p(1), p(1)}, {p(0), p(0)}, {p(10), p(1000)}, {p(-1000), p(-10)}, {p(123), p(4567)}, {p(-9), p(9)},
	} {
		var keys []string
		if b[0] != nil {
			keys = append(keys, fmt.Sprintf(`"minimum":%d`, *b[0]))
		}
		if b[1] != nil {
			keys = append(keys, fmt.Sprintf(`"maximum":%d`, *b[1]))
		}
		bounds = append(bounds, struct {
			lo, hi *int64
			keys   string
		}{b[0], b[1], strings.Join(keys, ",")})
	}
	for _, b := range bounds {
		g := mustSchema(t, `{"type":"integer",`+b.keys+`}`)
		var probe []int64
		for _, c := range []*int64{b.lo, b.hi} {
			if c != nil {
				for d := int64(-25); d <= 25; d++ {
					probe = append(probe, *c+d)
				}
			}
		}
		probe = append(probe, 0, 1, -1, 10, -10, 100, 5000, -5000, 123456789)
		for _, v := range probe {
			want := (b.lo == nil || v >= *b.lo) && (b.hi == nil || v <= *b.hi)
			if got := completeOK(g, strconv.FormatInt(v, 10)); got != want {
				t.Errorf("{%s}: %d accepted=%v, want %v", b.keys, v, got, want)
			}
		}
		for _, s := range []string{"-0", "01", "00", "+1"} {
			if completeOK(g, s) {
				t.Errorf("{%s}: %q accepted", b.keys, s)
			}
		}
	}
	// exclusive bounds and fractional bounds round inward
	g := mustSchema(t, `{"type":"integer","exclusiveMinimum":2,"maximum":5.5}`)
	for v := -1; v <= 8; v++ {
		if got, want := completeOK(g, strconv.Itoa(v)), v > 2 && v <= 5; got != want {
			t.Errorf("(2, 5.5]: %d accepted=%v", v, got)
		}
	}
	// the extremes of int64
	g = mustSchema(t, `{"type":"integer","minimum":-9223372036854775808,"maximum":9223372036854775807}`)
	for _, s := range []string{"-9223372036854775808", "9223372036854775807", "0"} {
		if !completeOK(g, s) {
			t.Errorf("int64 range rejects %s", s)
		}
	}
	if completeOK(g, "9223372036854775808") {
		t.Error("int64 range accepts 2^63")
	}
}

// integerBound agrees with exact rational arithmetic (math/big, which
// only the test links) on numbers around zero, around the int64 limits,
// and written with fractions and exponents of either sign.
func TestIntegerBound(t *testing.T) {
	var texts []string
	for _, base := range []string{"0", "1", "7", "10", "9223372036854775807", "9223372036854775808",
		"9223372036854775806", "18446744073709551615", "18446744073709551616", "99999999999999999999", "100000000000000000000"} {
		for _, sign := range []string{"", "-"} {
			texts = append(texts, sign+base)
			for _, frac := range []string{".0", ".5", ".000", ".0001", ".9999999999999999999999"} {
				texts = append(texts, sign+base+frac)
			}
		}
	}
	for _, m := range []string{"1", "1.5", "92233720368547758.07", "9.223372036854775808", "0.00", "25", "-3.25", "-0"} {
		for _, e := range []string{"e0", "E1", "e+2", "e-1", "e-2", "e18", "e19", "e20", "e-19", "e-400", "e400", "E-0"} {
			texts = append(texts, m+e)
		}
	}
	minI, maxI := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	for _, text := range texts {
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			t.Fatalf("the reference cannot read %s", text)
		}
		for _, c := range []struct {
			up    bool
			delta int
		}{{true, 0}, {true, 1}, {false, 0}, {false, -1}} {
			want := new(big.Int).Quo(r.Num(), r.Denom()) // truncated toward zero
			if r.IsInt() {
				want.Add(want, big.NewInt(int64(c.delta)))
			} else if c.up && r.Sign() > 0 {
				want.Add(want, big.NewInt(1))
			} else if !c.up && r.Sign() < 0 {
				want.Sub(want, big.NewInt(1))
			}
			wantIn := want.Cmp(minI) >= 0 && want.Cmp(maxI) <= 0
			got, ok, in := integerBound(text, c.up, c.delta)
			if !ok || in != wantIn || in && got != want.Int64() {
				t.Errorf("integerBound(%s, up=%v, delta=%d) = %d, %v, %v; want %s, in range %v", text, c.up, c.delta, got, ok, in, want, wantIn)
			}
		}
	}
	for _, bad := range []string{"", "-", "1.", ".5", "1e", "1e+", "0x10", "1.5.5", "1e5e5", "--1", "+1"} {
		if _, ok, _ := integerBound(bad, true, 0); ok {
			t.Errorf("integerBound(%q) accepted", bad)
		}
	}
	// an exponent too long for any integer type is clamped, not overflowed
	if _, ok, in := integerBound("1e99999999999999999999999", true, 0); !ok || in {
		t.Errorf("1e99999999999999999999999: ok=%v in range=%v", ok, in)
	}
	if v, ok, in := integerBound("1e-99999999999999999999999", true, 0); !ok || !in || v != 1 {
		t.Errorf("1e-99999999999999999999999 rounded up: %d %v %v", v, ok, in)
	}
}

// ---- conformance: samples from a real vocabulary validate ----

func smolVocab(t testing.TB) *tokenizer.Tokenizer {
	return openVocab(t, "smollm2")
}

var vocabs sync.Map

func openVocab(t testing.TB, name string) *tokenizer.Tokenizer {
	t.Helper()
	path := shareddata.Path(t, "vocab/ggml-vocab-"+name+".gguf")
	if v, ok := vocabs.Load(path); ok {
		return v.(*tokenizer.Tokenizer)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabs.Store(path, tok)
	return tok
}

const conformanceSchema = `{
  "$defs": {
    "color": {"enum": ["red", "green", "blue"]},
    "point": {"type": "object", "properties": {
        "x": {"type": "integer", "minimum": -100, "maximum": 100},
        "y": {"type": "number"},
        "label": {"type": "string", "maxLength": 6}},
      "required": ["x", "y"]}
  },
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "color": {"$ref": "#/$defs/color"},
    "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1, "maxItems": 3},
    "tags": {"type": "array", "items": {"enum": ["a", "b", 7, null]}, "maxItems": 4},
    "when": {"type": "string", "format": "date"},
    "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{1,3}$"},
    "ok": {"type": "boolean"},
    "nested": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"c": {"$ref": "#/$defs/color"}, "n": {"type": "integer", "exclusiveMinimum": 0}}, "required": ["c"]}]}
  },
  "required": ["name", "color", "points"]
}`

// TestJSONSchemaConformance samples 200 outputs at temperature 1.5 from
// random logits over SmolLM2's vocabulary, masked by the matcher; each must
// be JSON that validates against the schema.
func TestJSONSchemaConformance(t *testing.T) {
	tok := smolVocab(t)
	g := mustSchema(t, conformanceSchema)
	schema, err := decodeOrdered([]byte(conformanceSchema))
	if err != nil {
		t.Fatal(err)
	}
	m := mustMatcher(t, g, tok)
	rng := rand.New(rand.NewPCG(5, 6))
	n := 200
	if testing.Short() {
		n = 20
	}
	logits := make([]float32, tok.VocabSize())
	for i := range n {
		m.Reset()
		var out []byte
		ended := false
		for step := 0; step < 3000; step++ {
			if m.Done() {
				ended = true
				break
			}
			id := sampleFast(m, logits, rng, 1.5)
			if id < 0 {
				t.Fatalf("sample %d: every token masked after %q", i, out)
			}
			if err := m.Accept(id); err != nil {
				t.Fatalf("sample %d: %v", i, err)
			}
			if tok.IsEOG(id) {
				ended = true
				break
			}
			out = append(out, tok.Piece(id)...)
		}
		if !ended {
			t.Fatalf("sample %d did not end: %q", i, out)
		}
		var v any
		d := json.NewDecoder(strings.NewReader(string(out)))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			t.Fatalf("sample %d is not JSON (%v): %q", i, err, out)
		}
		if err := validate(schema, schema, v, "#"); err != nil {
			t.Fatalf("sample %d does not validate: %v\n%s", i, err, out)
		}
		if i < 3 {
			t.Logf("sample %d: %s", i, out)
		}
	}
}

// validate is a small JSON-schema validator for the keywords the tests use.
func validate(root, s any, v any, path string) error {
	o, ok := s.(*object)
	if !ok {
		return nil // true or {}
	}
	if r, ok := o.vals["$ref"].(string); ok {
		var target any = root
		for _, part := range strings.Split(strings.TrimPrefix(r, "#/"), "/") {
			if part == "#" || part == "" {
				continue
			}
			target, _ = target.(*object).get(part)
		}
		return validate(root, target, v, path)
	}
	if alts, ok := o.vals["anyOf"].([]any); ok {
		for _, a := range alts {
			if validate(root, a, v, path) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: no anyOf branch matches %v", path, v)
	}
	if e, ok := o.vals["enum"].([]any); ok {
		for _, x := range e {
			var a, b strings.Builder
			encodeCompact(&a, x)
			encodeCompact(&b, toOrdered(v))
			if a.String() == b.String() {
				return nil
			}
		}
		return fmt.Errorf("%s: %v not in enum", path, v)
	}
	typ, _ := o.vals["type"].(string)
	num := func(k string) (float64, bool) {
		n, ok := o.vals[k].(number)
		if !ok {
			return 0, false
		}
		f, _ := strconv.ParseFloat(string(n), 64)
		return f, true
	}
	switch typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", path)
		}
		props, _ := o.vals["properties"].(*object)
		for k, pv := range obj {
			ps, ok := props.get(k)
			if !ok {
				return fmt.Errorf("%s: unexpected property %q", path, k)
			}
			if err := validate(root, ps, pv, path+"/"+k); err != nil {
				return err
			}
		}
		req, _ := o.vals["required"].([]any)
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: missing %q", path, r)
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: not an array", path)
		}
		if lo, ok := num("minItems"); ok && float64(len(arr)) < lo {
			return fmt.Errorf("%s: %d items", path, len(arr))
		}
		if hi, ok := num("maxItems"); ok && float64(len(arr)) > hi {
			return fmt.Errorf("%s: %d items", path, len(arr))
		}
		for i, e := range arr {
			if err := validate(root, o.vals["items"], e, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: not a string", path)
		}
		n := float64(utf8.RuneCountInString(str))
		if lo, ok := num("minLength"); ok && n < lo {
			return fmt.Errorf("%s: %q too short", path, str)
		}
		if hi, ok := num("maxLength"); ok && n > hi {
			return fmt.Errorf("%s: %q too long", path, str)
		}
		if p, ok := o.vals["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, p)
		}
		if f, _ := o.vals["format"].(string); f == "date" {
			if _, err := time.Parse("2006-01-02", str); err != nil && !strings.Contains(err.Error(), "day out of range") {
				return fmt.Errorf("%s: %q is not a date: %v", path, str, err)
			}
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s: not a number", path)
		}
		f, err := n.Float64()
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%s: %v", path, err)
		}
		if typ == "integer" {
			if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
				return fmt.Errorf("%s: %s is not an integer", path, n)
			}
		}
		if lo, ok := num("minimum"); ok && f < lo {
			return fmt.Errorf("%s: %s below the minimum", path, n)
		}
		if hi, ok := num("maximum"); ok && f > hi {
			return fmt.Errorf("%s: %s above the maximum", path, n)
		}
		if lo, ok := num("exclusiveMinimum"); ok && f <= lo {
			return fmt.Errorf("%s: %s not above the exclusive minimum", path, n)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: not a boolean", path)
		}
	case "null":
		if v != nil {
			return fmt.Errorf("%s: not null", path)
		}
	}
	return nil
}

// toOrdered converts encoding/json's values to the ordered ones
// (keys sorted) for comparison with enum values.
func toOrdered(v any) any {
	switch t := v.(type) {
	case map[string]any:
		o := &object{vals: map[string]any{}}
		for k, e := range t {
			o.keys = append(o.keys, k)
			o.vals[k] = toOrdered(e)
		}
		return o
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = toOrdered(e)
		}
		return out
	case json.Number:
		return number(t)
	}
	return v
}

func FuzzJSONSchema(f *testing.F) {
	f.Add(conformanceSchema)
	f.Add(`{"type":"integer","minimum":-37,"maximum":1205}`)
	f.Add(`{"type":"string","pattern":"^(a|[b-d]+)\\d{2,5}.x*$"}`)
	f.Add(`{"type":"object","properties":{"a":{},"b":{"type":"array"}},"additionalProperties":true}`)
	for _, c := range schemaCases {
		f.Add(c.schema)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		src, err := FromJSONSchema([]byte(schema))
		if err != nil {
			return
		}
		g, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) {
				t.Fatalf("converted grammar has a syntax error: %v\n%s", err, src)
			}
			return // limits (left recursion from a self-reference, sizes)
		}
		if _, err := NewMatcher(g, byteVocab()); err != nil {
			return
		}
	})
}
