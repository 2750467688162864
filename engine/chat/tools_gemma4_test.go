package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func gemma4Source(t *testing.T) string {
	raw, err := os.ReadFile("testdata/gemma4_template.json")
	require.NoError(t, err)
	var g4 struct {
		Source string `json:"source"`
	}
	require.NoError(t, json.Unmarshal(raw, &g4))
	return g4.Source
}

// Calls rendered by Gemma 4's published template (one, parallel, with
// content and every kind of value) come back from ParseToolCalls, with and
// without the markers a detokenizer may drop.
func TestGemma4ToolCallRoundTrip(t *testing.T) {
	src := gemma4Source(t)
	require.Equal(t, ToolFormatGemma4, ToolFormatOf(src))
	for _, c := range []struct {
		content string
		calls   []ToolCall
	}{
		{"", []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{"Let me check.", []ToolCall{{Name: "get_weather", Arguments: `{"city": "New York, NY", "unit": "c"}`},
			{Name: "add", Arguments: `{"a": 2, "b": -3.5, "exact": true, "tags": ["x", "y"], "opts": {"round": false, "note": null}}`}}},
	} {
		msgs := []Message{{Role: "user", Content: "Weather in Paris and 2+3?"},
			{Role: "assistant", Content: c.content, ToolCalls: c.calls}}
		out, info, err := ApplyTools(src, msgs, weatherTools, false, "<bos>", "<eos>")
		require.NoError(t, err)
		require.False(t, info.Fallback(), "%v", info.Err)
		i := strings.LastIndex(out, "<|turn>model\n")
		require.GreaterOrEqual(t, i, 0, out)
		reply := strings.TrimSuffix(out[i+len("<|turn>model\n"):], "<|tool_response>")
		require.Contains(t, reply, "<|tool_call>call:")
		p := ParseToolCalls(ToolFormatGemma4, reply)
		require.Empty(t, p.Err, reply)
		require.Equal(t, c.content, p.Content, reply)
		require.Len(t, p.Calls, len(c.calls), reply)
		for k, w := range c.calls {
			require.Equal(t, w.Name, p.Calls[k].Name)
			require.JSONEq(t, w.Arguments, p.Calls[k].Arguments, reply)
		}
		if c.content != "" {
			continue // without the markers a reply is read only if it is calls
		}
		// The markers dropped: the values still read back (none holds ",").
		bare := strings.NewReplacer(gemma4CallOpen, "", gemma4CallClose, "", gemma4Quote, "").Replace(reply)
		p = ParseToolCalls(ToolFormatGemma4, bare)
		require.Empty(t, p.Err, bare)
		require.Len(t, p.Calls, len(c.calls), bare)
		require.JSONEq(t, c.calls[0].Arguments, p.Calls[0].Arguments, bare)
	}
}

func TestGemma4ParseForms(t *testing.T) {
	p := ParseToolCalls(ToolFormatGemma4, "<|channel>thought\nNeed the weather.<channel|>Sure.<|tool_call>call:get_weather{city:<|\"|>a, b: {c}<|\"|>,days:[1,2.5e1]}<tool_call|>")
	require.Empty(t, p.Err)
	require.Equal(t, "Need the weather.", p.Reasoning)
	require.Equal(t, "Sure.", p.Content)
	require.Len(t, p.Calls, 1)
	require.JSONEq(t, `{"city": "a, b: {c}", "days": [1, 25]}`, p.Calls[0].Arguments)

	p = ParseToolCalls(ToolFormatGemma4, "call: me later {maybe}")
	require.Empty(t, p.Err)
	require.Empty(t, p.Calls)

	p = ParseToolCalls(ToolFormatGemma4, "No call here: call me later.")
	require.Empty(t, p.Err)
	require.Empty(t, p.Calls)
	require.Equal(t, "No call here: call me later.", p.Content)

	for _, bad := range []string{
		"<|tool_call>call:f{a:<|\"|>open}<tool_call|>",
		"<|tool_call>call:f{a 1}<tool_call|>",
		"<|tool_call>call:f{a:1",
		"<|tool_call>call:{a:1}<tool_call|>",
	} {
		p := ParseToolCalls(ToolFormatGemma4, bad)
		require.NotEmpty(t, p.Err, bad)
		require.Empty(t, p.Calls, bad)
		require.Equal(t, bad, p.Content)
	}
}
