package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/grammar"
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const toolGrammarTools = `[
 {"type": "function", "function": {"name": "get_weather", "parameters": {
   "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"$ref": "#/$defs/unit"}},
   "required": ["city", "unit"], "additionalProperties": false,
   "$defs": {"unit": {"enum": ["c", "f"]}}}}},
 {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}
]`

// checkToolArgs validates a call's arguments against toolGrammarTools.
func checkToolArgs(c chat.ToolCall) error {
	var args map[string]any
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
		return fmt.Errorf("arguments %q: %w", c.Arguments, err)
	}
	switch c.Name {
	case "now":
		if len(args) != 0 {
			return fmt.Errorf("now takes no arguments: %s", c.Arguments)
		}
	case "get_weather":
		city, ok := args["city"].(string)
		if len(args) != 2 || !ok || len([]rune(city)) > 12 || (args["unit"] != "c" && args["unit"] != "f") {
			return fmt.Errorf("get_weather arguments invalid: %s", c.Arguments)
		}
	default:
		return fmt.Errorf("no tool named %q", c.Name)
	}
	return nil
}

// For every call format, what a forced tool-call grammar lets a model
// write at temperature 1.5 parses (chat.ParseToolCalls) as calls of the
// listed tools (the named one, if named) with arguments valid against
// their schemas: one call, or with parallel calls one or more.
func TestToolCallGrammarPerFormat(t *testing.T) {
	m := openStories(t, 1)
	prompt := storiesPrompt(t, m)
	// The end-of-generation token and "]" (the end of an array of calls;
	// a byte token and a piece) are favoured, so parallel replies end
	// after one or a few calls.
	bias := map[int32]float32{m.Info().EOS: 14}
	for id := int32(0); int(id) < m.Info().VocabSize; id++ {
		if string(m.TokenPiece(id)) == "]" {
			bias[id] = 20
		}
	}
	for _, f := range chat.ToolFormats() {
		formatBias := bias
		if f == chat.ToolFormatGemma4 {
			// Its calls follow each other with no separator: a weaker
			// end-of-generation bias leaves room for a second call.
			formatBias = map[int32]float32{m.Info().EOS: 2}
		}
		for _, c := range []struct {
			only     string
			parallel bool
		}{{"", false}, {"get_weather", true}, {"", true}} {
			t.Run(fmt.Sprintf("%s/%s/%v", f, c.only, c.parallel), func(t *testing.T) {
				g, err := m.ToolCallGrammar(f, []byte(toolGrammarTools), c.only, c.parallel)
				require.NoError(t, err)
				mt, err := m.GrammarMatcher(g)
				require.NoError(t, err)
				complete, multi := 0, 0
				for seed := uint64(1); seed <= 8; seed++ {
					mt.Reset()
					s := newStoriesSession(t, m, 1024)
					var col collect
					res, err := s.Generate(prompt, GenerateParams{
						MaxTokens: 500, Constraint: mt,
						Sampler: sample.Params{Temperature: 1.5, Seed: seed, LogitBias: formatBias},
					}, col.piece)
					require.NoError(t, err)
					if res.Finish == FinishLength {
						continue
					}
					require.Equal(t, FinishEOG, res.Finish)
					complete++
					text := col.text()
					p := chat.ParseToolCalls(f, text)
					require.Empty(t, p.Err, "%q", text)
					require.NotEmpty(t, p.Calls, "%q", text)
					if !c.parallel || f == chat.ToolFormatHarmony {
						require.Len(t, p.Calls, 1, "%q", text)
					}
					if len(p.Calls) > 1 {
						multi++
					}
					for _, call := range p.Calls {
						if c.only != "" {
							assert.Equal(t, c.only, call.Name, "%q", text)
						}
						assert.NoError(t, checkToolArgs(call), "%q", text)
					}
				}
				t.Logf("%d of 8 complete, %d with several calls", complete, multi)
				assert.Positive(t, complete)
				if c.parallel && f != chat.ToolFormatHarmony {
					assert.Positive(t, multi, "some replies make several calls")
				}
			})
		}
	}
}

// Where the vocabulary has a format's markers as tokens, the grammar
// refers to those tokens (a control token renders as nothing, so only a
// reference can make the model write it); else it spells the text.
func TestToolCallSyntaxUsesTokens(t *testing.T) {
	tok := func(text string) string {
		if strings.HasPrefix(text, "<|") || text == "[TOOL_CALLS]" {
			return "<[" + fmt.Sprint(len(text)) + "]>"
		}
		return grammar.GBNFLiteral(text)
	}
	for _, f := range []chat.ToolFormat{chat.ToolFormatMistral, chat.ToolFormatPhi4, chat.ToolFormatHarmony, chat.ToolFormatGemma4} {
		syn, ok := toolCallSyntax(f, tok)
		require.True(t, ok)
		src, err := grammar.ToolCalls([]byte(toolGrammarTools), "", syn, true)
		require.NoError(t, err)
		assert.Contains(t, src, "<[", f)
		assert.NotContains(t, src, `"<|`, f)
		_, err = grammar.Parse(src)
		require.NoError(t, err, "%s:\n%s", f, src)
	}
	_, ok := toolCallSyntax("nosuch", tok)
	assert.False(t, ok)
}
