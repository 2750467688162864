package chat

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGemma4Template renders Gemma 4's published chat template (31B-it,
// Apache-2.0, as llama.cpp ships it; its text is in
// testdata/gemma4_template.json) over the shared conversations and two tool
// conversations (tools offered; a call, its response, an answer and a new
// question) and compares with Jinja2 3.1.6 set up as Hugging Face's
// apply_chat_template sets it up.
func TestGemma4Template(t *testing.T) {
	exp := sharedCases(t)
	raw, err := os.ReadFile("testdata/gemma4_template.json")
	require.NoError(t, err)
	var g4 struct {
		Source    string            `json:"source"`
		Cases     map[string]string `json:"cases"`
		Tools     json.RawMessage   `json:"tools"`
		ToolCases map[string]struct {
			Messages []struct {
				Role       string `json:"role"`
				Content    string `json:"content"`
				ToolCallID string `json:"tool_call_id"`
				Name       string `json:"name"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
			AddGenerationPrompt bool   `json:"add_generation_prompt"`
			Expected            string `json:"expected"`
		} `json:"tool_cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &g4))
	checkSharedCases(t, exp, g4.Source, "<bos>", "<eos>", g4.Cases)
	require.Len(t, g4.ToolCases, 2)
	for cn, c := range g4.ToolCases {
		var msgs []Message
		for _, m := range c.Messages {
			msg := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
			for _, tc := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
			}
			msgs = append(msgs, msg)
		}
		got, info, err := ApplyTools(g4.Source, msgs, JSON(g4.Tools), c.AddGenerationPrompt, "<bos>", "<eos>")
		require.NoError(t, err, "case %s", cn)
		require.False(t, info.Fallback(), "case %s fell back: %v", cn, info.Err)
		require.Equal(t, c.Expected, got, "case %s", cn)
	}
}
