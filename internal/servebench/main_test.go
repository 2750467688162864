package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/server"
	"github.com/moonlm/moonlm/internal/shareddata"
)

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {90, 9}, {99, 10}, {100, 10}, {1, 1}} {
		if got := pct(xs, c.p); got != c.want {
			t.Errorf("p%g = %g, want %g", c.p, got, c.want)
		}
	}
	if pct(nil, 50) != 0 {
		t.Error("the percentile of nothing is not 0")
	}
}

// A stream without a usage chunk is counted by its text chunks; one with
// an error event is a failure; a non-200 too.
func TestRequestCounting(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("kind") {
		case "error":
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\n")
		case "status":
			http.Error(w, `{"error":{"message":"full"}}`, http.StatusServiceUnavailable)
		default:
			for i := range 5 {
				fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(2 * time.Millisecond)
			}
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		}
	}))
	defer ts.Close()
	r := request(context.Background(), ts.Client(), ts.URL+"/v1/completions", "", []byte(`{}`))
	if r.err != nil || r.tokens != 5 || r.counted || len(r.gaps) != 4 || r.ttft <= 0 || r.total < r.ttft {
		t.Errorf("plain stream: %+v", r)
	}
	if r := request(context.Background(), ts.Client(), ts.URL+"/?kind=error", "", []byte(`{}`)); r.err == nil {
		t.Error("an error event was not a failure")
	}
	if r := request(context.Background(), ts.Client(), ts.URL+"/?kind=status", "", []byte(`{}`)); r.err == nil {
		t.Error("a 503 was not a failure")
	}
	l := summarize("x", 2, []result{{tokens: 10, ttft: time.Millisecond, total: time.Second}, {err: fmt.Errorf("no")}}, 2*time.Second)
	if l.Requests != 2 || l.Failed != 1 || l.Tokens != 10 || l.TokensPerS != 5 || l.TTFTp50ms != 1 {
		t.Errorf("summary %+v", l)
	}
}

// Against moonlm's server: ignore_eos makes every request generate
// max_tokens, which the usage chunk reports.
func TestRequestMoonlm(t *testing.T) {
	path := shareddata.Model(t, "SmolLM2-135M-Instruct.Q4_1.gguf")
	m, err := engine.Open(path, engine.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := server.New(server.Config{Ctx: 256, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(m); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer func() { ts.Close(); s.Close() }()
	body, _ := json.Marshal(map[string]any{"prompt": "Hello", "max_tokens": 12, "temperature": 0, "ignore_eos": true,
		"stream": true, "stream_options": map[string]bool{"include_usage": true}})
	r := request(context.Background(), ts.Client(), ts.URL+"/v1/completions", "", body)
	if r.err != nil || r.tokens != 12 || !r.counted || r.ttft <= 0 {
		t.Errorf("moonlm stream: %+v", r)
	}
}
