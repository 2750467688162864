package chat

import "strings"

// ParseMessagesJSON reads an OpenAI-style conversation: a JSON array of
// message objects with a string "role", a "content" that is a string or
// null (or absent), and optionally "tool_calls" (an array of
// {"id", "type": "function", "function": {"name", "arguments"}}, the
// arguments a JSON text in a string, or an object), "tool_call_id" and
// "name" (strings). A key outside these is an error, not silently dropped:
// a caller that sends one expects it to matter.
func ParseMessagesJSON(src []byte) ([]Message, error) {
	v, err := decodeJSON(src)
	if err != nil {
		return nil, errorf("messages: %w", err)
	}
	l, ok := v.(*list)
	if !ok {
		return nil, errorf("messages must be a JSON array, got %s", typeName(v))
	}
	if len(l.Items) > maxMessagesJSON {
		return nil, errorf("messages: %d messages, more than %d", len(l.Items), maxMessagesJSON)
	}
	out := make([]Message, len(l.Items))
	for i, it := range l.Items {
		m, err := messageFromValue(it)
		if err != nil {
			return nil, errorf("messages[%d]: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}

func messageFromValue(it value) (Message, error) {
	var m Message
	d, ok := it.(*dict)
	if !ok {
		return m, errorf("must be an object, got %s", typeName(it))
	}
	for i, k := range d.keys {
		key, _ := k.(string)
		v := d.vals[i]
		switch key {
		case "role":
			s, ok := v.(string)
			if !ok || s == "" {
				return m, errorf("role must be a non-empty string, got %s", typeName(v))
			}
			m.Role = s
		case "content":
			switch c := v.(type) {
			case nil:
			case string:
				m.Content = c
			default:
				return m, errorf("content must be a string or null, got %s", typeName(v))
			}
		case "tool_calls":
			if v == nil {
				continue
			}
			calls, ok := v.(*list)
			if !ok {
				return m, errorf("tool_calls must be an array, got %s", typeName(v))
			}
			if len(calls.Items) > maxToolCalls {
				return m, errorf("tool_calls: %d calls, more than %d", len(calls.Items), maxToolCalls)
			}
			for j, c := range calls.Items {
				tc, err := toolCallFromValue(c)
				if err != nil {
					return m, errorf("tool_calls[%d]: %w", j, err)
				}
				m.ToolCalls = append(m.ToolCalls, tc)
			}
		case "tool_call_id", "name":
			s, ok := v.(string)
			if !ok {
				return m, errorf("%s must be a string, got %s", key, typeName(v))
			}
			if key == "name" {
				m.Name = s
			} else {
				m.ToolCallID = s
			}
		default:
			return m, errorf("unknown key %s (a message has role, content, tool_calls, tool_call_id and name)", reprOf(k))
		}
	}
	if m.Role == "" {
		return m, errorf("has no role")
	}
	return m, nil
}

func toolCallFromValue(v value) (ToolCall, error) {
	var tc ToolCall
	d, ok := v.(*dict)
	if !ok {
		return tc, errorf("must be an object, got %s", typeName(v))
	}
	var fn *dict
	for i, k := range d.keys {
		key, _ := k.(string)
		x := d.vals[i]
		switch key {
		case "id":
			s, ok := x.(string)
			if !ok {
				return tc, errorf("id must be a string, got %s", typeName(x))
			}
			tc.ID = s
		case "type":
			if x != "function" {
				return tc, errorf(`type must be "function", got %s`, reprOf(x))
			}
		case "function":
			if fn, ok = x.(*dict); !ok {
				return tc, errorf("function must be an object, got %s", typeName(x))
			}
		default:
			return tc, errorf("unknown key %s (a tool call has id, type and function)", reprOf(k))
		}
	}
	if fn == nil {
		return tc, errorf("has no function")
	}
	for i, k := range fn.keys {
		key, _ := k.(string)
		x := fn.vals[i]
		switch key {
		case "name":
			s, ok := x.(string)
			if !ok || s == "" {
				return tc, errorf("function.name must be a non-empty string")
			}
			tc.Name = s
		case "arguments":
			switch a := x.(type) {
			case string:
				if _, err := argumentsValue(a); err != nil {
					return tc, errorf("function.%w", err)
				}
				tc.Arguments = a
			case *dict:
				s, err := compactJSON(a)
				if err != nil {
					return tc, err
				}
				tc.Arguments = s
			default:
				return tc, errorf("function.arguments must be a JSON text or an object, got %s", typeName(x))
			}
		default:
			return tc, errorf("unknown key %s in function (a function has name and arguments)", reprOf(k))
		}
	}
	if tc.Name == "" {
		return tc, errorf("has no function.name")
	}
	return tc, nil
}

// compactJSON writes v as JSON with json.dumps's default separators.
func compactJSON(v value) (string, error) {
	var b sbuf
	if err := writeJSON(&b, v, &jsonOpts{itemSep: ", ", keySep: ": "}, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ToolCallsJSON is a parse result as JSON, the shape of an OpenAI
// assistant message: {"content": ..., "tool_calls": [{"id", "type",
// "function": {"name", "arguments"}}]}, the arguments a JSON text, plus
// "format" (the parser used), "reasoning" when the reply has some
// (SplitReasoning) and, when a call was found but could not be read,
// "error".
func ToolCallsJSON(p Parsed) string {
	d := newDict()
	d.Set("format", string(p.Format))
	d.Set("content", p.Content)
	calls := make([]value, len(p.Calls))
	for i, c := range p.Calls {
		fn := newDict()
		fn.Set("name", c.Name)
		fn.Set("arguments", c.Arguments)
		tc := newDict()
		tc.Set("id", c.ID)
		tc.Set("type", "function")
		tc.Set("function", fn)
		calls[i] = tc
	}
	d.Set("tool_calls", &list{Items: calls})
	if p.Reasoning != "" {
		d.Set("reasoning", p.Reasoning)
	}
	if p.Err != "" {
		d.Set("error", p.Err)
	}
	s, err := compactJSON(d)
	if err != nil { // only strings, bounded by the text: cannot fail
		return `{"error": ` + quoteJSON(err.Error()) + `}`
	}
	return s
}

func quoteJSON(s string) string {
	var b sbuf
	writeJSONString(&b, s, false)
	return b.String()
}

// trimSpace trims the white space a template or a model puts around text.
func trimBlank(s string) string { return strings.TrimSpace(s) }
