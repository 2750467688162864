package chat

import "strings"

// parseXMLCalls reads Qwen3-Coder's calls: <function=NAME> blocks (each
// normally inside <tool_call>...</tool_call>; several are parallel calls)
// holding one <parameter=PNAME>\nVALUE\n</parameter> block per argument.
// A value is raw text: one newline after the opening tag and one before
// the closing tag belong to the syntax. The parser has no schema, so it
// types a value as the template would have written it: text that is a
// JSON value (a number, true, false, null, an object, an array or a quoted
// string) is that value, as are True, False and None (the template writes
// booleans and null with Python's | string); any other text is a string. The closing tags of the
// last call may be missing (generation stopped there). Content is the
// text before the first call (text after the calls is dropped, as for
// Hermes tags).
func parseXMLCalls(text string) (string, []ToolCall, error) {
	const fn, wrap = "<function=", "<tool_call>"
	first := strings.Index(text, fn)
	if first < 0 {
		return text, nil, nil
	}
	content := text[:first]
	if j := strings.LastIndex(content, wrap); j >= 0 && trimBlank(content[j+len(wrap):]) == "" {
		content = content[:j]
	}
	var calls []ToolCall
	rest := text[first:]
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		rest = strings.TrimPrefix(rest, wrap)
		rest = strings.TrimLeft(rest, " \t\r\n")
		if rest == "" {
			break
		}
		if !strings.HasPrefix(rest, fn) {
			break // text after the calls, which the template asks not for
		}
		c, n, err := xmlCall(rest[len(fn):])
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, c)
		rest = rest[len(fn)+n:]
	}
	return content, calls, nil
}

// xmlCall reads one call after "<function=", returning it and the bytes
// it took (through </function> and </tool_call>, when present).
func xmlCall(s string) (ToolCall, int, error) {
	const param, paramEnd, fnEnd, wrapEnd = "<parameter=", "</parameter>", "</function>", "</tool_call>"
	var c ToolCall
	gt := strings.IndexByte(s, '>')
	if gt < 0 {
		return c, 0, errorf("<function=: no '>' after the function name")
	}
	c.Name = trimBlank(s[:gt])
	if c.Name == "" || strings.ContainsAny(c.Name, "<\n") {
		return c, 0, errorf("<function=: not a function name: %q", head(s[:gt]))
	}
	pos := gt + 1
	args := newDict()
	for {
		rest := strings.TrimLeft(s[pos:], " \t\r\n")
		pos = len(s) - len(rest)
		if rest == "" {
			break
		}
		if strings.HasPrefix(rest, fnEnd) {
			pos += len(fnEnd)
			after := strings.TrimLeft(s[pos:], " \t\r\n")
			if strings.HasPrefix(after, wrapEnd) {
				pos = len(s) - len(after) + len(wrapEnd)
			}
			break
		}
		if !strings.HasPrefix(rest, param) {
			return c, 0, errorf("<function=%s>: expected <parameter= or </function>, got %q", c.Name, head(rest))
		}
		rest = rest[len(param):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 {
			return c, 0, errorf("<function=%s>: no '>' after a parameter name", c.Name)
		}
		name := trimBlank(rest[:gt])
		if name == "" || strings.ContainsAny(name, "<\n") {
			return c, 0, errorf("<function=%s>: not a parameter name: %q", c.Name, head(rest[:gt]))
		}
		body := rest[gt+1:]
		end := strings.Index(body, paramEnd)
		next := end + len(paramEnd)
		if end < 0 {
			// Generation stopped inside the value: it runs to the end.
			end, next = len(body), len(body)
		}
		args.Set(name, xmlValue(body[:end]))
		pos = len(s) - len(body) + next
	}
	js, err := compactJSON(args)
	if err != nil {
		return c, 0, err
	}
	c.Arguments = js
	return c, pos, nil
}

// xmlValue types a parameter's raw text (see parseXMLCalls).
func xmlValue(raw string) value {
	raw = strings.TrimPrefix(raw, "\n")
	raw = strings.TrimSuffix(raw, "\n")
	switch raw {
	case "True", "False": // Python's spelling, as the template's | string writes them
		return raw == "True"
	case "None":
		return nil
	}
	if t := trimBlank(raw); t != "" {
		if v, n, err := jsonAt(t); err == nil && n == len(t) {
			return v
		}
	}
	return raw
}
