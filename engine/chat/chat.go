// Package chat renders the chat templates GGUF models ship in
// tokenizer.chat_template. It holds a small interpreter of our own for the
// Jinja2 subset those templates use, with Hugging Face's settings
// (trim_blocks, lstrip_blocks, its tojson, raise_exception and strftime_now),
// and built-in formats for the common template families: to fall back on
// when a template uses something the interpreter lacks but names its family,
// and for callers to choose by name when a model has no template.
package chat

import (
	"errors"
	"fmt"
	"strings"
)

// Message is one turn of a conversation. An assistant message may carry
// tool calls; a "tool" message is a call's result, naming the call it
// answers (ToolCallID) and the tool (Name) where the template wants them.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
	Name       string
}

// Template is a parsed chat template, safe for concurrent Render calls.
type Template struct {
	body []node
}

// Parse parses a template. A malformed template or a construct the
// interpreter lacks is a *SyntaxError naming it and its position.
func Parse(src string) (*Template, error) {
	// Jinja reads \r\n and a lone \r as \n, in text and string literals.
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n")
	// Jinja drops a single trailing newline (keep_trailing_newline=False).
	src = strings.TrimSuffix(src, "\n")
	body, err := parseTemplate(src)
	if err != nil {
		return nil, err
	}
	return &Template{body: body}, nil
}

// Render renders the conversation with the variables Hugging Face's
// apply_chat_template provides: messages, add_generation_prompt,
// bos_token, eos_token, and tools and documents set to none.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, bosToken, eosToken string) (string, error) {
	return t.RenderVars(msgs, addGenerationPrompt, bosToken, eosToken, nil)
}

// RenderVars is Render with extra template variables (for example
// "enable_thinking": false, or "tools"). Values may be nil, bool, ints,
// floats, string, []string, []any, map[string]any (keys sorted),
// []Message, or JSON (a JSON text, decoded keeping object key order: the
// way to pass tool schemas or messages with tool calls); they override the
// defaults, messages included.
func (t *Template) RenderVars(msgs []Message, addGenerationPrompt bool, bosToken, eosToken string, vars map[string]any) (string, error) {
	return t.renderValues(msgs, addGenerationPrompt, bosToken, eosToken, vars)
}

// renderValues is RenderVars; vars may also hold template values.
func (t *Template) renderValues(msgs []Message, addGenerationPrompt bool, bosToken, eosToken string, vars map[string]any) (string, error) {
	ms, err := messagesValue(msgs)
	if err != nil {
		return "", errorf("chat template messages: %w", err)
	}
	top := map[string]value{
		"messages":              ms,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             bosToken,
		"eos_token":             eosToken,
		"tools":                 nil,
		"documents":             nil,
	}
	for k, v := range vars {
		cv, err := fromGo(v)
		if err != nil {
			return "", errorf("chat template variable %q: %w", k, err)
		}
		top[k] = cv
	}
	r := &renderer{scopes: []map[string]value{top}}
	if err := r.execBody(t.body); err != nil {
		if err == errBreak || err == errContinue {
			return "", errorf("chat template: %v", err)
		}
		return "", err
	}
	return r.out.String(), nil
}

// fromGo converts a Go value to a template value.
func fromGo(v any) (value, error) {
	switch x := v.(type) {
	case nil, bool, int64, float64, string:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case JSON:
		v, err := decodeJSON(x)
		if err != nil {
			return nil, errorf("bad JSON value: %w", err)
		}
		return v, nil
	case []Message:
		return messagesValue(x)
	case *list, *dict:
		return x, nil
	case []string:
		out := make([]value, len(x))
		for i, s := range x {
			out[i] = s
		}
		return &list{Items: out}, nil
	case []any:
		out := make([]value, len(x))
		for i, it := range x {
			c, err := fromGo(it)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return &list{Items: out}, nil
	case map[string]any:
		// Go maps are unordered; sort keys so rendering is deterministic.
		keys := make([]value, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		_ = sortValues(keys, nil, false, true)
		d := newDict()
		for _, k := range keys {
			c, err := fromGo(x[k.(string)])
			if err != nil {
				return nil, err
			}
			d.Set(k, c)
		}
		return d, nil
	}
	return nil, errorf("unsupported Go type %T", v)
}

// Info tells how Apply produced its text.
type Info struct {
	// Family is "" when the template itself rendered the text, else the
	// built-in family used instead.
	Family string
	// Err is why the template could not be used (nil if it was).
	Err error
}

// Fallback reports whether a built-in family format was used.
func (i Info) Fallback() bool { return i.Family != "" }

// ErrUnusable is wrapped by Apply's error when src is empty, or cannot be
// parsed or rendered and its text names no built-in family: there is no
// format to use that the template itself vouches for, so the caller must
// name one (Family) rather than have one guessed.
var ErrUnusable = errors.New("chat template unusable")

// Apply renders msgs with the template src. When the template cannot be
// parsed or rendered (it uses something the interpreter lacks), it detects
// the template's family from its marker strings and renders that family's
// built-in format instead; Info says which path was taken. An empty src, or
// an unusable one whose markers name no family, is an error wrapping
// ErrUnusable (and the reason). An error raised by the template itself
// (raise_exception) is returned as is: the conversation is invalid for this
// model, so no fallback applies.
func Apply(src string, msgs []Message, addGenerationPrompt bool, bosToken, eosToken string) (string, Info, error) {
	if strings.TrimSpace(src) == "" {
		why := errorf("chat template is empty")
		return "", Info{Err: why}, errorf("chat: %w: %w", ErrUnusable, why)
	}
	var why error
	if t, err := Parse(src); err != nil {
		why = err
	} else {
		out, err := t.Render(msgs, addGenerationPrompt, bosToken, eosToken)
		if err == nil {
			return out, Info{}, nil
		}
		var ex *ExceptionError
		if errors.As(err, &ex) {
			return "", Info{Err: err}, err
		}
		why = err
	}
	name := DetectFamily(src)
	if name == "" {
		return "", Info{Err: why}, errorf("chat: %w: %w; its text names no built-in family", ErrUnusable, why)
	}
	f, _ := Family(name)
	out, err := f.Render(msgs, addGenerationPrompt, bosToken, eosToken)
	if err != nil {
		return "", Info{Family: name, Err: why}, errorf("chat: fallback format %s: %w", name, err)
	}
	return out, Info{Family: name, Err: why}, nil
}

// errorf is fmt.Errorf kept out of line: the interpreter has well over a
// hundred error returns, and fmt.Errorf inlined at each made up a good part
// of the package's code in the shared library. For the same reason small
// helpers called from many places (truthy, toNumber, equal, compare, the
// parser's next, isOp, isName, enter and errAt, the lexer's posAt, the
// renderer's execBody, step and checkLen) are marked go:noinline; templates
// render once per prompt, so the calls cost nothing that matters.
//
//go:noinline
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
