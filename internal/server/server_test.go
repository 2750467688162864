package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/internal/testmodel"
)

const smolName = "SmolLM2-135M-Instruct.Q4_1.gguf"

var (
	smolOnce sync.Once
	smolM    *engine.Model
	smolErr  error
)

// smol opens SmolLM2 once for the package's tests (skipping when the file
// is absent).
func smol(t *testing.T) *engine.Model {
	t.Helper()
	path := shareddata.Model(t, smolName)
	smolOnce.Do(func() { smolM, smolErr = engine.Open(path, engine.ModelParams{}) })
	if smolErr != nil {
		t.Fatalf("open %s: %v", path, smolErr)
	}
	return smolM
}

// start serves m with cfg on an httptest server.
func start(t *testing.T, m *engine.Model, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Alias == "" {
		cfg.Alias = "smol"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(m); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return s, ts
}

// newTestServer serves s on an httptest server closed with the test.
func newTestServer(t *testing.T, s *Server) string {
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func post(t *testing.T, url, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url, body, hdr...)
}

// checkError asserts an OpenAI-shaped error with status and code.
func checkError(t *testing.T, what string, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("%s: status %d, want %d (body %s)", what, resp.StatusCode, status, body)
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	var e struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		t.Errorf("%s: body is not an OpenAI error: %s", what, body)
		return
	}
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e.Error[k]; !ok {
			t.Errorf("%s: error has no %q: %s", what, k, body)
		}
	}
	var msg, c string
	json.Unmarshal(e.Error["message"], &msg)
	json.Unmarshal(e.Error["code"], &c)
	if msg == "" {
		t.Errorf("%s: empty message", what)
	}
	if code != "" && c != code {
		t.Errorf("%s: code %q, want %q (%s)", what, c, code, msg)
	}
}

type chatResp struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage  `json:"usage"`
	Model string `json:"model"`
	Obj   string `json:"object"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// chatBody is a chat request of one user message.
func chatBody(user string, extra string) string {
	m, _ := json.Marshal(user)
	return fmt.Sprintf(`{"model":"anything","messages":[{"role":"user","content":%s}]%s}`, m, extra)
}

// streamResult is a parsed SSE stream.
type streamResult struct {
	texts   map[int]string
	finish  map[int]string
	roles   map[int]string
	usage   *usage
	done    bool
	chunks  int
	errBody string
}

func readStream(t *testing.T, r io.Reader, isChat bool) streamResult {
	t.Helper()
	res := streamResult{texts: map[int]string{}, finish: map[int]string{}, roles: map[int]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		if res.done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if data == "[DONE]" {
			res.done = true
			continue
		}
		if strings.HasPrefix(data, `{"error"`) {
			res.errBody = data
			continue
		}
		res.chunks++
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Role    string  `json:"role"`
					Content *string `json:"content"`
				} `json:"delta"`
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		want := "text_completion"
		if isChat {
			want = "chat.completion.chunk"
		}
		if c.Object != want {
			t.Errorf("chunk object %q, want %q", c.Object, want)
		}
		if c.Usage != nil {
			res.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if _, seen := res.finish[ch.Index]; seen {
				t.Errorf("choice %d: chunk after its finish_reason", ch.Index)
			}
			if ch.Delta.Role != "" {
				res.roles[ch.Index] = ch.Delta.Role
			}
			if ch.Delta.Content != nil {
				res.texts[ch.Index] += *ch.Delta.Content
			}
			res.texts[ch.Index] += ch.Text
			if ch.FinishReason != nil {
				res.finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return res
}

func postStream(t *testing.T, url, body string, isChat bool) streamResult {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	return readStream(t, resp.Body, isChat)
}

// referenceChat generates the reply to user with the engine directly:
// greedy, at most n tokens, on a fresh session.
func referenceChat(t *testing.T, m *engine.Model, user string, n int) (string, engine.GenerateResult) {
	t.Helper()
	text, err := m.ApplyChatTemplate([]chat.Message{{Role: "user", Content: user}}, true)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := m.Tokenize(text, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if info := m.Info(); info.AddBOS && toks[0] != info.BOS {
		toks = append([]int32{info.BOS}, toks...)
	}
	s, err := m.NewSession(engine.SessionParams{NCtx: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	res, err := s.Generate(toks, engine.GenerateParams{MaxTokens: n}, func(p []byte, _ int32) bool { b.Write(p); return true })
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), res
}

// The chat route answers exactly what the engine generates for the same
// conversation, with usage counting the real tokens.
func TestChatMatchesEngine(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 2, Ctx: 512})
	const q = "What is the capital of France?"
	want, ref := referenceChat(t, m, q, 24)
	resp, body := post(t, ts.URL+"/v1/chat/completions", chatBody(q, `,"temperature":0,"max_tokens":24`))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	r := decode[chatResp](t, body)
	if r.Obj != "chat.completion" || r.Model != "smol" || len(r.Choices) != 1 {
		t.Fatalf("response %s", body)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != want {
		t.Errorf("reply %q (role %q), the engine says %q", c.Message.Content, c.Message.Role, want)
	}
	wantFinish := map[engine.FinishReason]string{engine.FinishEOG: "stop", engine.FinishLength: "length"}[ref.Finish]
	if c.FinishReason != wantFinish {
		t.Errorf("finish_reason %q, engine %v", c.FinishReason, ref.Finish)
	}
	if r.Usage.PromptTokens != ref.PromptTokens || r.Usage.CompletionTokens != ref.Tokens ||
		r.Usage.TotalTokens != ref.PromptTokens+ref.Tokens {
		t.Errorf("usage %+v, engine prompt %d generated %d", r.Usage, ref.PromptTokens, ref.Tokens)
	}

	// Streamed: the same text, the role first, then finish_reason, the
	// usage chunk, [DONE].
	st := postStream(t, ts.URL+"/v1/chat/completions",
		chatBody(q, `,"temperature":0,"max_tokens":24,"stream":true,"stream_options":{"include_usage":true}`), true)
	if !st.done || st.texts[0] != want || st.roles[0] != "assistant" || st.finish[0] != wantFinish {
		t.Errorf("stream: done %v text %q role %q finish %q; want %q %q", st.done, st.texts[0], st.roles[0], st.finish[0], want, wantFinish)
	}
	if st.usage == nil || *st.usage != r.Usage {
		t.Errorf("stream usage %+v, want %+v", st.usage, r.Usage)
	}
	// Without include_usage no chunk carries usage.
	st = postStream(t, ts.URL+"/v1/chat/completions", chatBody(q, `,"temperature":0,"max_tokens":4,"stream":true`), true)
	if st.usage != nil || !st.done || st.finish[0] == "" {
		t.Errorf("stream without include_usage: usage %+v done %v finish %q", st.usage, st.done, st.finish[0])
	}
}

func TestCompletions(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 2, Ctx: 512})
	toks, err := m.Tokenize("Once upon a time", true, true)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := post(t, ts.URL+"/v1/completions", `{"model":"x","prompt":"Once upon a time","temperature":0,"max_tokens":6}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	r := decode[chatResp](t, body)
	if r.Obj != "text_completion" || len(r.Choices) != 1 || r.Choices[0].Text == "" {
		t.Fatalf("response %s", body)
	}
	if r.Choices[0].FinishReason != "length" || r.Usage.CompletionTokens != 6 || r.Usage.PromptTokens != len(toks) {
		t.Errorf("finish %q usage %+v (prompt of %d tokens)", r.Choices[0].FinishReason, r.Usage, len(toks))
	}
	text := r.Choices[0].Text

	// The same prompt as token ids, streamed.
	ids, _ := json.Marshal(toks)
	st := postStream(t, ts.URL+"/v1/completions", `{"prompt":`+string(ids)+`,"temperature":0,"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}}`, false)
	if st.texts[0] != text || st.finish[0] != "length" || !st.done || st.usage == nil || st.usage.CompletionTokens != 6 {
		t.Errorf("stream of token ids: %q %q done %v usage %+v; want %q", st.texts[0], st.finish[0], st.done, st.usage, text)
	}

	// Two prompts, n=2: four choices, indexed prompt-major.
	resp, body = post(t, ts.URL+"/v1/completions", `{"prompt":["Once upon a time","The sky is"],"n":2,"temperature":0,"max_tokens":4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	r = decode[chatResp](t, body)
	if len(r.Choices) != 4 {
		t.Fatalf("%d choices: %s", len(r.Choices), body)
	}
	for i, c := range r.Choices {
		if c.Index != i {
			t.Errorf("choice %d has index %d", i, c.Index)
		}
	}
	if !strings.HasPrefix(text, r.Choices[0].Text) || r.Choices[0].Text != r.Choices[1].Text || r.Choices[2].Text != r.Choices[3].Text || r.Choices[0].Text == r.Choices[2].Text {
		t.Errorf("greedy choices %q %q %q %q (first prompt alone: %q)", r.Choices[0].Text, r.Choices[1].Text, r.Choices[2].Text, r.Choices[3].Text, text)
	}
}

// n > 1 streams every choice: each its role chunk first, its text, its
// finish_reason, the same as the whole answer.
func TestStreamN(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 2, Ctx: 512})
	for _, route := range []string{"/v1/chat/completions", "/v1/completions"} {
		isChat := route == "/v1/chat/completions"
		body := `{"prompt":"The best fruit is","n":3,"max_tokens":8,"temperature":0.9,"seed":5`
		if isChat {
			body = `{"messages":[{"role":"user","content":"Name a fruit."}],"n":3,"max_tokens":8,"temperature":0.9,"seed":5`
		}
		resp, b := post(t, ts.URL+route, body+`}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", route, resp.StatusCode, b)
		}
		whole := decode[chatResp](t, b)
		st := postStream(t, ts.URL+route, body+`,"stream":true,"stream_options":{"include_usage":true}}`, isChat)
		if len(whole.Choices) != 3 || !st.done || st.usage == nil || *st.usage != whole.Usage {
			t.Fatalf("%s: %d choices, stream done %v usage %+v vs %+v", route, len(whole.Choices), st.done, st.usage, whole.Usage)
		}
		for i, c := range whole.Choices {
			text := c.Text
			if isChat {
				text = c.Message.Content
				if st.roles[i] != "assistant" {
					t.Errorf("%s choice %d: role %q", route, i, st.roles[i])
				}
			}
			if st.texts[i] != text || st.finish[i] != c.FinishReason {
				t.Errorf("%s choice %d: stream %q %q, whole %q %q", route, i, st.texts[i], st.finish[i], text, c.FinishReason)
			}
		}
	}
}

// stop ends the text before the stop string, with finish_reason stop.
func TestStop(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 512})
	const q = "Write a sentence about the sea."
	full, _ := referenceChat(t, m, q, 40)
	words := strings.Fields(full)
	if len(words) < 4 {
		t.Fatalf("reply too short to pick a stop word: %q", full)
	}
	stop := " " + words[3]
	cut := full[:strings.Index(full, stop)]
	for _, stream := range []bool{false, true} {
		body := chatBody(q, fmt.Sprintf(`,"temperature":0,"max_tokens":40,"stop":[%q,"@@never@@"],"stream":%v`, stop, stream))
		var text, finish string
		if stream {
			st := postStream(t, ts.URL+"/v1/chat/completions", body, true)
			text, finish = st.texts[0], st.finish[0]
		} else {
			resp, b := post(t, ts.URL+"/v1/chat/completions", body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			r := decode[chatResp](t, b)
			text, finish = r.Choices[0].Message.Content, r.Choices[0].FinishReason
		}
		if text != cut || finish != "stop" {
			t.Errorf("stream %v, stop %q: %q finish %q; want %q stop", stream, stop, text, finish, cut)
		}
	}
}

// n sequences sample independently (seed+i each); the same seed gives the
// same answer again.
func TestSamplingNAndSeed(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 3, Ctx: 512})
	body := chatBody("Tell me a story.", `,"temperature":1.5,"top_p":1,"seed":42,"n":3,"max_tokens":12,"presence_penalty":0.5,"frequency_penalty":0.5`)
	var first []string
	for range 2 {
		resp, b := post(t, ts.URL+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		r := decode[chatResp](t, b)
		if len(r.Choices) != 3 {
			t.Fatalf("%d choices", len(r.Choices))
		}
		var got []string
		for _, c := range r.Choices {
			got = append(got, c.Message.Content)
		}
		if first == nil {
			first = got
			if got[0] == got[1] && got[1] == got[2] {
				t.Errorf("n=3 at temperature 1.5 gave three equal replies %q", got[0])
			}
		} else if strings.Join(got, "\x00") != strings.Join(first, "\x00") {
			t.Errorf("seed 42 twice: %q then %q", first, got)
		}
	}
}

// Sixteen concurrent streaming requests each get what the same request
// gets alone at temperature 0.
func TestConcurrentStreamsMatchAlone(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 4, Ctx: 512})
	topics := []string{"the sea", "a cat", "winter", "bread", "music", "a robot", "the moon", "trains",
		"rain", "a garden", "coffee", "mountains", "a library", "fire", "bicycles", "the desert"}
	bodies := make([]string, len(topics))
	alone := make([]string, len(topics))
	for i, tp := range topics {
		bodies[i] = chatBody("Say one sentence about "+tp+".", `,"temperature":0,"max_tokens":16,"stream":true`)
		st := postStream(t, ts.URL+"/v1/chat/completions", bodies[i], true)
		if !st.done || st.texts[0] == "" {
			t.Fatalf("alone %d: %+v", i, st)
		}
		alone[i] = st.texts[0]
	}
	got := make([]streamResult, len(topics))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() { got[i] = postStream(t, ts.URL+"/v1/chat/completions", bodies[i], true) })
	}
	wg.Wait()
	for i := range got {
		if !got[i].done || got[i].texts[0] != alone[i] {
			t.Errorf("request %d concurrent: %q (done %v); alone: %q", i, got[i].texts[0], got[i].done, alone[i])
		}
	}
}

// metricValue reads one sample of the /metrics text.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	_, b := do(t, http.MethodGet, url+"/metrics", "")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics:\n%s", name, b)
	return 0
}

func waitMetric(t *testing.T, url, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := metricValue(t, url, name)
		if v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %g, want %g", name, v, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// noEOG is a logit_bias that bans every end-of-generation token, so that
// a generation runs to max_tokens.
func noEOG(m *engine.Model) string {
	var parts []string
	for id := range m.Info().VocabSize {
		if m.IsEOG(int32(id)) {
			parts = append(parts, fmt.Sprintf("%q:-100", strconv.Itoa(id)))
		}
	}
	return `{` + strings.Join(parts, ",") + `}`
}

// openStream starts a streaming request and returns once its first chunk
// arrived; cancel drops the connection.
func openStream(t *testing.T, url, body string) (stop func(), rest io.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return func() { cancel(); resp.Body.Close() }, br
}

// A client that drops a stream stops its sequence: the active-sequence
// gauge drops at once and the slot serves the next request.
func TestCancelledStreamFreesSlot(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 1, Ctx: 2048})
	long := `{"prompt":"Once upon a time","max_tokens":1500,"temperature":0,"stream":true,"logit_bias":` + noEOG(m) + `}`
	cancel, _ := openStream(t, ts.URL+"/v1/completions", long)
	waitMetric(t, ts.URL, "moonlm_active_sequences", 1)
	t0 := time.Now()
	cancel()
	waitMetric(t, ts.URL, "moonlm_active_sequences", 0)
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("the sequence stopped %v after the client left", d)
	}
	resp, b := post(t, ts.URL+"/v1/completions", `{"prompt":"Hello","max_tokens":2,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("next request: %d %s", resp.StatusCode, b)
	}
	if r := decode[chatResp](t, b); r.Usage.CompletionTokens != 2 {
		t.Errorf("next request generated %d tokens", r.Usage.CompletionTokens)
	}
	if v := metricValue(t, ts.URL, "moonlm_generated_tokens_total"); v < 3 {
		t.Errorf("generated tokens %g", v)
	}
}

// ignore_eos (llama-server's extension) runs a generation to max_tokens
// where it would end early.
func TestIgnoreEOS(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 512})
	body := chatBody("What is the capital of Germany?", `,"temperature":0,"max_tokens":60`)
	_, b := post(t, ts.URL+"/v1/chat/completions", body)
	r := decode[chatResp](t, b)
	if r.Choices[0].FinishReason != "stop" || r.Usage.CompletionTokens >= 60 {
		t.Fatalf("the reply does not end early, nothing to test: %s", b)
	}
	_, b = post(t, ts.URL+"/v1/chat/completions", body[:len(body)-1]+`,"ignore_eos":true}`)
	r2 := decode[chatResp](t, b)
	if r2.Choices[0].FinishReason != "length" || r2.Usage.CompletionTokens != 60 ||
		!strings.HasPrefix(r2.Choices[0].Message.Content, r.Choices[0].Message.Content) {
		t.Errorf("ignore_eos: %s; without: %s", b, r.Choices[0].Message.Content)
	}
}

// A full queue is a 503 with Retry-After; a queued request whose client
// leaves leaves the queue.
func TestQueueFull(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Parallel: 1, MaxQueue: 1, Ctx: 2048})
	long := `{"prompt":"Once upon a time","max_tokens":1500,"temperature":0,"stream":true,"logit_bias":` + noEOG(m) + `}`
	cancelA, _ := openStream(t, ts.URL+"/v1/completions", long)
	waitMetric(t, ts.URL, "moonlm_active_sequences", 1)

	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	bDone := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctxB, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"Hi","max_tokens":2}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			bDone <- -1
			return
		}
		resp.Body.Close()
		bDone <- resp.StatusCode
	}()
	waitMetric(t, ts.URL, "moonlm_queue_depth", 1)
	resp, b := post(t, ts.URL+"/v1/completions", `{"prompt":"Hi","max_tokens":2}`)
	checkError(t, "queue full", resp, b, http.StatusServiceUnavailable, "queue_full")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("queue full: no Retry-After")
	}
	cancelB()
	waitMetric(t, ts.URL, "moonlm_queue_depth", 0)
	<-bDone
	cancelA()
	waitMetric(t, ts.URL, "moonlm_active_sequences", 0)
}

// A request longer than the timeout stops with 504, or an error event
// when it streams.
func TestTimeout(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 2048, Timeout: 300 * time.Millisecond})
	long := `"prompt":"Once upon a time","max_tokens":1500,"temperature":0,"logit_bias":` + noEOG(m)
	resp, b := post(t, ts.URL+"/v1/completions", `{`+long+`}`)
	checkError(t, "timeout", resp, b, http.StatusGatewayTimeout, "timeout")
	st := postStream(t, ts.URL+"/v1/completions", `{`+long+`,"stream":true}`, false)
	if !st.done || !strings.Contains(st.errBody, `"code":"timeout"`) {
		t.Errorf("streamed timeout: done %v error %q", st.done, st.errBody)
	}
	waitMetric(t, ts.URL, "moonlm_active_sequences", 0)
}

func TestErrors(t *testing.T) {
	m := smol(t)
	_, ts := start(t, m, Config{Ctx: 256, MaxBodyBytes: 2048, MaxTokens: 100, APIKey: "sekret"})
	auth := []string{"Authorization", "Bearer sekret"}
	chatURL := ts.URL + "/v1/chat/completions"
	cases := []struct {
		name, url, body string
		status          int
		code            string
	}{
		{"bad JSON", chatURL, `{"messages":[`, 400, "invalid_json"},
		{"not an object", chatURL, `[1,2]`, 400, "invalid_type"},
		{"trailing data", chatURL, chatBody("hi", "") + `{}`, 400, "invalid_json"},
		{"wrong type", chatURL, `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400, "invalid_type"},
		{"no messages", chatURL, `{"messages":[]}`, 400, "invalid_value"},
		{"message without content", chatURL, `{"messages":[{"role":"user"}]}`, 400, "missing_content"},
		{"null content", chatURL, `{"messages":[{"role":"user","content":null}]}`, 400, "missing_content"},
		{"image part", chatURL, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "unsupported_content"},
		{"bad role", chatURL, `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "invalid_value"},
		{"function role", chatURL, `{"messages":[{"role":"function","content":"hi"}]}`, 400, "unsupported_parameter"},
		{"oversize body", chatURL, chatBody(strings.Repeat("x", 4000), ""), 413, "request_too_large"},
		{"response_format type", chatURL, chatBody("hi", `,"response_format":{"type":"xml"}`), 400, "invalid_value"},
		{"response_format schema feature", chatURL, chatBody("hi", `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","format":"email"}}}`), 400, "unsupported_schema"},
		{"response_format without schema", chatURL, chatBody("hi", `,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}`), 400, "invalid_value"},
		{"tools of wrong shape", chatURL, chatBody("hi", `,"tools":[{"type":"retrieval"}]`), 400, "invalid_value"},
		{"tool_choice without tools", chatURL, chatBody("hi", `,"tool_choice":"required"`), 400, "invalid_value"},
		{"tool_choice unknown", chatURL, chatBody("hi", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"`), 400, "invalid_value"},
		{"tool_choice names no tool", chatURL, chatBody("hi", `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}`), 400, "invalid_value"},
		{"tool parameters schema", chatURL, chatBody("hi", `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string","format":"email"}}}],"tool_choice":"required"`), 400, "unsupported_schema"},
		{"functions", chatURL, chatBody("hi", `,"functions":[{"name":"f"}]`), 400, "unsupported_parameter"},
		{"top_logprobs without logprobs", chatURL, chatBody("hi", `,"top_logprobs":3`), 400, "invalid_value"},
		{"top_logprobs over 20", chatURL, chatBody("hi", `,"logprobs":true,"top_logprobs":21`), 400, "invalid_value"},
		{"completion logprobs over 20", ts.URL + "/v1/completions", `{"prompt":"hi","logprobs":21}`, 400, "invalid_value"},
		{"completion tools", ts.URL + "/v1/completions", `{"prompt":"hi","tools":[{"type":"function","function":{"name":"f"}}]}`, 400, "invalid_value"},
		{"mirostat", chatURL, chatBody("hi", `,"mirostat":3`), 400, "invalid_value"},
		{"typical_p", chatURL, chatBody("hi", `,"typical_p":2`), 400, "invalid_value"},
		{"tool_calls on a user message", chatURL, `{"messages":[{"role":"user","content":"hi","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400, "invalid_value"},
		{"echo", ts.URL + "/v1/completions", `{"prompt":"hi","echo":true}`, 400, "unsupported_parameter"},
		{"no prompt", ts.URL + "/v1/completions", `{"max_tokens":3}`, 400, "missing_prompt"},
		{"token outside the vocabulary", ts.URL + "/v1/completions", `{"prompt":[1,99999999]}`, 400, "invalid_value"},
		{"temperature", chatURL, chatBody("hi", `,"temperature":3`), 400, "invalid_value"},
		{"top_p", chatURL, chatBody("hi", `,"top_p":-1`), 400, "invalid_value"},
		{"n zero", chatURL, chatBody("hi", `,"n":0`), 400, "invalid_value"},
		{"n huge", chatURL, chatBody("hi", `,"n":100000`), 400, "invalid_value"},
		{"max_tokens zero", chatURL, chatBody("hi", `,"max_tokens":0`), 400, "invalid_value"},
		{"max_tokens over the limit", chatURL, chatBody("hi", `,"max_tokens":101`), 400, "invalid_value"},
		{"stop of wrong type", chatURL, chatBody("hi", `,"stop":5`), 400, "invalid_type"},
		{"stream_options without stream", chatURL, chatBody("hi", `,"stream_options":{"include_usage":true}`), 400, "invalid_value"},
		{"logit_bias id", chatURL, chatBody("hi", `,"logit_bias":{"abc":1}`), 400, "invalid_value"},
		{"prompt too long", chatURL, chatBody(strings.Repeat("cat ", 300), ""), 400, "context_length_exceeded"},
	}
	for _, c := range cases {
		resp, b := post(t, c.url, c.body, auth...)
		checkError(t, c.name, resp, b, c.status, c.code)
	}
	// The key: missing, wrong, right; /health and /metrics stay open.
	for _, h := range [][]string{nil, {"Authorization", "Bearer nope"}, {"Authorization", "sekret"}} {
		resp, b := post(t, chatURL, chatBody("hi", `,"max_tokens":1`), h...)
		checkError(t, fmt.Sprintf("key %v", h), resp, b, 401, "invalid_api_key")
		resp, b = do(t, http.MethodGet, ts.URL+"/v1/models", "", h...)
		checkError(t, fmt.Sprintf("models, key %v", h), resp, b, 401, "invalid_api_key")
	}
	if resp, b := post(t, chatURL, chatBody("hi", `,"max_tokens":1`), auth...); resp.StatusCode != 200 {
		t.Errorf("right key: %d %s", resp.StatusCode, b)
	}
	for _, p := range []string{"/health", "/metrics"} {
		if resp, _ := do(t, http.MethodGet, ts.URL+p, ""); resp.StatusCode != 200 {
			t.Errorf("%s without a key: %d", p, resp.StatusCode)
		}
	}
	resp, b := do(t, http.MethodGet, ts.URL+"/v2/nothing", "", auth...)
	checkError(t, "unknown route", resp, b, 404, "not_found")
	resp, b = do(t, http.MethodGet, chatURL, "", auth...)
	checkError(t, "wrong method", resp, b, 405, "method_not_allowed")
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("405 Allow %q", resp.Header.Get("Allow"))
	}
	resp, b = do(t, http.MethodGet, ts.URL+"/v1/models/other", "", auth...)
	checkError(t, "unknown model", resp, b, 404, "model_not_found")
	// Permitted "off" values of the refused fields are accepted.
	resp, b = post(t, chatURL, chatBody("hi", `,"max_tokens":1,"logprobs":false,"tools":[],"tool_choice":"none","response_format":{"type":"text"}`), auth...)
	if resp.StatusCode != 200 {
		t.Errorf("off values: %d %s", resp.StatusCode, b)
	}
	if v := metricValue(t, ts.URL, `moonlm_requests_total{route="/v1/chat/completions",code="400"}`); v < 20 {
		t.Errorf("400s counted: %g", v)
	}
}

func TestHealthModelsMetricsLifecycle(t *testing.T) {
	m := smol(t)
	s, err := New(Config{Alias: "my-model", Ctx: 256})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	resp, b := do(t, http.MethodGet, ts.URL+"/health", "")
	if resp.StatusCode != 503 || !strings.Contains(string(b), "loading") {
		t.Errorf("health while loading: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, ts.URL+"/v1/completions", `{"prompt":"hi"}`)
	checkError(t, "completion while loading", resp, b, 503, "loading")
	if metricValue(t, ts.URL, "moonlm_ready") != 0 {
		t.Error("ready while loading")
	}
	if err := s.Start(m); err != nil {
		t.Fatal(err)
	}
	resp, b = do(t, http.MethodGet, ts.URL+"/health", "")
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Errorf("health when ready: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, http.MethodGet, ts.URL+"/v1/models", "")
	var list struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != 200 || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "my-model" {
		t.Errorf("models: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, http.MethodGet, ts.URL+"/v1/models/my-model", ""); resp.StatusCode != 200 || !strings.Contains(string(b), `"my-model"`) {
		t.Errorf("model: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":3,"temperature":0}`); resp.StatusCode != 200 {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	_, b = do(t, http.MethodGet, ts.URL+"/metrics", "")
	for _, want := range []string{
		"# TYPE moonlm_requests_total counter",
		`moonlm_requests_total{route="/v1/completions",code="200"} 1`,
		`moonlm_requests_total{route="/v1/completions",code="503"} 1`,
		"moonlm_generated_tokens_total 3",
		"# TYPE moonlm_time_to_first_token_seconds histogram",
		`moonlm_time_to_first_token_seconds_bucket{le="+Inf"} 1`,
		"moonlm_time_to_first_token_seconds_count 1",
		`moonlm_time_per_output_token_seconds_bucket{le="+Inf"} 2`,
		"moonlm_queue_depth 0", "moonlm_active_sequences 0", "moonlm_slots 1",
		"moonlm_kv_cache_capacity_tokens 256", "moonlm_ready 1",
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if v := metricValue(t, ts.URL, "moonlm_prompt_tokens_total"); v < 1 {
		t.Errorf("prompt tokens %g", v)
	}
	s.Drain()
	resp, b = do(t, http.MethodGet, ts.URL+"/health", "")
	if resp.StatusCode != 503 || !strings.Contains(string(b), "draining") {
		t.Errorf("health while draining: %d %s", resp.StatusCode, b)
	}
	resp, b = post(t, ts.URL+"/v1/completions", `{"prompt":"hi"}`)
	checkError(t, "completion while draining", resp, b, 503, "shutting_down")
	s.Close()
}

// A model without a chat template serves chat only with a built-in format
// or a template of the server's; its completions work either way.
func TestChatTemplateChoice(t *testing.T) {
	data, err := testmodel.Build(testmodel.Small)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(path, engine.ModelParams{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	body := chatBody("the", `,"max_tokens":3,"temperature":0`)

	_, ts := start(t, m, Config{Ctx: 128})
	resp, b := post(t, ts.URL+"/v1/chat/completions", body)
	checkError(t, "no template", resp, b, 400, "chat_template_unavailable")
	if !strings.Contains(string(b), "--chat-template") {
		t.Errorf("the error does not name --chat-template: %s", b)
	}
	if resp, b := post(t, ts.URL+"/v1/completions", `{"prompt":"the","max_tokens":3}`); resp.StatusCode != 200 {
		t.Errorf("completion without a template: %d %s", resp.StatusCode, b)
	}

	_, ts = start(t, m, Config{Ctx: 128, ChatTemplate: "chatml"})
	if resp, b := post(t, ts.URL+"/v1/chat/completions", body); resp.StatusCode != 200 {
		t.Errorf("chatml: %d %s", resp.StatusCode, b)
	}
	// A template of the server's: the prompt it renders is what usage counts.
	src := `{% for m in messages %}{{ m.role }}: {{ m.content }}
{% endfor %}assistant:`
	_, ts = start(t, m, Config{Ctx: 128, ChatTemplateSource: src})
	resp, b = post(t, ts.URL+"/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("template source: %d %s", resp.StatusCode, b)
	}
	toks, _ := m.Tokenize("user: the\nassistant:", false, true)
	if info := m.Info(); info.AddBOS {
		toks = append([]int32{info.BOS}, toks...)
	}
	if r := decode[chatResp](t, b); r.Usage.PromptTokens != len(toks) {
		t.Errorf("prompt tokens %d, the template's text has %d", r.Usage.PromptTokens, len(toks))
	}
	if _, err := New(Config{ChatTemplateSource: "{% if %}"}); err == nil {
		t.Error("a malformed template source was accepted")
	}
	if _, err := New(Config{ChatTemplate: "nope"}); err == nil {
		t.Error("an unknown format name was accepted")
	}
}

// With prefix reuse a slot evaluates only what its cache lacks; the usage
// still counts the whole prompt. Without it nothing stays in the cache.
func TestPrefixReuse(t *testing.T) {
	m := smol(t)
	_, reuse := start(t, m, Config{Ctx: 512, PrefixReuse: true})
	_, fresh := start(t, m, Config{Ctx: 512})
	sys := `{"role":"system","content":"You are a helpful assistant who answers briefly."}`
	var prompts []int
	for _, q := range []string{"Name a colour.", "Name a fruit."} {
		body := fmt.Sprintf(`{"messages":[%s,{"role":"user","content":%q}],"temperature":0,"max_tokens":10}`, sys, q)
		_, a := post(t, reuse.URL+"/v1/chat/completions", body)
		_, b := post(t, fresh.URL+"/v1/chat/completions", body)
		ra, rb := decode[chatResp](t, a), decode[chatResp](t, b)
		if len(ra.Choices) != 1 || len(rb.Choices) != 1 || ra.Choices[0].Message.Content == "" || ra.Usage.PromptTokens != rb.Usage.PromptTokens {
			t.Errorf("%s: with reuse %s, without %s", q, a, b)
		}
		prompts = append(prompts, ra.Usage.PromptTokens)
	}
	// The second prompt shares the system turn and the user turn's opening.
	reused := metricValue(t, reuse.URL, "moonlm_prompt_tokens_reused_total")
	if reused < 10 || int(reused) >= prompts[1] {
		t.Errorf("%g prompt tokens reused of %d", reused, prompts[1])
	}
	if v := metricValue(t, fresh.URL, "moonlm_prompt_tokens_reused_total"); v != 0 {
		t.Errorf("without reuse %g tokens reused", v)
	}
	if u := metricValue(t, fresh.URL, "moonlm_kv_cache_used_tokens"); u != 0 {
		t.Errorf("without reuse %g KV positions stay in use", u)
	}
	if u := metricValue(t, reuse.URL, "moonlm_kv_cache_used_tokens"); u < float64(prompts[1]) {
		t.Errorf("with reuse %g KV positions in use after a prompt of %d", u, prompts[1])
	}
}

// Concurrent requests are decoded in shared batched steps (far fewer steps
// than tokens), and each equals the same request served alone by a
// one-slot server (no step loop) at temperature 0, with prefix reuse on.
func TestConcurrentRequestsShareSteps(t *testing.T) {
	m := smol(t)
	_, single := start(t, m, Config{Parallel: 1, Ctx: 512})
	srv, ts := start(t, m, Config{Parallel: 4, Ctx: 512, PrefixReuse: true})
	dec, ok := srv.dec.(*sessionDecoder)
	if !ok || dec.loop == nil {
		t.Fatalf("the four-slot server has no step loop (%T)", srv.dec)
	}
	topics := []string{"the sea", "a cat", "winter", "bread"}
	bodies := make([]string, len(topics))
	alone := make([]string, len(topics))
	for i, tp := range topics {
		bodies[i] = chatBody("Say one sentence about "+tp+".", `,"temperature":0,"max_tokens":16,"ignore_eos":true`)
		_, b := post(t, single.URL+"/v1/chat/completions", bodies[i])
		alone[i] = decode[chatResp](t, b).Choices[0].Message.Content
	}
	for round := range 2 { // the second round reuses the slots' prefixes
		before := dec.Steps()
		got := make([]chatResp, len(topics))
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Go(func() {
				_, b := post(t, ts.URL+"/v1/chat/completions", bodies[i])
				got[i] = decode[chatResp](t, b)
			})
		}
		wg.Wait()
		steps := dec.Steps() - before
		tokens := 0
		for i := range got {
			tokens += got[i].Usage.CompletionTokens
			if got[i].Choices[0].Message.Content != alone[i] {
				t.Errorf("round %d request %d concurrent: %q; alone: %q", round, i, got[i].Choices[0].Message.Content, alone[i])
			}
		}
		if tokens != 16*len(topics) || steps >= int64(tokens)*3/4 {
			t.Errorf("round %d: %d tokens in %d steps: the requests did not share steps", round, tokens, steps)
		}
		t.Logf("round %d: %d tokens in %d steps", round, tokens, steps)
	}
}

// The synthetic models of layers that are not all alike (gemma4: two
// shapes, shared KV layers, per-layer inputs, a sliding window; the
// hybrids: DeltaNet layers whose state each slot's session keeps) decode
// concurrent requests in shared steps too, each equal to the same request
// served by a one-slot server, also when the second round's prompts reuse
// the slots' prefixes (a hybrid's rewind goes back to a checkpoint of its
// recurrent state). These models step in microseconds, so a request may
// finish before the next one arrives: the test asks only that some steps
// were shared (TestConcurrentRequestsShareSteps measures how many).
func TestSynthRequestsShareSteps(t *testing.T) {
	for _, name := range []string{"synth-gemma4-Q8_0.gguf", "synth-qwen35-Q8_0.gguf", "synth-qwen3next-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			m, err := engine.Open(shareddata.SynthModel(t, name), engine.ModelParams{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			_, single := start(t, m, Config{Parallel: 1, Ctx: 256})
			srv, ts := start(t, m, Config{Parallel: 3, Ctx: 256, PrefixReuse: true})
			dec, ok := srv.dec.(*sessionDecoder)
			if !ok || dec.loop == nil {
				t.Fatalf("the three-slot server has no step loop (%T)", srv.dec)
			}
			prompts := []string{
				"Once upon a time, there was a little dog named Max. He liked to run in the park",
				"Once upon a time, there was a little dog named Max. He liked to eat",
				"The cat sat on the mat and looked at the bird in the tree",
			}
			bodies := make([]string, len(prompts))
			alone := make([]string, len(prompts))
			for i, p := range prompts {
				bodies[i] = fmt.Sprintf(`{"prompt":%q,"temperature":0,"max_tokens":24,"ignore_eos":true}`, p)
				_, b := post(t, single.URL+"/v1/completions", bodies[i])
				alone[i] = decode[chatResp](t, b).Choices[0].Text
			}
			steps, tokens := int64(0), 0
			for round := range 2 {
				before := dec.Steps()
				got := make([]chatResp, len(prompts))
				var wg sync.WaitGroup
				for i := range bodies {
					wg.Go(func() {
						_, b := post(t, ts.URL+"/v1/completions", bodies[len(bodies)-1-i]) // another slot's prefix in round 1
						got[len(bodies)-1-i] = decode[chatResp](t, b)
					})
				}
				wg.Wait()
				n := dec.Steps() - before
				steps += n
				for i := range got {
					tokens += got[i].Usage.CompletionTokens
					if got[i].Choices[0].Text != alone[i] {
						t.Errorf("round %d request %d concurrent: %q; alone: %q", round, i, got[i].Choices[0].Text, alone[i])
					}
				}
				t.Logf("round %d: %d steps", round, n)
			}
			if tokens != 2*24*len(prompts) || steps >= int64(tokens) {
				t.Errorf("%d tokens in %d steps: the requests did not share steps", tokens, steps)
			}
		})
	}
}
