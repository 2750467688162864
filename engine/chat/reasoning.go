package chat

import "strings"

// SplitReasoning separates a reply's reasoning from the rest of it: the
// messages of harmony's analysis channel (format harmony; the text must
// have been decoded with the control tokens kept), and a <think>...</think>
// block at the start (Qwen3, DeepSeek-R1; also when the prompt opened it
// and the reply holds only its end, "...</think>"), and Gemma 4's
// leading <|channel>thought...<channel|> (format gemma4). reasoning is trimmed
// ("" if none); rest is the text without it.
func SplitReasoning(f ToolFormat, text string) (reasoning, rest string) {
	if f == ToolFormatHarmony {
		return splitHarmonyAnalysis(text)
	}
	if f == ToolFormatGemma4 {
		return splitGemma4Thought(text)
	}
	return splitThink(text)
}

// splitThink takes a leading think block.
func splitThink(text string) (string, string) {
	const open, close = "<think>", "</think>"
	t := strings.TrimLeft(text, " \t\r\n")
	end := strings.Index(t, close)
	switch {
	case strings.HasPrefix(t, open):
		body := t[len(open):]
		if end < 0 {
			return trimBlank(body), "" // generation stopped while thinking
		}
		return trimBlank(t[len(open):end]), t[end+len(close):]
	case end >= 0 && !strings.Contains(t[:end], open):
		return trimBlank(t[:end]), t[end+len(close):]
	}
	return "", text
}

// splitHarmonyAnalysis takes the analysis channel's messages out.
func splitHarmonyAnalysis(text string) (string, string) {
	const marker = "<|channel|>analysis<|message|>"
	var reasoning []string
	var rest strings.Builder
	for {
		i := strings.Index(text, marker)
		if i < 0 {
			rest.WriteString(text)
			break
		}
		rest.WriteString(text[:i])
		body := text[i+len(marker):]
		end, next := len(body), len(body)
		for _, t := range []string{"<|end|>", "<|start|>", "<|channel|>", "<|return|>"} {
			if k := strings.Index(body, t); k >= 0 && k < end {
				end, next = k, k
				if t == "<|end|>" {
					next = k + len(t)
				}
			}
		}
		if r := trimBlank(body[:end]); r != "" {
			reasoning = append(reasoning, r)
		}
		text = body[next:]
	}
	return strings.Join(reasoning, "\n\n"), rest.String()
}

// splitGemma4Thought takes Gemma 4's leading thought channel,
// <|channel>thought\n...<channel|> (its prompt opens and closes an empty
// one when thinking is off, so a reply may also start after it).
func splitGemma4Thought(text string) (string, string) {
	const open, close = "<|channel>", "<channel|>"
	t := strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(t, open) {
		return "", text
	}
	body := strings.TrimPrefix(t[len(open):], "thought")
	end := strings.Index(body, close)
	if end < 0 {
		return trimBlank(body), "" // generation stopped while thinking
	}
	return trimBlank(body[:end]), body[end+len(close):]
}
