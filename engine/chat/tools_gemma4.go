package chat

import "strings"

// Gemma 4's markers: a call is <|tool_call>call:NAME{ARGS}<tool_call|>, and
// a string inside ARGS is delimited by <|"|> on both sides.
const (
	gemma4CallOpen  = "<|tool_call>"
	gemma4CallClose = "<tool_call|>"
	gemma4Quote     = `<|"|>`
)

// parseGemma4 reads Gemma 4's calls, <|tool_call>call:NAME{k:v,...}
// <tool_call|> one after another (parallel calls). Keys are bare; a value
// is a string between <|"|> markers, a number, true, false, null (or
// None), a list [v,...] or a mapping {k:v,...}. Text decoded without the
// markers (control tokens the detokenizer drops) reads as well where it
// is unambiguous: a reply that is only call:NAME{...} blocks, whose bare
// values are numbers, true, false or null if they read as such and
// strings (up to the next ",", "}" or "]") otherwise. Content is the text
// before the first call and after the last (where the template writes it).
func parseGemma4(text string) (string, []ToolCall, error) {
	const call = "call:"
	first := strings.Index(text, gemma4CallOpen+call)
	rest := ""
	if first >= 0 {
		rest = text[first+len(gemma4CallOpen):]
	} else {
		t := strings.TrimLeft(text, " \t\r\n")
		name, _, found := strings.Cut(strings.TrimPrefix(t, call), "{")
		if !strings.HasPrefix(t, call) || !found || name == "" || strings.ContainsAny(name, " \t\r\n<>,:}") {
			return text, nil, nil // prose, not call:NAME{...}
		}
		first, rest = len(text)-len(t), t
	}
	var calls []ToolCall
	for strings.HasPrefix(rest, call) {
		rest = rest[len(call):]
		brace := strings.IndexByte(rest, '{')
		if brace <= 0 {
			return "", nil, errorf("%s: no {arguments} after the function name", call)
		}
		name := rest[:brace]
		if strings.ContainsAny(name, " \t\r\n<>,:{}") {
			return "", nil, errorf("%s: not a function name: %q", call, head(name))
		}
		r := gemma4Reader{s: rest, pos: brace}
		args, err := r.value(0)
		if err != nil {
			return "", nil, errorf("%s%s: %w", call, name, err)
		}
		js, err := compactJSON(args)
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, ToolCall{Name: name, Arguments: js})
		rest = strings.TrimPrefix(rest[r.pos:], gemma4CallClose)
		rest = strings.TrimPrefix(strings.TrimLeft(rest, " \t\r\n"), gemma4CallOpen)
	}
	// The template writes a turn's content after its calls.
	return text[:first] + rest, calls, nil
}

// gemma4Reader reads Gemma 4's argument syntax from s at pos.
type gemma4Reader struct {
	s   string
	pos int
}

func (r *gemma4Reader) value(depth int) (value, error) {
	if depth > maxDepth {
		return nil, errorf("nested too deeply")
	}
	s := r.s[r.pos:]
	switch {
	case strings.HasPrefix(s, gemma4Quote):
		body := s[len(gemma4Quote):]
		end := strings.Index(body, gemma4Quote)
		if end < 0 {
			return nil, errorf("a string without its closing %s", gemma4Quote)
		}
		r.pos += len(gemma4Quote) + end + len(gemma4Quote)
		return body[:end], nil
	case strings.HasPrefix(s, "{"):
		r.pos++
		d := newDict()
		for n := 0; ; n++ {
			if r.eat("}") {
				return d, nil
			}
			if n > 0 && !r.eat(",") {
				return nil, errorf("expected , or } at %q", head(r.s[r.pos:]))
			}
			key, err := r.key()
			if err != nil {
				return nil, err
			}
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, errorf("%s: %w", key, err)
			}
			d.Set(key, v)
		}
	case strings.HasPrefix(s, "["):
		r.pos++
		l := &list{}
		for n := 0; ; n++ {
			if r.eat("]") {
				return l, nil
			}
			if n > 0 && !r.eat(",") {
				return nil, errorf("expected , or ] at %q", head(r.s[r.pos:]))
			}
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, v)
		}
	}
	// A bare scalar: up to the next delimiter of the enclosing value.
	end := strings.IndexAny(s, ",}]")
	if end < 0 {
		return nil, errorf("a value without its end: %q", head(s))
	}
	r.pos += end
	return gemma4Scalar(s[:end]), nil
}

// gemma4Scalar types bare text: a number, a boolean or null if it is one,
// else a string (whose markers the detokenizer dropped).
func gemma4Scalar(t string) value {
	switch t {
	case "true":
		return true
	case "false":
		return false
	case "null", "None":
		return nil
	}
	if v, n, err := jsonAt(t); err == nil && n == len(t) {
		switch v.(type) {
		case int64, float64:
			return v
		}
	}
	return t
}

// key reads a mapping key and its ":" (bare, or between <|"|> markers).
func (r *gemma4Reader) key() (string, error) {
	s := r.s[r.pos:]
	if strings.HasPrefix(s, gemma4Quote) {
		body := s[len(gemma4Quote):]
		end := strings.Index(body, gemma4Quote)
		if end < 0 || !strings.HasPrefix(body[end+len(gemma4Quote):], ":") {
			return "", errorf("a quoted key without its end")
		}
		r.pos += len(gemma4Quote) + end + len(gemma4Quote) + 1
		return body[:end], nil
	}
	end := strings.IndexByte(s, ':')
	if end <= 0 || strings.ContainsAny(s[:end], ",{}[]<>\n") {
		return "", errorf("expected key: at %q", head(s))
	}
	r.pos += end + 1
	return s[:end], nil
}

// eat skips tok if it comes next.
func (r *gemma4Reader) eat(tok string) bool {
	if strings.HasPrefix(r.s[r.pos:], tok) {
		r.pos += len(tok)
		return true
	}
	return false
}
