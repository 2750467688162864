// Package server is moonlm's OpenAI-compatible HTTP server: chat and text
// completions (streamed as server-sent events or not), the model list,
// health and Prometheus metrics, on the standard library's net/http.
//
// Requests become sequences that a scheduler queues (bounded) and hands to
// a Decoder's slots; sessionDecoder runs one engine.Session per slot.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/sample"
)

// Config configures a Server. Zero values take the defaults given.
type Config struct {
	// Alias is the model's name in /v1/models and in responses (default
	// "model"; the CLI passes the file's name).
	Alias string
	// APIKey, if set, is required as "Authorization: Bearer KEY" on the
	// /v1 routes (/health and /metrics stay open for probes).
	APIKey string
	// Parallel is the number of slots: sequences that run at once
	// (default 1).
	Parallel int
	// Ctx is each slot's context in tokens (0: the model's training
	// context).
	Ctx int
	// KVF32 keeps the KV caches in f32.
	KVF32 bool
	// MaxQueue bounds the sequences waiting for a slot (default 64); a
	// request that does not fit is a 503 with Retry-After.
	MaxQueue int
	// MaxPromptTokens bounds a prompt (default: the context less one).
	MaxPromptTokens int
	// MaxTokens bounds max_tokens, and is what a request without one gets
	// (default 0: no bound but the context).
	MaxTokens int
	// MaxN bounds n, the sequences a request asks for (default 16).
	MaxN int
	// MaxBodyBytes bounds a request body (default 4 MiB); more is a 413.
	MaxBodyBytes int64
	// Timeout bounds a generation request from arrival to the last token
	// (default 10 minutes); past it the sequences stop and the request
	// fails with 504 (or an error event if it streams).
	Timeout time.Duration
	// ChatTemplate is a built-in format's name (chat.Families), or "" for
	// the model's own template; ChatTemplateSource, if set, is a Jinja
	// template used instead of both.
	ChatTemplate       string
	ChatTemplateSource string
	// PrefixReuse keeps each slot's KV cache between sequences and
	// evaluates only the part of a prompt after the longest prefix the
	// cache holds (a shared system prompt, a conversation's earlier turns).
	// It is off by default: a prompt evaluated in other chunks rounds
	// differently in the engine's fast mode, so a temperature-0 answer can
	// then differ, in its later tokens, from the same request on a fresh
	// slot; with it off every answer depends on its request only.
	PrefixReuse bool
	// Log receives one line per notable event (nil: none).
	Log func(format string, args ...any)
}

func (c *Config) defaults() {
	if c.Alias == "" {
		c.Alias = "model"
	}
	if c.Parallel <= 0 {
		c.Parallel = 1
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = 64
	}
	if c.MaxN <= 0 {
		c.MaxN = 16
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
}

// Server states, for /health.
const (
	stateLoading int32 = iota
	stateReady
	stateDraining
)

// Server is the HTTP server's handler and its model. Make one with New,
// serve Handler at once (/health says 503 while loading), then Start it
// with the model.
type Server struct {
	cfg     Config
	met     *metrics
	state   atomic.Int32
	created int64

	mu    sync.Mutex
	m     *engine.Model
	dec   Decoder
	sched *scheduler
	tmpl  *chat.Template // parsed ChatTemplateSource
	eog   []int32        // the end-of-generation tokens, for ignore_eos
	bos   string         // BOS and EOS token text, for templates
	eos   string
}

// New makes a server in the loading state.
func New(cfg Config) (*Server, error) {
	cfg.defaults()
	s := &Server{cfg: cfg, met: newMetrics(), created: time.Now().Unix()}
	if cfg.ChatTemplateSource != "" {
		t, err := chat.Parse(cfg.ChatTemplateSource)
		if err != nil {
			return nil, fmt.Errorf("server: chat template: %w", err)
		}
		s.tmpl = t
	}
	if cfg.ChatTemplate != "" {
		if _, err := chat.Family(cfg.ChatTemplate); err != nil {
			return nil, fmt.Errorf("server: chat template: %w", err)
		}
	}
	return s, nil
}

// Config is the server's configuration with the defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Start opens the slots on m (one session each) and makes the server
// ready. The server does not own m: close it after Close.
func (s *Server) Start(m *engine.Model) error {
	ctx := s.cfg.Ctx
	train := m.Info().ContextLength
	if ctx == 0 {
		ctx = train
	} else if train > 0 && ctx > train {
		s.cfg.Log("moonlm serve: a context of %d is more than the model's training context %d", ctx, train)
	}
	if ctx < 2 {
		return fmt.Errorf("server: a context of %d tokens (the model says %d): give one of at least 2", ctx, train)
	}
	dec, err := newSessionDecoder(m, s.cfg.Parallel, engine.SessionParams{NCtx: ctx, KVF32: s.cfg.KVF32}, s.cfg.PrefixReuse)
	if err != nil {
		return err
	}
	return s.StartDecoder(m, dec)
}

// StartDecoder is Start with a Decoder of the caller's (for example a
// batched one); the server closes it in Close.
func (s *Server) StartDecoder(m *engine.Model, dec Decoder) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m != nil {
		return errors.New("server: already started")
	}
	tok := m.Tokenizer()
	if id := tok.BOS(); id >= 0 {
		s.bos = tok.Token(id)
	}
	if id := tok.EOS(); id >= 0 {
		s.eos = tok.Token(id)
	}
	s.m, s.dec = m, dec
	for id := range m.Info().VocabSize {
		if m.IsEOG(int32(id)) {
			s.eog = append(s.eog, int32(id))
		}
	}
	if s.cfg.Ctx <= 0 {
		_, kvCap := dec.KVUsage()
		s.cfg.Ctx = int(kvCap / int64(dec.Slots()))
	}
	if s.cfg.MaxPromptTokens <= 0 || s.cfg.MaxPromptTokens > s.cfg.Ctx-1 {
		s.cfg.MaxPromptTokens = s.cfg.Ctx - 1
	}
	s.sched = newScheduler(dec, s.cfg.MaxQueue, s.met)
	s.state.Store(stateReady)
	if _, err := s.renderChat([]chat.Message{{Role: "user", Content: "Hi"}}); err != nil {
		s.cfg.Log("moonlm serve: /v1/chat/completions will refuse requests: %v", err)
	}
	return nil
}

// Drain makes /health report 503 and refuses new generation requests with
// 503, while the ones in flight finish: the first step of a graceful
// shutdown (then http.Server.Shutdown, then Close).
func (s *Server) Drain() { s.state.Store(stateDraining) }

// Close finishes the queued and running sequences and releases the slots.
func (s *Server) Close() {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched != nil {
		s.sched.close()
		s.sched = nil
	}
	if s.dec != nil {
		s.dec.Close()
		s.dec = nil
	}
}

// Handler serves every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	route, method := "", ""
	switch path {
	case "/health":
		route, method = "/health", http.MethodGet
	case "/metrics":
		route, method = "/metrics", http.MethodGet
	case "/v1/models":
		route, method = "/v1/models", http.MethodGet
	case "/v1/chat/completions", "/v1/completions":
		route, method = path, http.MethodPost
	default:
		if m, ok := strings.CutPrefix(path, "/v1/models/"); ok && m != "" {
			route, method = "/v1/models/{model}", http.MethodGet
		}
	}
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		if route == "" {
			route = "other"
		}
		s.met.request(route, rec.code())
	}()
	w = rec
	if route == "" {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: strp("not_found"),
			Message: fmt.Sprintf("no route %s %s", r.Method, path)})
		return
	}
	if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", method)
		writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: strp("method_not_allowed"),
			Message: fmt.Sprintf("%s takes %s, not %s", path, method, r.Method)})
		return
	}
	if strings.HasPrefix(path, "/v1/") && !s.authorized(r) {
		writeError(w, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: strp("invalid_api_key"),
			Message: "missing or wrong API key: send the header Authorization: Bearer KEY"})
		return
	}
	switch route {
	case "/health":
		s.health(w)
	case "/metrics":
		s.metrics(w)
	case "/v1/models":
		s.models(w)
	case "/v1/models/{model}":
		s.model(w, strings.TrimPrefix(path, "/v1/models/"))
	case "/v1/chat/completions":
		s.chatCompletions(w, r)
	case "/v1/completions":
		s.completions(w, r)
	}
}

// statusRecorder remembers the status code for the request metrics and
// passes Flush through for streaming.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.cfg.APIKey)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	w.Write(append(b, '\n'))
}

func (s *Server) health(w http.ResponseWriter) {
	switch s.state.Load() {
	case stateReady:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case stateDraining:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "loading"})
	}
}

func (s *Server) metrics(w http.ResponseWriter) {
	var used, capacity int64
	s.mu.Lock()
	dec := s.dec
	s.mu.Unlock()
	slots := s.cfg.Parallel
	if dec != nil {
		used, capacity = dec.KVUsage()
		slots = dec.Slots()
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.met.write(w, slots, used, capacity, s.state.Load() == stateReady)
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelEntry() modelEntry {
	return modelEntry{ID: s.cfg.Alias, Object: "model", Created: s.created, OwnedBy: "moonlm"}
}

func (s *Server) models(w http.ResponseWriter) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelEntry{s.modelEntry()}})
}

func (s *Server) model(w http.ResponseWriter, id string) {
	if id != s.cfg.Alias {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found"),
			Message: fmt.Sprintf("the model %q does not exist; this server serves %q", id, s.cfg.Alias)})
		return
	}
	writeJSON(w, http.StatusOK, s.modelEntry())
}

// ready returns the model and scheduler, or the 503 to send while loading
// or draining.
func (s *Server) ready() (*engine.Model, *scheduler, *apiError) {
	switch s.state.Load() {
	case stateLoading:
		e := serverError(http.StatusServiceUnavailable, "loading", "the model is loading; retry shortly")
		e.RetryAfter = 1
		return nil, nil, e
	case stateDraining:
		return nil, nil, serverError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sched == nil {
		return nil, nil, serverError(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
	return s.m, s.sched, nil
}

// renderChat writes a conversation in the chat template the server uses.
func (s *Server) renderChat(msgs []chat.Message) (string, error) {
	if s.tmpl != nil {
		return s.tmpl.Render(msgs, true, s.bos, s.eos)
	}
	return s.m.ApplyChatTemplateNamed(s.cfg.ChatTemplate, msgs, true)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

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
}

// plan checks the fields both routes share and fills p.
func (s *Server) plan(c *commonRequest, m *engine.Model, p *genPlan) *apiError {
	if e := c.refuseUnsupported(); e != nil {
		return e
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
	var e *apiError
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
	if e := s.plan(&req.commonRequest, m, &p); e != nil {
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
		case "system", "user", "assistant":
		case "developer":
			role = "system"
		case "":
			writeError(w, invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value", "messages[%d].role is missing", i))
			return
		case "tool", "function":
			writeError(w, unsupported(fmt.Sprintf("messages[%d].role %q", i, role)))
			return
		default:
			writeError(w, invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value",
				"messages[%d].role: %q is not one of system, developer, user, assistant", i, role))
			return
		}
		if !isOff(in.ToolCalls) {
			writeError(w, unsupported(fmt.Sprintf("messages[%d].tool_calls", i)))
			return
		}
		text, e := messageText(i, in.Content)
		if e != nil {
			writeError(w, e)
			return
		}
		msgs[i] = chat.Message{Role: role, Content: text}
	}
	text, err := s.renderChat(msgs)
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
	if e := s.plan(&req.commonRequest, m, &p); e != nil {
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
	final bool
	res   engine.GenerateResult
	err   error
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
			j := &job{ctx: ctx}
			j.seq = Sequence{
				Prompt: prompt,
				Params: engine.GenerateParams{MaxTokens: p.maxTokens, Sampler: sp, Stop: p.stop},
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
					select {
					case events <- event{idx: idx, text: string(text)}:
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
		out = newStreamResponder(w, s.cfg.Alias, isChat, total, p.includeUsage)
	} else {
		out = &wholeResponder{w: w, model: s.cfg.Alias, chat: isChat, texts: make([]strings.Builder, total), reasons: make([]string, total)}
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
			if !clientGone && out.text(ev.idx, ev.text) != nil {
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
			if out.finish(ev.idx, finishName(ev.res.Finish)) != nil {
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

// responder writes a generation's answer: streamed chunks, or one
// response at the end. text and finish report a failed write (the client
// is gone).
type responder interface {
	text(idx int, t string) error
	finish(idx int, reason string) error
	done(u usage)
	fail(e *apiError)
}

// wholeResponder collects the text and writes one response.
type wholeResponder struct {
	w       http.ResponseWriter
	model   string
	chat    bool
	texts   []strings.Builder
	reasons []string
}

func (o *wholeResponder) text(idx int, t string) error { o.texts[idx].WriteString(t); return nil }

func (o *wholeResponder) finish(idx int, reason string) error { o.reasons[idx] = reason; return nil }

func (o *wholeResponder) done(u usage) {
	created := time.Now().Unix()
	if o.chat {
		resp := chatResponse{ID: newID("chatcmpl-"), Object: "chat.completion", Created: created, Model: o.model, Usage: u}
		for i := range o.texts {
			resp.Choices = append(resp.Choices, chatChoice{Index: i, FinishReason: o.reasons[i],
				Message: chatMessageOut{Role: "assistant", Content: o.texts[i].String()}})
		}
		writeJSON(o.w, http.StatusOK, resp)
		return
	}
	resp := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: created, Model: o.model, Usage: &u}
	for i := range o.texts {
		f := o.reasons[i]
		resp.Choices = append(resp.Choices, completionChoice{Index: i, Text: o.texts[i].String(), FinishReason: &f})
	}
	writeJSON(o.w, http.StatusOK, resp)
}

func (o *wholeResponder) fail(e *apiError) { writeError(o.w, e) }

// streamResponder writes server-sent events: a chunk per piece of text,
// one with each choice's finish_reason, the usage chunk if asked for, then
// "data: [DONE]".
type streamResponder struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	id           string
	model        string
	created      int64
	chat         bool
	includeUsage bool
	buf          []byte
	err          error
}

func newStreamResponder(w http.ResponseWriter, model string, isChat bool, n int, includeUsage bool) *streamResponder {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	o := &streamResponder{w: w, rc: http.NewResponseController(w), model: model, created: time.Now().Unix(), chat: isChat, includeUsage: includeUsage}
	if isChat {
		o.id = newID("chatcmpl-")
		// The first chunk of each choice names the role.
		for i := range n {
			empty := ""
			o.send(o.chatChunk(i, chatDelta{Role: "assistant", Content: &empty}, nil))
		}
	} else {
		o.id = newID("cmpl-")
	}
	return o
}

func (o *streamResponder) chatChunk(idx int, d chatDelta, finish *string) chatChunk {
	return chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model,
		Choices: []chatChunkChoice{{Index: idx, Delta: d, FinishReason: finish}}}
}

func (o *streamResponder) completionChunk(idx int, t string, finish *string) completionResponse {
	return completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: o.model,
		Choices: []completionChoice{{Index: idx, Text: t, FinishReason: finish}}}
}

// send writes one event and flushes it; the first failed write is kept.
func (o *streamResponder) send(v any) error {
	if o.err != nil {
		return o.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return err
	}
	o.buf = append(append(append(o.buf[:0], "data: "...), b...), "\n\n"...)
	if _, err := o.w.Write(o.buf); err != nil {
		o.err = err
		return err
	}
	if err := o.rc.Flush(); err != nil {
		o.err = err
	}
	return o.err
}

func (o *streamResponder) text(idx int, t string) error {
	if o.chat {
		return o.send(o.chatChunk(idx, chatDelta{Content: &t}, nil))
	}
	return o.send(o.completionChunk(idx, t, nil))
}

func (o *streamResponder) finish(idx int, reason string) error {
	if o.chat {
		return o.send(o.chatChunk(idx, chatDelta{}, &reason))
	}
	return o.send(o.completionChunk(idx, "", &reason))
}

func (o *streamResponder) done(u usage) {
	if o.includeUsage {
		if o.chat {
			o.send(chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model, Choices: []chatChunkChoice{}, Usage: &u})
		} else {
			o.send(completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: o.model, Choices: []completionChoice{}, Usage: &u})
		}
	}
	o.sendDone()
}

// fail sends the error as an event in OpenAI's shape (the status line has
// gone out already), then ends the stream.
func (o *streamResponder) fail(e *apiError) {
	o.send(struct {
		Error *apiError `json:"error"`
	}{e})
	o.sendDone()
}

func (o *streamResponder) sendDone() {
	if o.err != nil {
		return
	}
	if _, err := o.w.Write([]byte("data: [DONE]\n\n")); err == nil {
		o.rc.Flush()
	}
}
