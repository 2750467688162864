package chat

import "strings"

// Phi-4-mini's published template has no tools variable: it renders a
// system message's "tools" key (a JSON text of the functions) between
// <|tool|> and <|/tool|>, and messages' content only. phi4Messages gives
// it the conversation that way, as Microsoft's model card describes: the
// functions ({"name", "description", "parameters"}) on the system message
// (an empty one first when the conversation has none), and an assistant's
// calls in its content as <|tool_call|>[{"name", "arguments"}, ...]<|/tool_call|>.

// readsMessageTools reports whether a template takes the tools from a
// message's "tools" key (Phi-4-mini's).
func readsMessageTools(src string) bool {
	return strings.Contains(src, "message['tools']") || strings.Contains(src, `message["tools"]`) ||
		strings.Contains(src, "message.tools")
}

// phi4Messages is msgs as Phi-4-mini's template reads them, tv the
// checked tools.
func phi4Messages(msgs []Message, tv []value) (value, error) {
	ms, err := messagesValue(msgs)
	if err != nil {
		return nil, err
	}
	items := ms.(*list).Items
	fns := make([]value, 0, len(tv))
	for _, t := range tv {
		if fn, ok := t.(*dict).Get("function"); ok {
			fns = append(fns, fn)
		}
	}
	toolsText, err := compactJSON(&list{Items: fns})
	if err != nil {
		return nil, err
	}
	out := make([]value, 0, len(items)+1)
	sawSystem := false
	for i, it := range items {
		d := it.(*dict)
		m := msgs[i]
		if m.Role == "system" && !sawSystem && len(tv) > 0 {
			sawSystem = true
			d.Set("tools", toolsText)
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]value, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				args, err := argumentsValue(c.Arguments)
				if err != nil {
					return nil, errorf("message %d: tool call %d (%s): %w", i, j, c.Name, err)
				}
				cd := newDict()
				cd.Set("name", c.Name)
				cd.Set("arguments", args)
				calls[j] = cd
			}
			text, err := compactJSON(&list{Items: calls})
			if err != nil {
				return nil, err
			}
			d.Set("content", m.Content+"<|tool_call|>"+text+"<|/tool_call|>")
			d.delete("tool_calls")
		}
		out = append(out, d)
	}
	if !sawSystem && len(tv) > 0 {
		sys := newDict()
		sys.Set("role", "system")
		sys.Set("content", "")
		sys.Set("tools", toolsText)
		out = append([]value{sys}, out...)
	}
	return &list{Items: out}, nil
}
