package abitest

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	schemaOnce    sync.Once
	grammarSchema func(m uintptr, text *byte, n uintptr, out *uintptr) int32
)

func newSchemaGrammar(t testing.TB, l *Lib, m uintptr, schema string) (uintptr, int32, string) {
	schemaOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			panic(err)
		}
		purego.RegisterLibFunc(&grammarSchema, h, "moonlm_grammar_from_json_schema")
	})
	b := []byte(schema)
	var p *byte
	if len(b) > 0 {
		p = &b[0]
	}
	return grammarCall(t, l, func(g *uintptr) int32 { return grammarSchema(m, p, uintptr(len(b)), g) })
}

// Every completed sample from a schema grammar, at temperature 1.5, is JSON
// that validates against the schema.
func TestGrammarFromJSONSchema(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	const schema = `{
  "type": "object",
  "properties": {
    "pet": {"enum": ["cat", "dog", "owl"]},
    "legs": {"type": "integer"},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 2}
  },
  "required": ["pet", "legs", "tags"],
  "additionalProperties": false,
  "$defs": {"tag": {"type": "string", "enum": ["a", "b"]}}
}`
	g, st, msg := newSchemaGrammar(t, l, m, schema)
	require.Equal(t, OK, st, msg)
	prompt := []int32{info.BOS}
	complete := 0
	for seed := uint64(1); seed <= 8; seed++ {
		s := newSession(t, l, m, 512, 0)
		r, rec, st, msg := generateWithGrammar(t, l, s, hotSampler(t, l, seed), g, prompt, 300, nil)
		require.Equal(t, OK, st, msg)
		if r.FinishReason == FinishLength {
			continue
		}
		require.Equal(t, FinishEOG, r.FinishReason)
		complete++
		var v struct {
			Pet  string   `json:"pet"`
			Legs *int64   `json:"legs"`
			Tags []string `json:"tags"`
		}
		dec := json.NewDecoder(strings.NewReader(rec.text.String()))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&v), "seed %d: %q", seed, rec.text.String())
		assert.Contains(t, []string{"cat", "dog", "owl"}, v.Pet)
		assert.NotNil(t, v.Legs)
		assert.LessOrEqual(t, len(v.Tags), 2)
		for _, tag := range v.Tags {
			assert.Contains(t, []string{"a", "b"}, tag)
		}
	}
	assert.Positive(t, complete, "some samples complete within 300 tokens")

	for _, bad := range []struct{ schema, why string }{
		{`{"type": "object"`, "not JSON"},
		{`{"type": "strin"}`, "unknown type"},
		{`{"not": {"type": "string"}}`, "an unsupported keyword"},
	} {
		_, st, msg := newSchemaGrammar(t, l, m, bad.schema)
		assert.Equal(t, InvalidArg, st, "%s: %s", bad.why, msg)
		assert.Contains(t, msg, "moonlm_grammar_from_json_schema", bad.why)
	}
}
