package chat

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/moonlm/moonlm/engine/internal/jsonread"
)

// ToolFormat names how a model family writes tool calls in its output.
type ToolFormat string

// The tool call formats ParseToolCalls reads.
const (
	// ToolFormatHermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
	// (Qwen 2.5/3, Hermes, and every template without tool syntax).
	ToolFormatHermes ToolFormat = "hermes"
	// ToolFormatLlama3: <|python_tag|> then JSON, or a bare JSON object
	// {"name": ..., "parameters": {...}} (Llama 3.1-3.3).
	ToolFormatLlama3 ToolFormat = "llama3"
	// ToolFormatMistral: [TOOL_CALLS] then a JSON array of calls, or
	// [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} (newer Mistral templates; the
	// id part is optional).
	ToolFormatMistral ToolFormat = "mistral"
	// ToolFormatGemma: a ```tool_code block of Python calls name(k=v), a
	// ```json block or bare JSON object, or the Hermes form its tool
	// description asks for (Gemma 3's template has no tool syntax).
	ToolFormatGemma ToolFormat = "gemma"
	// ToolFormatPhi4: <|tool_call|>[{...}]<|/tool_call|> (Phi-4-mini).
	ToolFormatPhi4 ToolFormat = "phi4"
	// ToolFormatHarmony: gpt-oss's channels,
	// <|channel|>commentary to=functions.NAME ... <|message|>{...}<|call|>.
	ToolFormatHarmony ToolFormat = "harmony"
	// ToolFormatQwenXML: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE
	// \n</parameter>\n...</function>\n</tool_call> (Qwen3-Coder, Qwen 3.5).
	ToolFormatQwenXML ToolFormat = "qwen3coder"
	// ToolFormatGemma4: <|tool_call>call:NAME{key:value,...}<tool_call|>,
	// strings between <|"|> markers (Gemma 4).
	ToolFormatGemma4 ToolFormat = "gemma4"
)

// ToolFormats lists the formats, for callers that name one.
func ToolFormats() []ToolFormat {
	return []ToolFormat{ToolFormatHermes, ToolFormatLlama3, ToolFormatMistral, ToolFormatGemma, ToolFormatPhi4, ToolFormatHarmony, ToolFormatQwenXML, ToolFormatGemma4}
}

// ToolFormatOf chooses the tool call format from a template's text: the
// markers its family writes calls with, else the family's own convention;
// a template without tool syntax (and "" for a built-in family) is Hermes,
// the format ApplyTools describes to such models.
func ToolFormatOf(src string) ToolFormat {
	has := func(s string) bool { return containsNoInline(src, s) }
	switch {
	case has("<|channel|>") && has("<|call|>"):
		return ToolFormatHarmony
	case has("<|tool_call>call:"):
		return ToolFormatGemma4
	case has("[TOOL_CALLS]"):
		return ToolFormatMistral
	case has("<|tool_call|>"), has("<|tool|>") && readsMessageTools(src):
		return ToolFormatPhi4
	case has("<function=") && has("<parameter="):
		return ToolFormatQwenXML
	case has("<tool_call>"):
		return ToolFormatHermes
	case has("<|python_tag|>"), has("<|start_header_id|>") && HasToolSyntax(src):
		return ToolFormatLlama3
	case has("<start_of_turn>"):
		return ToolFormatGemma
	}
	return ToolFormatHermes
}

// Parsed is generated text split into the calls it makes and the rest.
type Parsed struct {
	Format ToolFormat
	// Content is the text that is not a call (before the first call, and
	// for harmony the final channel's message), trimmed.
	Content string
	Calls   []ToolCall
	// Reasoning is the reply's reasoning (SplitReasoning), taken out of
	// the text before the rest is parsed; "" if none.
	Reasoning string
	// Err says why text that looked like a call could not be read; the
	// text is then all Content and Calls is empty.
	Err string
}

// ParseToolCalls reads the tool calls in text, the output of a model
// whose template uses format f. A call's arguments come out as compact
// JSON objects; a call without an id in the text is given call_<n>... as
// an id of nine characters (letters and digits, as Mistral's templates
// require) so a tool result can answer it.
func ParseToolCalls(f ToolFormat, text string) Parsed {
	p := Parsed{Format: f}
	p.Reasoning, text = SplitReasoning(f, text)
	var content string
	var calls []ToolCall
	var err error
	switch f {
	case ToolFormatHermes:
		content, calls, err = parseTagged(text, "<tool_call>", "</tool_call>")
	case ToolFormatLlama3:
		content, calls, err = parseLlama3(text)
	case ToolFormatMistral:
		content, calls, err = parseMistral(text)
	case ToolFormatGemma:
		content, calls, err = parseGemma(text)
	case ToolFormatPhi4:
		content, calls, err = parseTagged(text, "<|tool_call|>", "<|/tool_call|>")
		if err == nil && len(calls) == 0 {
			content, calls, err = parseBareCalls(text)
		}
	case ToolFormatHarmony:
		content, calls, err = parseHarmony(text)
	case ToolFormatQwenXML:
		content, calls, err = parseXMLCalls(text)
	case ToolFormatGemma4:
		content, calls, err = parseGemma4(text)
	default:
		p.Err = "unknown tool call format " + strconv.Quote(string(f))
		p.Content = trimBlank(text)
		return p
	}
	if err != nil {
		p.Content = trimBlank(text)
		p.Err = err.Error()
		return p
	}
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = callID(i)
		}
	}
	p.Content, p.Calls = trimBlank(content), calls
	return p
}

// callID is a nine-character id for the i-th call: "call" and five digits.
func callID(i int) string {
	s := strconv.Itoa(i % 100000)
	return "call" + strings.Repeat("0", 5-len(s)) + s
}

// jsonAt decodes the JSON value at the start of s (after white space),
// returning it and the bytes it took. The decoder reads s in place (it
// never writes to its input): copying the rest of a long reply for each
// call in it would make parsing quadratic.
func jsonAt(s string) (value, int, error) {
	jv, n, err := jsonread.DecodePrefix(unsafe.Slice(unsafe.StringData(s), len(s)), maxDepth)
	if err != nil {
		return nil, 0, chatJSONError(err)
	}
	v, err := fromJSON(jv)
	if err != nil {
		return nil, 0, err
	}
	return v, n, nil
}

// callsFromValue reads one call object or an array of them.
func callsFromValue(v value) ([]ToolCall, error) {
	if l, ok := v.(*list); ok {
		out := make([]ToolCall, 0, len(l.Items))
		for i, it := range l.Items {
			c, err := callFromValue(it)
			if err != nil {
				return nil, errorf("call %d: %w", i, err)
			}
			out = append(out, c)
		}
		return out, nil
	}
	c, err := callFromValue(v)
	if err != nil {
		return nil, err
	}
	return []ToolCall{c}, nil
}

// callFromValue reads a call object as the families write them:
// {"name", "arguments" or "parameters", "id"?}, or OpenAI's
// {"type": "function", "function": {...}}.
func callFromValue(v value) (ToolCall, error) {
	var c ToolCall
	d, ok := v.(*dict)
	if !ok {
		return c, errorf("a call must be a JSON object, got %s", typeName(v))
	}
	if fv, ok := d.Get("function"); ok {
		if fd, ok := fv.(*dict); ok {
			inner, err := callFromValue(fd)
			if err != nil {
				return c, err
			}
			if id, ok := d.getString("id"); ok {
				inner.ID = id
			}
			return inner, nil
		}
	}
	name, ok := d.getString("name")
	if !ok || name == "" {
		return c, errorf("a call needs a string name")
	}
	c.Name = name
	c.ID, _ = d.getString("id")
	args, ok := d.Get("arguments")
	if !ok {
		args, ok = d.Get("parameters")
	}
	switch a := args.(type) {
	case nil: // absent or null: no arguments
		c.Arguments = "{}"
	case string:
		// Some models write the arguments as a JSON text in a string.
		av, err := argumentsValue(a)
		if err != nil {
			return c, err
		}
		s, err := compactJSON(av)
		if err != nil {
			return c, err
		}
		c.Arguments = s
	case *dict:
		s, err := compactJSON(a)
		if err != nil {
			return c, err
		}
		c.Arguments = s
	default:
		return c, errorf("the arguments of %s must be an object, got %s", name, typeName(args))
	}
	return c, nil
}

// parseTagged reads calls written as JSON between open and close tags
// (each tag may hold one call or an array of them); the closing tag of the
// last call may be missing (generation stopped there). A tag not followed
// by JSON is a mention of it in prose, not a call. Content is the text
// before the first call.
func parseTagged(text, open, close string) (string, []ToolCall, error) {
	var calls []ToolCall
	first := -1
	pos := 0
	for {
		j := strings.Index(text[pos:], open)
		if j < 0 {
			break
		}
		at := pos + j
		after := at + len(open)
		pos = after
		body := strings.TrimLeft(text[after:], " \t\r\n")
		if body == "" || body[0] != '{' && body[0] != '[' {
			continue
		}
		if first < 0 {
			first = at
		}
		v, n, err := jsonAt(text[after:])
		if err != nil {
			return "", nil, errorf("%s: %w", open, err)
		}
		cs, err := callsFromValue(v)
		if err != nil {
			return "", nil, errorf("%s: %w", open, err)
		}
		calls = append(calls, cs...)
		pos = after + n
		rest := strings.TrimLeft(text[pos:], " \t\r\n")
		switch {
		case strings.HasPrefix(rest, close):
			pos = len(text) - len(rest) + len(close)
		case rest != "":
			return "", nil, errorf("%s: the call is followed by %q, not %s", open, head(rest), close)
		}
	}
	if first < 0 {
		return text, nil, nil
	}
	return text[:first], calls, nil
}

// head is the start of s, for messages.
func head(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

// parseBareCalls reads text that is only calls as JSON (an object or an
// array): what is left of a call when the detokenizer dropped its
// special-token marker. Text that is not is content.
func parseBareCalls(text string) (string, []ToolCall, error) {
	t := trimBlank(text)
	if t == "" || t[0] != '{' && t[0] != '[' {
		return text, nil, nil
	}
	v, n, err := jsonAt(t)
	if err != nil || trimBlank(t[n:]) != "" {
		return text, nil, nil // prose that starts with a brace
	}
	calls, err := callsFromValue(v)
	if err != nil {
		return text, nil, nil
	}
	return "", calls, nil
}

// parseLlama3 reads <|python_tag|> followed by JSON calls separated by
// ";", or text that is only JSON calls.
func parseLlama3(text string) (string, []ToolCall, error) {
	const tag = "<|python_tag|>"
	i := strings.Index(text, tag)
	if i < 0 {
		return parseSeparatedCalls(text, false)
	}
	content, calls, err := parseSeparatedCalls(text[i+len(tag):], true)
	if err != nil {
		return "", nil, err
	}
	if content != "" {
		return "", nil, errorf("%s: not a JSON call: %q", tag, head(content))
	}
	return text[:i], calls, nil
}

// parseSeparatedCalls reads JSON calls separated by ";" or white space; if
// strict is false, text that is not wholly calls is content.
func parseSeparatedCalls(text string, strict bool) (string, []ToolCall, error) {
	rest := trimBlank(text)
	if rest == "" || rest[0] != '{' {
		return text, nil, nil
	}
	var calls []ToolCall
	for rest != "" {
		v, n, err := jsonAt(rest)
		if err == nil {
			var cs []ToolCall
			if cs, err = callsFromValue(v); err == nil {
				calls = append(calls, cs...)
			}
		}
		if err != nil {
			if strict {
				return "", nil, err
			}
			return text, nil, nil
		}
		rest = strings.TrimLeft(rest[n:], " \t\r\n;")
	}
	return "", calls, nil
}

// parseMistral reads [TOOL_CALLS] followed by a JSON array of calls (or
// name[ARGS]{...}, repeated), or text that is only a JSON array of calls.
func parseMistral(text string) (string, []ToolCall, error) {
	const tag = "[TOOL_CALLS]"
	i := strings.Index(text, tag)
	if i < 0 {
		t := trimBlank(text)
		if strings.HasPrefix(t, "[") {
			return parseBareCalls(text)
		}
		return text, nil, nil
	}
	content := text[:i]
	var calls []ToolCall
	for _, seg := range strings.Split(text[i+len(tag):], tag) {
		seg = trimBlank(seg)
		if seg == "" {
			continue
		}
		if seg[0] == '[' || seg[0] == '{' {
			v, n, err := jsonAt(seg)
			if err != nil {
				return "", nil, errorf("%s: %w", tag, err)
			}
			if rest := trimBlank(seg[n:]); rest != "" && rest != "</s>" {
				return "", nil, errorf("%s: the calls are followed by %q", tag, head(rest))
			}
			cs, err := callsFromValue(v)
			if err != nil {
				return "", nil, errorf("%s: %w", tag, err)
			}
			calls = append(calls, cs...)
			continue
		}
		name, args, ok := strings.Cut(seg, "[ARGS]")
		if !ok {
			return "", nil, errorf("%s: neither a JSON array nor name[ARGS]{...}: %q", tag, head(seg))
		}
		v, _, err := jsonAt(args)
		if err != nil {
			return "", nil, errorf("%s %s: %w", tag, name, err)
		}
		d, ok := v.(*dict)
		if !ok {
			return "", nil, errorf("%s %s: the arguments must be an object", tag, name)
		}
		s, err := compactJSON(d)
		if err != nil {
			return "", nil, err
		}
		name, id, _ := strings.Cut(name, "[CALL_ID]")
		calls = append(calls, ToolCall{ID: trimBlank(id), Name: trimBlank(name), Arguments: s})
	}
	return content, calls, nil
}

// parseGemma reads a ```tool_code block of Python-style calls, a ```json
// block or bare JSON calls, or Hermes tags.
func parseGemma(text string) (string, []ToolCall, error) {
	if strings.Contains(text, "<tool_call>") {
		return parseTagged(text, "<tool_call>", "</tool_call>")
	}
	for _, fence := range []string{"```tool_code", "```json"} {
		i := strings.Index(text, fence)
		if i < 0 {
			continue
		}
		body := text[i+len(fence):]
		if j := strings.Index(body, "```"); j >= 0 {
			body = body[:j]
		}
		var calls []ToolCall
		var err error
		if fence == "```json" {
			var c string
			c, calls, err = parseSeparatedCalls(body, true)
			if err == nil && c != "" {
				err = errorf("```json: not a JSON call: %q", head(trimBlank(c)))
			}
		} else {
			calls, err = pythonCalls(body)
		}
		if err != nil {
			return "", nil, errorf("%s: %w", fence, err)
		}
		return text[:i], calls, nil
	}
	return parseSeparatedCalls(text, false)
}

// pythonCalls reads one call per line, name(key=literal, ...), with the
// template interpreter's expression parser: the arguments must be
// literals (strings, numbers, booleans, None, lists and dicts of them).
func pythonCalls(body string) ([]ToolCall, error) {
	var calls []ToolCall
	for _, line := range strings.Split(body, "\n") {
		line = trimBlank(line)
		if line == "" {
			continue
		}
		c, err := pythonCall(line)
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

func pythonCall(src string) (ToolCall, error) {
	var c ToolCall
	open := strings.IndexByte(src, '(')
	if open <= 0 || !strings.HasSuffix(src, ")") {
		return c, errorf("not a call name(...): %q", head(src))
	}
	name := trimBlank(src[:open])
	for i := 0; i < len(name); i++ {
		if !isIdentByte(name[i]) && name[i] != '.' {
			return c, errorf("not a function name: %q", head(name))
		}
	}
	// "f(...)" as a Jinja expression: a call of the name f with the
	// arguments parsed as Python literals.
	body, err := parseTemplate("{{ f" + src[open:] + " }}")
	if err != nil {
		return c, errorf("%s: %w", name, err)
	}
	if len(body) != 1 {
		return c, errorf("%s: not a single call", name)
	}
	out, ok := body[0].(*outputNode)
	if !ok {
		return c, errorf("%s: not a single call", name)
	}
	call, ok := out.e.(*callExpr)
	if !ok {
		return c, errorf("%s: not a single call", name)
	}
	if len(call.args) > 0 {
		return c, errorf("%s: positional arguments have no names; write key=value", name)
	}
	r := &renderer{scopes: []map[string]value{{}}}
	args := newDict()
	for i, k := range call.kwName {
		v, err := r.eval(call.kwVal[i])
		if err != nil {
			return c, errorf("%s: argument %s: %w", name, k, err)
		}
		if err := literalOnly(v, 0); err != nil {
			return c, errorf("%s: argument %s: %w", name, k, err)
		}
		args.Set(k, v)
	}
	s, err := compactJSON(args)
	if err != nil {
		return c, err
	}
	return ToolCall{Name: name, Arguments: s}, nil
}

// literalOnly refuses values that are not data (a name the expression
// referred to evaluates to undefined).
func literalOnly(v value, depth int) error {
	if depth > maxDepth {
		return errorf("nested too deeply")
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return nil
	case *list:
		for _, it := range x.Items {
			if err := literalOnly(it, depth+1); err != nil {
				return err
			}
		}
		return nil
	case *dict:
		for _, it := range x.vals {
			if err := literalOnly(it, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return errorf("not a literal (%s)", typeName(v))
}

// parseHarmony reads gpt-oss's messages: a call is a commentary (or
// analysis) message addressed to=functions.NAME whose body, after
// <|message|>, is the arguments, ended by <|call|>; the content is the
// final channel's message. Text with no channel markers is content.
func parseHarmony(text string) (string, []ToolCall, error) {
	const to = "to=functions."
	var calls []ToolCall
	rest := text
	for {
		i := strings.Index(rest, to)
		if i < 0 {
			break
		}
		rest = rest[i+len(to):]
		// This call's text ends where the next one starts: searching
		// beyond it for each call would make many calls quadratic.
		win := rest
		if j := strings.Index(rest, to); j >= 0 {
			win = rest[:j]
		}
		end := strings.IndexAny(win, " \t\n<{")
		if end < 0 {
			end = len(win)
		}
		name := win[:end]
		if name == "" {
			return "", nil, errorf("harmony: a call without a function name")
		}
		var args string
		if m := strings.Index(win, "<|message|>"); m >= 0 {
			body := win[m+len("<|message|>"):]
			stop := len(body)
			for _, t := range []string{"<|call|>", "<|end|>", "<|start|>"} {
				if k := strings.Index(body, t); k >= 0 && k < stop {
					stop = k
				}
			}
			args = trimBlank(body[:stop])
		} else if b := strings.IndexByte(win, '{'); b >= 0 {
			// Detokenized without its control tokens: the arguments are
			// the JSON object after the name (and "json", if constrained).
			_, n, err := jsonAt(win[b:])
			if err != nil {
				return "", nil, errorf("harmony: call of %s: %w", name, err)
			}
			args = win[b : b+n]
		} else {
			return "", nil, errorf("harmony: call of %s has no arguments", name)
		}
		av, err := argumentsValue(args)
		if err != nil {
			return "", nil, errorf("harmony: call of %s: %w", name, err)
		}
		s, err := compactJSON(av)
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, ToolCall{Name: name, Arguments: s})
		rest = rest[len(win):]
	}
	const final = "<|channel|>final<|message|>"
	if i := strings.Index(text, final); i >= 0 {
		body := text[i+len(final):]
		for _, t := range []string{"<|return|>", "<|end|>", "<|start|>"} {
			if k := strings.Index(body, t); k >= 0 {
				body = body[:k]
			}
		}
		return body, calls, nil
	}
	if len(calls) > 0 || strings.Contains(text, "<|channel|>") {
		return "", calls, nil
	}
	return text, nil, nil
}
