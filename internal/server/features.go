package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/grammar"
	"github.com/moonlm/moonlm/engine/sample"
)

// samplerExtras are the sampler fields llama-server takes beyond OpenAI's.
type samplerExtras struct {
	TypicalP            *float64 `json:"typical_p"`
	Mirostat            *int     `json:"mirostat"`
	MirostatTau         *float64 `json:"mirostat_tau"`
	MirostatEta         *float64 `json:"mirostat_eta"`
	DRYMultiplier       *float64 `json:"dry_multiplier"`
	DRYBase             *float64 `json:"dry_base"`
	DRYAllowedLength    *int     `json:"dry_allowed_length"`
	DRYPenaltyLastN     *int     `json:"dry_penalty_last_n"`
	DRYSequenceBreakers []string `json:"dry_sequence_breakers"`
	XTCProbability      *float64 `json:"xtc_probability"`
	XTCThreshold        *float64 `json:"xtc_threshold"`
}

// maxDRYBreakers bounds dry_sequence_breakers.
const maxDRYBreakers = 64

// apply checks the extras and sets them on p, with llama-server's defaults
// for the parameters a request leaves out.
func (x *samplerExtras) apply(p *sample.Params) *apiError {
	for _, e := range []*apiError{
		checkRange("typical_p", x.TypicalP, 0, 1),
		checkRange("mirostat_tau", x.MirostatTau, 0, 100),
		checkRange("mirostat_eta", x.MirostatEta, 0, 1),
		checkRange("dry_multiplier", x.DRYMultiplier, 0, 100),
		checkRange("dry_base", x.DRYBase, 0, 100),
		checkRange("xtc_probability", x.XTCProbability, 0, 1),
		checkRange("xtc_threshold", x.XTCThreshold, 0, 1),
	} {
		if e != nil {
			return e
		}
	}
	if x.TypicalP != nil {
		p.TypicalP = float32(*x.TypicalP)
	}
	if x.Mirostat != nil {
		if *x.Mirostat < 0 || *x.Mirostat > 2 {
			return invalid("mirostat", "invalid_value", "mirostat: %d, want 0 (off), 1 or 2", *x.Mirostat)
		}
		p.Mirostat = *x.Mirostat
	}
	p.MirostatTau, p.MirostatEta = 5, 0.1
	if x.MirostatTau != nil {
		p.MirostatTau = float32(*x.MirostatTau)
	}
	if x.MirostatEta != nil {
		p.MirostatEta = float32(*x.MirostatEta)
	}
	if x.DRYMultiplier != nil && *x.DRYMultiplier > 0 {
		p.DRYMultiplier, p.DRYBase, p.DRYAllowedLength, p.DRYPenaltyLastN = float32(*x.DRYMultiplier), 1.75, 2, -1
		p.DRYSequenceBreakers = sample.DefaultDRYSequenceBreakers()
		if x.DRYBase != nil {
			p.DRYBase = float32(*x.DRYBase)
		}
		if x.DRYAllowedLength != nil {
			if *x.DRYAllowedLength < 0 || *x.DRYAllowedLength > 1<<16 {
				return invalid("dry_allowed_length", "invalid_value", "dry_allowed_length: %d is outside [0, 65536]", *x.DRYAllowedLength)
			}
			p.DRYAllowedLength = *x.DRYAllowedLength
		}
		if x.DRYPenaltyLastN != nil {
			if *x.DRYPenaltyLastN < -1 || *x.DRYPenaltyLastN > sample.MaxPenaltyLastN {
				return invalid("dry_penalty_last_n", "invalid_value", "dry_penalty_last_n: %d is outside [-1, %d]", *x.DRYPenaltyLastN, sample.MaxPenaltyLastN)
			}
			p.DRYPenaltyLastN = *x.DRYPenaltyLastN
		}
		if x.DRYSequenceBreakers != nil {
			if len(x.DRYSequenceBreakers) > maxDRYBreakers {
				return invalid("dry_sequence_breakers", "invalid_value", "dry_sequence_breakers: %d strings, at most %d", len(x.DRYSequenceBreakers), maxDRYBreakers)
			}
			for _, b := range x.DRYSequenceBreakers {
				if b == "" || len(b) > maxStopLen {
					return invalid("dry_sequence_breakers", "invalid_value", "dry_sequence_breakers: each string must be 1 to %d bytes", maxStopLen)
				}
			}
			p.DRYSequenceBreakers = x.DRYSequenceBreakers
		}
	}
	if x.XTCProbability != nil {
		p.XTCProbability, p.XTCThreshold = float32(*x.XTCProbability), 0.1
		if x.XTCThreshold != nil {
			p.XTCThreshold = float32(*x.XTCThreshold)
		}
	}
	return nil
}

// Log-probabilities in the responses.

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
}

// completionLogprobs is the legacy completions shape.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// minLogprob stands for -Inf (a token the constraint or the logit bias
// bans), which JSON cannot carry; OpenAI uses the same value.
const minLogprob = -9999.0

func jsonLogprob(v float32) float64 {
	if math.IsNaN(float64(v)) || v < minLogprob {
		return minLogprob
	}
	return float64(v)
}

func byteInts(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// tokenEntry is one generated token's log-probabilities, made in the
// OnLogprobs callback.
func tokenEntry(m *engine.Model, tok int32, lp float32, top []sample.TokenLogprob) tokenLogprob {
	piece := m.TokenPiece(tok)
	e := tokenLogprob{Token: string(piece), Logprob: jsonLogprob(lp), Bytes: byteInts(piece), TopLogprobs: make([]topLogprob, len(top))}
	for i, t := range top {
		p := m.TokenPiece(t.Token)
		e.TopLogprobs[i] = topLogprob{Token: string(p), Logprob: jsonLogprob(t.Logprob), Bytes: byteInts(p)}
	}
	return e
}

// completionLogprobsOf turns token entries into the legacy shape; offset
// is the text offset of the first token.
func completionLogprobsOf(entries []tokenLogprob, offset int) *completionLogprobs {
	c := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, e := range entries {
		c.Tokens = append(c.Tokens, e.Token)
		c.TokenLogprobs = append(c.TokenLogprobs, e.Logprob)
		top := make(map[string]float64, len(e.TopLogprobs))
		for _, t := range e.TopLogprobs {
			if _, ok := top[t.Token]; !ok {
				top[t.Token] = t.Logprob
			}
		}
		c.TopLogprobs = append(c.TopLogprobs, top)
		c.TextOffset = append(c.TextOffset, offset)
		offset += len(e.Token)
	}
	return c
}

// logprobsFor reads logprobs and top_logprobs: chat takes a boolean and
// top_logprobs, completions an integer (the alternatives per token).
func logprobsFor(c *commonRequest, isChat bool) (on bool, top int, e *apiError) {
	if isNull(c.Logprobs) {
		if c.TopLogprobs != nil && *c.TopLogprobs != 0 {
			return false, 0, invalid("top_logprobs", "invalid_value", "top_logprobs needs logprobs: true")
		}
		return false, 0, nil
	}
	if isChat {
		if err := json.Unmarshal(c.Logprobs, &on); err != nil {
			return false, 0, invalid("logprobs", "invalid_type", "logprobs: expected a boolean")
		}
		if c.TopLogprobs != nil {
			top = *c.TopLogprobs
			if !on && top != 0 {
				return false, 0, invalid("top_logprobs", "invalid_value", "top_logprobs needs logprobs: true")
			}
		}
	} else {
		if c.TopLogprobs != nil {
			return false, 0, invalid("top_logprobs", "invalid_value", "top_logprobs is a chat parameter; completions take logprobs: N")
		}
		if err := json.Unmarshal(c.Logprobs, &top); err != nil {
			return false, 0, invalid("logprobs", "invalid_type", "logprobs: expected an integer (the alternatives per token)")
		}
		on = true
	}
	if top < 0 || top > sample.MaxTopLogprobs {
		name := "top_logprobs"
		if !isChat {
			name = "logprobs"
		}
		return false, 0, invalid(name, "invalid_value", "%s: %d is outside [0, %d]", name, top, sample.MaxTopLogprobs)
	}
	return on, top, nil
}

// responseFormatGrammar reads response_format: text (nil), json_object, or
// json_schema with a schema the grammar converter takes.
func responseFormatGrammar(raw json.RawMessage) (*grammar.Grammar, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
		Schema json.RawMessage `json:"schema"` // llama-server's shortcut
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, invalid("response_format", "invalid_type", "response_format: %v", err)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		if !isNull(rf.Schema) {
			return schemaGrammar(rf.Schema, "response_format.schema")
		}
		return grammar.JSONObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil || isNull(rf.JSONSchema.Schema) {
			if !isNull(rf.Schema) {
				return schemaGrammar(rf.Schema, "response_format.schema")
			}
			return nil, invalid("response_format.json_schema.schema", "invalid_value", "response_format: json_schema needs json_schema.schema")
		}
		return schemaGrammar(rf.JSONSchema.Schema, "response_format.json_schema.schema")
	}
	return nil, invalid("response_format.type", "invalid_value", "response_format.type: %q is not one of text, json_object, json_schema", rf.Type)
}

func schemaGrammar(schema json.RawMessage, param string) (*grammar.Grammar, *apiError) {
	g, err := grammar.CompileJSONSchema(schema)
	if err != nil {
		return nil, invalid(param, "unsupported_schema", "%s: %v", param, err)
	}
	return g, nil
}

// Tools.

type toolFunctionOut struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCallOut struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function toolFunctionOut `json:"function"`
}

type toolCallDelta struct {
	Index    int             `json:"index"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function toolFunctionOut `json:"function"`
}

// toolSpec is what the server reads of a tool: its name and parameters.
type toolSpec struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// maxTools bounds the tools of a request.
const maxTools = 128

// toolPlan is a request's tools: the JSON the template gets, whether the
// output is parsed for calls, and the grammar forcing a call.
type toolPlan struct {
	tools   chat.JSON
	parse   bool
	grammar *grammar.Grammar
	// single: parallel_tool_calls is false, so a free reply's first call
	// is kept. A forced reply is one call unless parallel_tool_calls is
	// true (llama-server's default: false).
	single bool
}

// callGrammar compiles the grammar of a reply of tool calls in a format
// (engine.Model.ToolCallGrammar).
type callGrammar func(f chat.ToolFormat, tools []byte, only string, parallel bool) (*grammar.Grammar, error)

// toolsFor reads tools, tool_choice and parallel_tool_calls. format is the
// model's tool call format; forcing calls ("required" or a named
// function) uses calls' grammar for it.
func toolsFor(c *commonRequest, format func() (chat.ToolFormat, error), calls callGrammar) (toolPlan, *apiError) {
	var tp toolPlan
	tp.single = c.ParallelToolCalls != nil && !*c.ParallelToolCalls
	choice := "auto"
	named := ""
	if !isNull(c.ToolChoice) {
		if json.Unmarshal(c.ToolChoice, &choice) != nil {
			var nc struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(c.ToolChoice, &nc); err != nil || nc.Type != "function" || nc.Function.Name == "" {
				return tp, invalid("tool_choice", "invalid_value", `tool_choice: expected "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
			}
			choice, named = "named", nc.Function.Name
		}
		switch choice {
		case "none", "auto", "required", "named":
		default:
			return tp, invalid("tool_choice", "invalid_value", "tool_choice: %q is not one of none, auto, required", choice)
		}
	}
	if isOff(c.Tools) {
		if choice == "required" || choice == "named" {
			return tp, invalid("tool_choice", "invalid_value", "tool_choice: %s needs tools", choice)
		}
		return tp, nil
	}
	var specs []toolSpec
	if err := json.Unmarshal(c.Tools, &specs); err != nil {
		return tp, invalid("tools", "invalid_type", "tools: expected an array of {\"type\":\"function\",\"function\":{...}}: %v", err)
	}
	if len(specs) > maxTools {
		return tp, invalid("tools", "invalid_value", "tools: %d tools, at most %d", len(specs), maxTools)
	}
	found := named == ""
	for i, t := range specs {
		if t.Type != "function" || t.Function.Name == "" {
			return tp, invalid(fmt.Sprintf("tools[%d]", i), "invalid_value", "tools[%d]: expected type \"function\" and a function name", i)
		}
		found = found || t.Function.Name == named
	}
	if !found {
		return tp, invalid("tool_choice", "invalid_value", "tool_choice: no tool is named %q", named)
	}
	tp.tools = chat.JSON(c.Tools)
	if choice == "none" {
		// The template still describes the tools; the output stays text.
		return tp, nil
	}
	tp.parse = true
	if choice == "auto" {
		return tp, nil
	}
	f, err := format()
	if err != nil {
		return tp, invalid("tools", "chat_template_unavailable", "%v", err)
	}
	g, err := calls(f, c.Tools, named, c.ParallelToolCalls != nil && *c.ParallelToolCalls)
	if err != nil {
		return tp, invalid("tools", "unsupported_schema", "tools: %v", err)
	}
	tp.grammar = g
	return tp, nil
}

// toolCallsIn reads an assistant message's tool_calls.
func toolCallsIn(i int, raw json.RawMessage) ([]chat.ToolCall, *apiError) {
	if isOff(raw) {
		return nil, nil
	}
	param := fmt.Sprintf("messages[%d].tool_calls", i)
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, invalid(param, "invalid_type", "%s: expected an array of tool calls: %v", param, err)
	}
	out := make([]chat.ToolCall, len(calls))
	for k, c := range calls {
		if c.Function.Name == "" {
			return nil, invalid(fmt.Sprintf("%s[%d]", param, k), "invalid_value", "%s[%d]: the function's name is missing", param, k)
		}
		// OpenAI sends arguments as a JSON text in a string; accept an
		// object too.
		args := string(bytes.TrimSpace(c.Function.Arguments))
		var s string
		if json.Unmarshal(c.Function.Arguments, &s) == nil {
			args = s
		}
		if args == "" {
			args = "{}"
		}
		out[k] = chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}
