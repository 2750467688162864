package chat

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSplitReasoning(t *testing.T) {
	for _, c := range []struct {
		f                     ToolFormat
		text, reasoning, rest string
	}{
		{ToolFormatHermes, "<think>\nAdd them.\n</think>\n\n5", "Add them.", "\n\n5"},
		{ToolFormatHermes, "Add them.</think>5", "Add them.", "5"},
		{ToolFormatHermes, "<think>still going", "still going", ""},
		{ToolFormatHermes, "no thinking here", "", "no thinking here"},
		{ToolFormatHarmony, "<|channel|>analysis<|message|>User wants 2+3.<|end|><|start|>assistant<|channel|>final<|message|>5",
			"User wants 2+3.", "<|start|>assistant<|channel|>final<|message|>5"},
		{ToolFormatHarmony, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
			"Need weather.", "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"},
		{ToolFormatHarmony, "<|channel|>analysis<|message|>cut off", "cut off", ""},
		{ToolFormatHarmony, "plain", "", "plain"},
	} {
		r, rest := SplitReasoning(c.f, c.text)
		assert.Equal(t, c.reasoning, r, c.text)
		assert.Equal(t, c.rest, rest, c.text)
	}
	// The parser reports it, and the content and calls come from the rest.
	p := ParseToolCalls(ToolFormatHarmony, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|>")
	assert.Equal(t, "Think.", p.Reasoning)
	assert.Equal(t, "Hello", p.Content)
	p = ParseToolCalls(ToolFormatHermes, "<think>Check.</think>\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>")
	assert.Equal(t, "Check.", p.Reasoning)
	assert.Len(t, p.Calls, 1)
	assert.Empty(t, p.Content)
}
