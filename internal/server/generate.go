package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/grammar"
	"github.com/moonlm/moonlm/engine/sample"
)

// finishName is the OpenAI finish_reason of an engine finish reason.
func finishName(f engine.FinishReason) string {
	switch f {
	case engine.FinishLength, engine.FinishContext:
		return "length"
	}
	return "stop"
}

// samplingFor builds the sampler parameters of a request and checks them;
// ignore_eos bans the tokens of eog.
func samplingFor(c *commonRequest, vocab int, eog []int32) (sample.Params, *apiError) {
	for _, e := range []*apiError{
		checkRange("temperature", c.Temperature, 0, 2),
		checkRange("top_p", c.TopP, 0, 1),
		checkRange("presence_penalty", c.PresencePenalty, -2, 2),
		checkRange("frequency_penalty", c.FrequencyPenalty, -2, 2),
		checkRange("min_p", c.MinP, 0, 1),
		checkRange("repeat_penalty", c.RepeatPenalty, 0, 10),
	} {
		if e != nil {
			return sample.Params{}, e
		}
	}
	p := sample.Params{Temperature: 1, TopP: 1}
	if c.Temperature != nil {
		p.Temperature = float32(*c.Temperature)
	}
	if c.TopP != nil {
		p.TopP = float32(*c.TopP)
	}
	if c.TopK != nil {
		if *c.TopK < 0 || *c.TopK > vocab {
			return p, invalid("top_k", "invalid_value", "top_k: %d is outside [0, %d]", *c.TopK, vocab)
		}
		p.TopK = *c.TopK
	}
	if c.MinP != nil {
		p.MinP = float32(*c.MinP)
	}
	penalties := false
	if c.PresencePenalty != nil && *c.PresencePenalty != 0 {
		p.PresencePenalty, penalties = float32(*c.PresencePenalty), true
	}
	if c.FrequencyPenalty != nil && *c.FrequencyPenalty != 0 {
		p.FrequencyPenalty, penalties = float32(*c.FrequencyPenalty), true
	}
	if c.RepeatPenalty != nil && *c.RepeatPenalty != 0 && *c.RepeatPenalty != 1 {
		p.RepeatPenalty, penalties = float32(*c.RepeatPenalty), true
	}
	if penalties {
		// The penalties look at the whole context: prompt and reply.
		p.PenaltyLastN = -1
	}
	if len(c.LogitBias) > 0 {
		if len(c.LogitBias) > vocab {
			return p, invalid("logit_bias", "invalid_value", "logit_bias: %d entries for a vocabulary of %d", len(c.LogitBias), vocab)
		}
		p.LogitBias = make(map[int32]float32, len(c.LogitBias))
		for k, v := range c.LogitBias {
			var id int32
			if _, err := fmt.Sscanf(k, "%d", &id); err != nil || fmt.Sprint(id) != k || id < 0 || int(id) >= vocab {
				return p, invalid("logit_bias", "invalid_value", "logit_bias: %q is not a token id of the vocabulary (0 to %d)", k, vocab-1)
			}
			if v < -100 || v > 100 {
				return p, invalid("logit_bias", "invalid_value", "logit_bias: %g for token %s is outside [-100, 100]", v, k)
			}
			p.LogitBias[id] = float32(v)
		}
	}
	if c.IgnoreEOS {
		if p.LogitBias == nil {
			p.LogitBias = make(map[int32]float32, len(eog))
		}
		for _, id := range eog {
			p.LogitBias[id] = float32(math.Inf(-1))
		}
	}
	if c.Seed != nil {
		p.Seed = uint64(*c.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		for _, x := range b {
			p.Seed = p.Seed<<8 | uint64(x)
		}
	}
	if e := c.samplerExtras.apply(&p); e != nil {
		return p, e
	}
	if _, err := sample.New(p); err != nil {
		return p, invalid("", "invalid_value", "sampling parameters: %v", err)
	}
	return p, nil
}

// genPlan is a validated generation request: its prompts and how to run
// them.
type genPlan struct {
	prompts      [][]int32
	n            int
	sampler      sample.Params
	maxTokens    int
	stop         []string
	stream       bool
	includeUsage bool

	model       *engine.Model
	grammar     *grammar.Grammar // constrains the output, nil for none
	logprobs    bool
	topLogprobs int
	tools       toolPlan
	toolFormat  chat.ToolFormat
	// reasons: the model's replies may reason first (harmony's analysis
	// channel, <think> blocks); the text is held and the reasoning goes
	// out as reasoning_content.
	reasons bool
}

// plan checks the fields both routes share and fills p.
func (s *Server) plan(c *commonRequest, m *engine.Model, p *genPlan, isChat bool) *apiError {
	if m.Encoder() {
		return invalid("model", "unsupported_model", "this model (%s) is an embedding model: it has no logits, and serves /v1/embeddings only", m.Info().Arch)
	}
	if e := c.refuseUnsupported(); e != nil {
		return e
	}
	p.model = m
	var e *apiError
	if p.grammar, e = responseFormatGrammar(c.ResponseFormat); e != nil {
		return e
	}
	if p.logprobs, p.topLogprobs, e = logprobsFor(c, isChat); e != nil {
		return e
	}
	if !isChat && (!isOff(c.Tools) || !isNull(c.ToolChoice)) {
		return invalid("tools", "invalid_value", "tools and tool_choice are chat parameters")
	}
	if isChat {
		if p.tools, e = toolsFor(c, s.toolFormat, s.m.ToolCallGrammar); e != nil {
			return e
		}
		if p.tools.parse {
			f, err := s.toolFormat()
			if err != nil {
				return invalid("tools", "chat_template_unavailable", "%v", err)
			}
			p.toolFormat = f
		}
		if f, err := s.toolFormat(); err == nil && s.reasoningModel(f) {
			p.reasons = true
			if !p.tools.parse {
				p.toolFormat = f
			}
		}
		if p.tools.grammar != nil {
			if p.grammar != nil {
				return invalid("response_format", "invalid_value", "response_format cannot be combined with a forced tool_choice")
			}
			p.grammar = p.tools.grammar
		}
	}
	p.n = 1
	if c.N != nil {
		if *c.N < 1 || *c.N > s.cfg.MaxN {
			return invalid("n", "invalid_value", "n: %d is outside [1, %d]", *c.N, s.cfg.MaxN)
		}
		p.n = *c.N
	}
	mt := c.MaxCompletionTokens
	name := "max_completion_tokens"
	if mt == nil {
		mt, name = c.MaxTokens, "max_tokens"
	}
	p.maxTokens = s.cfg.MaxTokens
	if mt != nil {
		if *mt < 1 {
			return invalid(name, "invalid_value", "%s: %d, want at least 1", name, *mt)
		}
		if s.cfg.MaxTokens > 0 && *mt > s.cfg.MaxTokens {
			return invalid(name, "invalid_value", "%s: %d is more than this server's limit of %d", name, *mt, s.cfg.MaxTokens)
		}
		p.maxTokens = *mt
	}
	if p.stop, e = parseStop(c.Stop); e != nil {
		return e
	}
	if p.sampler, e = samplingFor(c, m.Info().VocabSize, s.eog); e != nil {
		return e
	}
	p.stream = c.Stream
	if c.StreamOptions != nil {
		if !c.Stream {
			return invalid("stream_options", "invalid_value", "stream_options is only allowed when stream is true")
		}
		p.includeUsage = c.StreamOptions.IncludeUsage
	}
	return nil
}

// checkPrompt bounds a prompt's length.
func (s *Server) checkPrompt(toks []int32, param string) *apiError {
	if len(toks) == 0 {
		return invalid(param, "invalid_value", "%s: the prompt is empty", param)
	}
	if len(toks) > s.cfg.MaxPromptTokens {
		return invalid(param, "context_length_exceeded",
			"the prompt is %d tokens; this server takes at most %d (its context is %d tokens)", len(toks), s.cfg.MaxPromptTokens, s.cfg.Ctx)
	}
	return nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req chatRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	m, sched, e := s.ready()
	if e != nil {
		writeError(w, e)
		return
	}
	var p genPlan
	if e := s.plan(&req.commonRequest, m, &p, true); e != nil {
		writeError(w, e)
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, invalid("messages", "invalid_value", "messages: at least one message is required"))
		return
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, in := range req.Messages {
		role := in.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		case "":
			writeError(w, invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value", "messages[%d].role is missing", i))
			return
		case "function":
			writeError(w, unsupported(fmt.Sprintf("messages[%d].role %q", i, role)))
			return
		default:
			writeError(w, invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"messages[%d].role: %q is not one of system, developer, user, assistant, tool", i, role))
			return
		}
		calls, e := toolCallsIn(i, in.ToolCalls)
		if e != nil {
			writeError(w, e)
			return
		}
		if len(calls) > 0 && role != "assistant" {
			writeError(w, invalid(fmt.Sprintf("messages[%d].tool_calls", i), "invalid_value", "messages[%d]: only assistant messages make tool calls", i))
			return
		}
		// An assistant message that makes calls may have no content.
		text, e := messageText(i, in.Content, len(calls) > 0)
		if e != nil {
			writeError(w, e)
			return
		}
		msgs[i] = chat.Message{Role: role, Content: text, ToolCalls: calls, ToolCallID: in.ToolCallID, Name: in.Name}
	}
	text, err := s.renderChatTools(msgs, p.tools.tools)
	if err != nil {
		code := "invalid_messages"
		if errors.Is(err, engine.ErrUnsupported) {
			code = "chat_template_unavailable"
			err = fmt.Errorf("%w (start the server with --chat-template NAME|FILE)", err)
		}
		writeError(w, invalid("messages", code, "%v", err))
		return
	}
	// The template writes BOS itself where the model wants it.
	toks, err := m.Tokenize(text, false, true)
	if err != nil {
		writeError(w, invalid("messages", "invalid_value", "%v", err))
		return
	}
	if info := m.Info(); info.AddBOS && info.BOS >= 0 && (len(toks) == 0 || toks[0] != info.BOS) {
		toks = append([]int32{info.BOS}, toks...)
	}
	if e := s.checkPrompt(toks, "messages"); e != nil {
		writeError(w, e)
		return
	}
	p.prompts = [][]int32{toks}
	s.run(w, r, sched, &p, true, t0)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	t0 := time.Now()
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req completionRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	m, sched, e := s.ready()
	if e != nil {
		writeError(w, e)
		return
	}
	var p genPlan
	if e := s.plan(&req.commonRequest, m, &p, false); e != nil {
		writeError(w, e)
		return
	}
	if req.Echo {
		writeError(w, unsupported("echo"))
		return
	}
	if req.Suffix != nil && *req.Suffix != "" {
		writeError(w, unsupported("suffix"))
		return
	}
	if req.BestOf != nil && *req.BestOf != p.n {
		writeError(w, unsupported("best_of"))
		return
	}
	prompts, e := s.completionPrompts(m, req.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	p.prompts = prompts
	s.run(w, r, sched, &p, false, t0)
}

// completionPrompts reads prompt: a string, an array of strings, an array
// of token ids, or an array of arrays of token ids.
func (s *Server) completionPrompts(m *engine.Model, raw json.RawMessage) ([][]int32, *apiError) {
	if isNull(raw) {
		return nil, invalid("prompt", "missing_prompt", "prompt is required")
	}
	vocab := int32(m.Info().VocabSize)
	tokens := func(ids []int64, param string) ([]int32, *apiError) {
		out := make([]int32, len(ids))
		for i, id := range ids {
			if id < 0 || id >= int64(vocab) {
				return nil, invalid(param, "invalid_value", "%s: token %d is outside the vocabulary of %d", param, id, vocab)
			}
			out[i] = int32(id)
		}
		return out, s.checkPrompt(out, param)
	}
	text := func(t, param string) ([]int32, *apiError) {
		toks, err := m.Tokenize(t, true, true)
		if err != nil {
			return nil, invalid(param, "invalid_value", "%s: %v", param, err)
		}
		return toks, s.checkPrompt(toks, param)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		t, e := text(one, "prompt")
		return [][]int32{t}, e
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		if len(strs) > s.cfg.MaxN {
			return nil, invalid("prompt", "invalid_value", "prompt: %d prompts, at most %d", len(strs), s.cfg.MaxN)
		}
		out := make([][]int32, len(strs))
		for i, t := range strs {
			var e *apiError
			if out[i], e = text(t, fmt.Sprintf("prompt[%d]", i)); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		t, e := tokens(ids, "prompt")
		return [][]int32{t}, e
	}
	var idss [][]int64
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		if len(idss) > s.cfg.MaxN {
			return nil, invalid("prompt", "invalid_value", "prompt: %d prompts, at most %d", len(idss), s.cfg.MaxN)
		}
		out := make([][]int32, len(idss))
		for i, ids := range idss {
			var e *apiError
			if out[i], e = tokens(ids, fmt.Sprintf("prompt[%d]", i)); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	return nil, invalid("prompt", "invalid_type", "prompt: expected a string, an array of strings, or token ids")
}

// event is what a sequence sends the request's goroutine: text, or the
// sequence's end (final).
type event struct {
	idx   int
	text  string
	lps   []tokenLogprob // the log-probabilities of the tokens that released text
	final bool
	res   engine.GenerateResult
	err   error
}

// hermesOpen is the tag a Hermes call starts with.
const hermesOpen = "<tool_call>"

// heldText is a sequence's text while tools are on: all of it, and how
// much has been streamed as content.
type heldText struct {
	text    strings.Builder
	sent    int
	lps     []tokenLogprob
	holding bool
}

// add takes a piece of text; with early set (streaming in the Hermes
// form) it streams the text before the first call tag as content, holding
// back what may be the start of the tag.
func (h *heldText) add(out responder, idx int, t string, lps []tokenLogprob, early bool) error {
	h.text.WriteString(t)
	h.lps = append(h.lps, lps...)
	if !early || h.holding {
		return nil
	}
	unsent := h.text.String()[h.sent:]
	cut := len(unsent)
	if i := strings.Index(unsent, hermesOpen); i >= 0 {
		cut, h.holding = i, true
	} else {
		for k := min(len(hermesOpen)-1, len(unsent)); k > 0; k-- {
			if strings.HasSuffix(unsent, hermesOpen[:k]) {
				cut = len(unsent) - k
				break
			}
		}
	}
	if cut == 0 {
		return nil
	}
	h.sent += cut
	l := h.lps
	h.lps = nil
	return out.text(idx, unsent[:cut], l)
}

// hermesFirstCall is where the first Hermes call at or after from starts
// (a tag followed by JSON; a tag in prose is not a call), or -1.
func hermesFirstCall(text string, from int) int {
	for pos := from; ; {
		j := strings.Index(text[pos:], hermesOpen)
		if j < 0 {
			return -1
		}
		at := pos + j
		pos = at + len(hermesOpen)
		body := strings.TrimLeft(text[pos:], " \t\r\n")
		if body != "" && (body[0] == '{' || body[0] == '[') {
			return at
		}
	}
}

// releaseHeld writes the rest of a sequence's text: its tool calls, if the
// model made any (the finish reason becomes tool_calls), and the content
// not streamed yet.
func (s *Server) releaseHeld(out responder, idx int, h *heldText, f chat.ToolFormat, single, withCalls bool, reason string) (string, error) {
	text := h.text.String()
	parsed := chat.ParseToolCalls(f, text)
	if parsed.Reasoning != "" && h.sent == 0 {
		if err := out.reasoning(idx, parsed.Reasoning); err != nil {
			return reason, err
		}
	}
	if !withCalls {
		parsed.Calls, parsed.Err = nil, ""
	}
	if h.sent == 0 && len(parsed.Calls) == 0 && (parsed.Reasoning != "" || f == chat.ToolFormatHarmony && !withCalls) {
		// The answer without the reasoning (harmony: the final channel).
		_, rest := chat.SplitReasoning(f, text)
		text = strings.TrimLeft(rest, " \t\r\n")
		if f == chat.ToolFormatHarmony {
			text = parsed.Content
		}
	}
	if single && len(parsed.Calls) > 1 {
		parsed.Calls = parsed.Calls[:1] // parallel_tool_calls: false
	}
	if len(parsed.Calls) == 0 {
		if parsed.Err != "" {
			s.cfg.Log("moonlm serve: the output looked like a tool call but could not be read: %s", parsed.Err)
		}
		if rest := text[h.sent:]; rest != "" || len(h.lps) > 0 {
			return reason, out.text(idx, rest, h.lps)
		}
		return reason, nil
	}
	content := parsed.Content
	if h.sent > 0 {
		// Part of the content went out already (Hermes): the rest is up to
		// the first call.
		content = ""
		if first := hermesFirstCall(text, h.sent); first > h.sent {
			content = text[h.sent:first]
		}
	}
	if content != "" || len(h.lps) > 0 {
		if err := out.text(idx, content, h.lps); err != nil {
			return reason, err
		}
	}
	calls := make([]toolCallOut, len(parsed.Calls))
	for i, c := range parsed.Calls {
		calls[i] = toolCallOut{ID: c.ID, Type: "function", Function: toolFunctionOut{Name: c.Name, Arguments: c.Arguments}}
	}
	return "tool_calls", out.toolCalls(idx, calls)
}

// run queues the plan's sequences and writes the response, streamed or
// whole.
func (s *Server) run(w http.ResponseWriter, r *http.Request, sched *scheduler, p *genPlan, isChat bool, t0 time.Time) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	total := len(p.prompts) * p.n
	if total > s.cfg.MaxQueue {
		writeError(w, invalid("n", "invalid_value", "%d sequences are more than the server's queue holds (%d)", total, s.cfg.MaxQueue))
		return
	}
	events := make(chan event, 4*total)
	jobs := make([]*job, total)
	var firstTok atomic.Bool
	for pi, prompt := range p.prompts {
		for k := range p.n {
			idx := pi*p.n + k
			sp := p.sampler
			sp.Seed += uint64(k)
			var last time.Time
			var pending []tokenLogprob
			j := &job{ctx: ctx}
			// Harmony's channels are control tokens: kept, to split them.
			params := engine.GenerateParams{MaxTokens: p.maxTokens, Sampler: sp, Stop: p.stop,
				KeepSpecial: p.reasons && p.toolFormat == chat.ToolFormatHarmony}
			if p.grammar != nil {
				mt, err := p.model.GrammarMatcher(p.grammar)
				if err != nil {
					writeError(w, invalid("response_format", "invalid_value", "%v", err))
					return
				}
				params.Constraint = mt
			}
			if p.logprobs {
				params.TopLogprobs = p.topLogprobs
				params.OnLogprobs = func(tok int32, lp float32, top []sample.TokenLogprob) {
					pending = append(pending, tokenEntry(p.model, tok, lp, top))
				}
			}
			j.seq = Sequence{
				Prompt: prompt,
				Params: params,
				Emit: func(text []byte, tok int32) bool {
					now := time.Now()
					if tok >= 0 {
						if last.IsZero() {
							if firstTok.CompareAndSwap(false, true) {
								s.met.ttft.observe(now.Sub(t0))
							}
						} else {
							s.met.perToken.observe(now.Sub(last))
						}
						last = now
					}
					if len(text) == 0 {
						return true
					}
					ev := event{idx: idx, text: string(text), lps: pending}
					pending = nil
					select {
					case events <- ev:
						return true
					case <-ctx.Done():
						return false
					}
				},
			}
			j.done = func(res engine.GenerateResult, err error) {
				events <- event{idx: idx, final: true, res: res, err: err}
			}
			jobs[idx] = j
		}
	}
	if e := sched.submit(jobs); e != nil {
		writeError(w, e)
		return
	}
	var out responder
	if p.stream {
		out = newStreamResponder(w, s.cfg.Alias, isChat, total, p.includeUsage, p.logprobs)
	} else {
		out = newWholeResponder(w, s.cfg.Alias, isChat, total, p.logprobs)
	}
	// With tools the text is parsed into content and calls when the
	// sequence ends; until then it is held (streamed, Hermes: only from
	// the first call tag on).
	var held []heldText
	if p.tools.parse || p.reasons {
		held = make([]heldText, total)
	}
	var u usage
	for _, pr := range p.prompts {
		u.PromptTokens += len(pr)
	}
	var failure error
	clientGone, stopped := false, false
	for left := total; left > 0; {
		ev := <-events
		if !ev.final {
			if held != nil {
				if err := held[ev.idx].add(out, ev.idx, ev.text, ev.lps, p.stream && !p.reasons && p.toolFormat == chat.ToolFormatHermes); err != nil && !clientGone {
					clientGone = true
					cancel()
				}
				continue
			}
			if !clientGone && out.text(ev.idx, ev.text, ev.lps) != nil {
				clientGone = true
				cancel()
			}
			continue
		}
		left--
		s.met.promptTokens.Add(int64(ev.res.PromptTokens))
		s.met.reusedTokens.Add(int64(jobs[ev.idx].seq.Reused))
		s.met.generatedTokens.Add(int64(ev.res.Tokens))
		u.CompletionTokens += ev.res.Tokens
		if ev.err != nil {
			if failure == nil {
				failure = ev.err
				s.cfg.Log("moonlm serve: generation failed: %v", ev.err)
			}
			cancel()
			continue
		}
		if ev.res.Finish == engine.FinishCancelled {
			stopped = true
		}
		if ev.res.Finish != engine.FinishCancelled && !clientGone {
			reason := finishName(ev.res.Finish)
			var err error
			if held != nil {
				reason, err = s.releaseHeld(out, ev.idx, &held[ev.idx], p.toolFormat, p.tools.single, p.tools.parse, reason)
			}
			if err == nil {
				err = out.finish(ev.idx, reason)
			}
			if err != nil {
				clientGone = true
				cancel()
			}
		}
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	switch {
	case r.Context().Err() != nil || clientGone:
		// Nobody to answer.
	case failure != nil:
		out.fail(serverError(http.StatusInternalServerError, "generation_failed", "generation failed: %v", failure))
	case stopped && ctx.Err() != nil:
		out.fail(serverError(http.StatusGatewayTimeout, "timeout", "the request took longer than the server's limit of %v", s.cfg.Timeout))
	default:
		out.done(u)
	}
	s.met.duration.observe(time.Since(t0))
}
