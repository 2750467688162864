package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// commonRequest holds the fields /v1/chat/completions and /v1/completions
// share. Pointers tell an absent field from a zero one.
type commonRequest struct {
	Model               string             `json:"model"`
	Stream              bool               `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	Stop                json.RawMessage    `json:"stop"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	Seed                *int64             `json:"seed"`
	N                   *int               `json:"n"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	User                string             `json:"user"`
	// Extensions llama-server also takes.
	TopK          *int     `json:"top_k"`
	MinP          *float64 `json:"min_p"`
	RepeatPenalty *float64 `json:"repeat_penalty"`
	IgnoreEOS     bool     `json:"ignore_eos"`
	samplerExtras

	ResponseFormat    json.RawMessage `json:"response_format"`
	Tools             json.RawMessage `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Logprobs          json.RawMessage `json:"logprobs"`
	TopLogprobs       *int            `json:"top_logprobs"`

	// Fields this build refuses (see refuseUnsupported).
	Functions    json.RawMessage `json:"functions"`
	FunctionCall json.RawMessage `json:"function_call"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatRequest struct {
	commonRequest
	Messages []chatMessageIn `json:"messages"`
}

type chatMessageIn struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type completionRequest struct {
	commonRequest
	Prompt json.RawMessage `json:"prompt"`
	Echo   bool            `json:"echo"`
	Suffix *string         `json:"suffix"`
	BestOf *int            `json:"best_of"`
}

// isNull reports whether a raw field is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// isOff reports whether a raw field is absent or an explicit "off" value
// (null, false, 0, an empty array), which asks for nothing.
func isOff(raw json.RawMessage) bool {
	t := string(bytes.TrimSpace(raw))
	switch t {
	case "", "null", "false", "0", "[]":
		return true
	}
	return false
}

// refuseUnsupported refuses fields whose features this build lacks, so a
// client never gets an answer that silently ignored them.
func (c *commonRequest) refuseUnsupported() *apiError {
	if !isOff(c.Functions) {
		return unsupported("functions")
	}
	if !isOff(c.FunctionCall) {
		return unsupported("function_call")
	}
	return nil
}

// decodeBody reads one JSON object from the body into v: a body over the
// limit is 413, malformed JSON or a field of the wrong type 400.
func decodeBody(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data after the JSON object")
			var mbe *http.MaxBytesError
			if errors.As(e, &mbe) {
				err = e
			}
		}
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: strp("request_too_large"),
			Message: fmt.Sprintf("the request body is larger than the server's limit of %d bytes", mbe.Limit)}
	case errors.As(err, &typ):
		return invalid(typ.Field, "invalid_type", "%s: expected %s, got JSON %s", typ.Field, typ.Type, typ.Value)
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("", "invalid_json", "the request body is not valid JSON: %v", err)
	}
	return invalid("", "invalid_json", "the request body is not valid JSON: %v", err)
}

// maxStops and maxStopLen bound the stop strings of a request.
const (
	maxStops   = 16
	maxStopLen = 256
)

// parseStop reads stop: a string, an array of strings, or null.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, invalid("stop", "invalid_type", "stop: expected a string or an array of strings")
	}
	if len(many) > maxStops {
		return nil, invalid("stop", "invalid_value", "stop: %d strings, at most %d", len(many), maxStops)
	}
	out := many[:0]
	for _, s := range many {
		if len(s) > maxStopLen {
			return nil, invalid("stop", "invalid_value", "stop: a string of %d bytes, at most %d", len(s), maxStopLen)
		}
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// messageText reads a message's content: a string, or an array of text
// parts (joined). Absent or null content, or another kind of part, is a 400.
func messageText(i int, raw json.RawMessage, optional bool) (string, *apiError) {
	param := "messages[" + strconv.Itoa(i) + "].content"
	if isNull(raw) && optional {
		return "", nil
	}
	if isNull(raw) {
		return "", invalid(param, "missing_content", "%s is missing: every message needs content", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "invalid_type", "%s: expected a string or an array of content parts", param)
	}
	var b strings.Builder
	for k, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", invalid(fmt.Sprintf("%s[%d]", param, k), "unsupported_content",
				"%s[%d]: content parts of type %q are not supported by this server build (only text)", param, k, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

// checkRange refuses a number outside [lo, hi] (or NaN).
func checkRange(name string, v *float64, lo, hi float64) *apiError {
	if v != nil && (math.IsNaN(*v) || *v < lo || *v > hi) {
		return invalid(name, "invalid_value", "%s: %g is outside [%g, %g]", name, *v, lo, hi)
	}
	return nil
}

// Responses.

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatMessageOut struct {
	Role             string        `json:"role"`
	Content          *string       `json:"content"`
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallOut `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type chatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   usage        `json:"usage"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage"`
}
