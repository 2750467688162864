package chat

import (
	"errors"
	"strings"
)

// Tool calling here is rendering (ApplyTools) and parsing
// (ParseToolCalls). Making the model write a call (OpenAI's tool_choice
// "required" or a named function) is a grammar in the format's call syntax
// (engine.Model.ToolCallGrammar, built with grammar.ToolCalls).

// ToolCall is one function call an assistant message makes.
type ToolCall struct {
	// ID identifies the call for the tool message that answers it (may be
	// empty; some templates, such as Mistral's, require one).
	ID string
	// Name is the function's name.
	Name string
	// Arguments is the call's arguments as a JSON text (an object).
	Arguments string
}

// Bounds of a conversation given as JSON: what a template can reasonably
// be asked to render.
const (
	maxMessagesJSON = 1 << 16
	maxToolCalls    = 1 << 10
)

// messageValue is a message as the template sees it: the keys of an
// OpenAI-style message, the optional ones only when set (templates test
// them with "in" and "is defined"), tool call arguments as objects (what
// Hugging Face templates expect and render with tojson).
func messageValue(m Message) (value, error) {
	d := newDict()
	d.Set("role", m.Role)
	d.Set("content", m.Content)
	if len(m.ToolCalls) > 0 {
		calls := make([]value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := argumentsValue(c.Arguments)
			if err != nil {
				return nil, errorf("tool call %d (%s): %w", i, c.Name, err)
			}
			fn := newDict()
			fn.Set("name", c.Name)
			fn.Set("arguments", args)
			tc := newDict()
			if c.ID != "" {
				tc.Set("id", c.ID)
			}
			tc.Set("type", "function")
			tc.Set("function", fn)
			calls[i] = tc
		}
		d.Set("tool_calls", &list{Items: calls})
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		d.Set("name", m.Name)
	}
	return d, nil
}

// argumentsValue decodes a call's arguments, which must be a JSON object
// ("" is an empty one).
func argumentsValue(args string) (value, error) {
	if strings.TrimSpace(args) == "" {
		return newDict(), nil
	}
	v, err := decodeJSON([]byte(args))
	if err != nil {
		return nil, errorf("arguments: %w", err)
	}
	if _, ok := v.(*dict); !ok {
		return nil, errorf("arguments must be a JSON object, got %s", typeName(v))
	}
	return v, nil
}

// messagesValue is msgs as the template's messages list.
func messagesValue(msgs []Message) (value, error) {
	out := make([]value, len(msgs))
	for i, m := range msgs {
		v, err := messageValue(m)
		if err != nil {
			return nil, errorf("message %d: %w", i, err)
		}
		out[i] = v
	}
	return &list{Items: out}, nil
}

// hasTools reports whether a conversation uses tools at all.
func hasTools(msgs []Message, tools []value) bool {
	if len(tools) > 0 {
		return true
	}
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Role == "tool" {
			return true
		}
	}
	return false
}

// HasToolSyntax reports whether a template renders tools itself: it refers
// to the tools variable or to messages' tool calls. Templates that do not
// (Gemma 3's, the built-in families) get tools the Hermes way instead.
func HasToolSyntax(src string) bool {
	return containsWord(src, "tools") || containsWord(src, "tool_calls")
}

// containsWord reports whether src holds word as an identifier (not part
// of a longer one such as "tools_in_user_message" alone).
func containsWord(src, word string) bool {
	for i := 0; ; {
		j := strings.Index(src[i:], word)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(word)
		if (j == 0 || !isIdentByte(src[j-1])) && (end == len(src) || !isIdentByte(src[end])) {
			return true
		}
		i = j + 1
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ApplyTools is Apply for a conversation with tools: tools is a JSON array
// of OpenAI-style function specs (nil or empty for none) and msgs may carry
// tool calls and tool results. A template with tool syntax (HasToolSyntax)
// receives tools as its tools variable and renders the calls and results
// itself; a template without it, or one that falls back on a built-in
// family, gets them Hermes-style (HermesMessages). Without tools it is
// Apply.
func ApplyTools(src string, msgs []Message, tools JSON, addGenerationPrompt bool, bosToken, eosToken string) (string, Info, error) {
	tv, err := toolsValue(tools)
	if err != nil {
		return "", Info{Err: err}, err
	}
	if !hasTools(msgs, tv) {
		return Apply(src, msgs, addGenerationPrompt, bosToken, eosToken)
	}
	// Bad tool calls are the caller's error, not a reason to fall back.
	if _, err := messagesValue(msgs); err != nil {
		return "", Info{Err: err}, errorf("chat messages: %w", err)
	}
	if readsMessageTools(src) {
		t, perr := Parse(src)
		if perr == nil {
			pm, err := phi4Messages(msgs, tv)
			if err != nil {
				return "", Info{Err: err}, errorf("chat messages: %w", err)
			}
			out, rerr := t.renderValues(msgs, addGenerationPrompt, bosToken, eosToken, map[string]any{"messages": pm})
			if rerr == nil {
				return out, Info{}, nil
			}
			var ex *ExceptionError
			if errors.As(rerr, &ex) {
				return "", Info{Err: rerr}, rerr
			}
		}
	}
	if HasToolSyntax(src) {
		t, perr := Parse(src)
		if perr == nil {
			vars := map[string]any{}
			if len(tv) > 0 {
				vars["tools"] = &list{Items: tv}
			}
			out, rerr := t.renderValues(msgs, addGenerationPrompt, bosToken, eosToken, vars)
			if rerr == nil {
				return out, Info{}, nil
			}
			var ex *ExceptionError
			if errors.As(rerr, &ex) {
				return "", Info{Err: rerr}, rerr
			}
		}
	}
	hm, err := HermesMessages(msgs, tools)
	if err != nil {
		return "", Info{Err: err}, err
	}
	return Apply(src, hm, addGenerationPrompt, bosToken, eosToken)
}

// RenderFamilyTools renders a conversation with tools in the built-in
// family name, Hermes-style.
func RenderFamilyTools(name string, msgs []Message, tools JSON, addGenerationPrompt bool, bosToken, eosToken string) (string, error) {
	f, err := Family(name)
	if err != nil {
		return "", err
	}
	hm, err := HermesMessages(msgs, tools)
	if err != nil {
		return "", err
	}
	return f.Render(hm, addGenerationPrompt, bosToken, eosToken)
}

// toolsValue decodes and checks a tools array: each item an object with
// "type": "function" and a "function" object with a string "name".
func toolsValue(tools JSON) ([]value, error) {
	if len(strings.TrimSpace(string(tools))) == 0 {
		return nil, nil
	}
	v, err := decodeJSON(tools)
	if err != nil {
		return nil, errorf("tools: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	l, ok := v.(*list)
	if !ok {
		return nil, errorf("tools must be a JSON array, got %s", typeName(v))
	}
	for i, it := range l.Items {
		if _, err := toolName(it); err != nil {
			return nil, errorf("tools[%d]: %w", i, err)
		}
	}
	return l.Items, nil
}

// toolName checks one tool spec and returns its function's name.
func toolName(it value) (string, error) {
	d, ok := it.(*dict)
	if !ok {
		return "", errorf("must be an object, got %s", typeName(it))
	}
	for _, k := range d.keys {
		if k != "type" && k != "function" {
			return "", errorf("unknown key %s (a tool has type and function)", reprOf(k))
		}
	}
	if t, _ := d.Get("type"); t != "function" {
		return "", errorf(`type must be "function", got %s`, reprOf(t))
	}
	fv, _ := d.Get("function")
	fn, ok := fv.(*dict)
	if !ok {
		return "", errorf("function must be an object, got %s", typeName(fv))
	}
	name, ok := fn.getString("name")
	if !ok || name == "" {
		return "", errorf("function.name must be a non-empty string")
	}
	return name, nil
}

// getString returns the string at key.
func (d *dict) getString(key string) (string, bool) {
	v, ok := d.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// reprOf is v as a template would print it quoted, for messages.
func reprOf(v value) string {
	var b sbuf
	writeRepr(&b, v, true, 0)
	return b.String()
}

// The Hermes format, for templates without tool syntax: the tools are
// described in the system message, a call is a JSON object in <tool_call>
// tags in the assistant's text, and a result is a user turn in
// <tool_response> tags (a user turn, not a tool one, since such templates
// know only the usual roles).
const (
	hermesIntro = "# Tools\n\nYou can call the functions described below, in <tools></tools> tags, to help with the user's request.\n\n<tools>\n"
	hermesOutro = "\n</tools>\n\nTo call a function, write one JSON object per call, with the function's name and its arguments, between <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments object>}\n</tool_call>"
)

// HermesMessages rewrites a conversation with tools for a template that
// has no tool syntax: the tools' description joins the system message (or
// becomes one), calls are appended to the assistant's text in <tool_call>
// tags, and consecutive tool results become one user message of
// <tool_response> blocks.
func HermesMessages(msgs []Message, tools JSON) ([]Message, error) {
	tv, err := toolsValue(tools)
	if err != nil {
		return nil, err
	}
	var out []Message
	if len(tv) > 0 {
		var b sbuf
		b.WriteString(hermesIntro)
		for i, t := range tv {
			if i > 0 {
				b.WriteByte('\n')
			}
			if err := writeJSON(&b, t, &jsonOpts{itemSep: ", ", keySep: ": "}, 0); err != nil {
				return nil, err
			}
		}
		b.WriteString(hermesOutro)
		block := b.String()
		if len(msgs) > 0 && msgs[0].Role == "system" {
			sys := msgs[0]
			sys.Content = strings.TrimRight(sys.Content, "\n") + "\n\n" + block
			if strings.TrimSpace(msgs[0].Content) == "" {
				sys.Content = block
			}
			out = append(out, sys)
			msgs = msgs[1:]
		} else {
			out = append(out, Message{Role: "system", Content: block})
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "tool":
			var b sbuf
			b.WriteString("<tool_response>\n")
			b.WriteString(m.Content)
			b.WriteString("\n</tool_response>")
			if n := len(out); n > 0 && out[n-1].Role == "user" && i > 0 && msgs[i-1].Role == "tool" {
				out[n-1].Content += "\n" + b.String()
				continue
			}
			out = append(out, Message{Role: "user", Content: b.String()})
		case len(m.ToolCalls) > 0:
			var b sbuf
			b.WriteString(m.Content)
			for _, c := range m.ToolCalls {
				args, err := argumentsValue(c.Arguments)
				if err != nil {
					return nil, errorf("tool call %s: %w", c.Name, err)
				}
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				call := newDict()
				call.Set("name", c.Name)
				call.Set("arguments", args)
				b.WriteString("<tool_call>\n")
				if err := writeJSON(&b, call, &jsonOpts{itemSep: ", ", keySep: ": "}, 0); err != nil {
					return nil, err
				}
				b.WriteString("\n</tool_call>")
			}
			out = append(out, Message{Role: m.Role, Content: b.String()})
		default:
			out = append(out, Message{Role: m.Role, Content: m.Content})
		}
	}
	return out, nil
}
