// Package server is moonlm's OpenAI-compatible HTTP server: chat and text
// completions (streamed as server-sent events or not), the model list,
// health and Prometheus metrics, on the standard library's net/http.
//
// Requests become sequences that a scheduler queues (bounded) and hands to
// a Decoder's slots; sessionDecoder runs one engine.Session per slot.
package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/gguf"
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
	// KVType is the KV caches' type (zero: f16; see engine.SessionParams).
	KVType gguf.Type
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
	// In the engine's fast numerics a kept prefix gives the logits of
	// evaluating it again bit for bit (batch-invariant products), so
	// answers do not change; `moonlm serve` turns it on by default.
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

	// embedMu lets one /v1/embeddings request compute at a time.
	embedMu sync.Mutex

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
	dec, err := newSessionDecoder(m, s.cfg.Parallel, engine.SessionParams{NCtx: ctx, KVF32: s.cfg.KVF32, KVType: s.cfg.KVType}, s.cfg.PrefixReuse)
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
	case "/v1/chat/completions", "/v1/completions", "/v1/embeddings":
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
	case "/v1/embeddings":
		s.embeddings(w, r)
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

// renderChatTools is renderChat for a conversation with tools (nil for
// none) or tool calls and results.
func (s *Server) renderChatTools(msgs []chat.Message, tools chat.JSON) (string, error) {
	plain := len(tools) == 0
	for _, m := range msgs {
		if len(m.ToolCalls) > 0 || m.Role == "tool" {
			plain = false
		}
	}
	if plain {
		return s.renderChat(msgs)
	}
	if s.cfg.ChatTemplateSource != "" {
		out, _, err := chat.ApplyTools(s.cfg.ChatTemplateSource, msgs, tools, true, s.bos, s.eos)
		return out, err
	}
	return s.m.ApplyChatTemplateTools(s.cfg.ChatTemplate, msgs, tools, true)
}

// reasoningModel reports whether replies in format f with the server's
// template may reason first: harmony (its analysis channel), or a
// template that writes <think> blocks (Qwen3, DeepSeek-R1).
func (s *Server) reasoningModel(f chat.ToolFormat) bool {
	if f == chat.ToolFormatHarmony {
		return true
	}
	src := s.cfg.ChatTemplateSource
	if src == "" && s.cfg.ChatTemplate == "" {
		src = s.m.Info().ChatTemplate
	}
	return strings.Contains(src, "<think>") || strings.Contains(src, "</think>")
}

// toolFormat is the format the model writes tool calls in with the
// server's template.
func (s *Server) toolFormat() (chat.ToolFormat, error) {
	if s.cfg.ChatTemplateSource != "" {
		return chat.ToolFormatOf(s.cfg.ChatTemplateSource), nil
	}
	return s.m.ToolCallFormat(s.cfg.ChatTemplate)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
