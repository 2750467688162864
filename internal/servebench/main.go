// Command servebench is a bounded load test of an OpenAI-compatible server
// (moonlm serve or llama.cpp's llama-server): at each concurrency, that
// many clients each send the same number of streaming /v1/completions
// requests (ignore_eos, so every request generates max_tokens) and it
// reports the aggregate generation rate and latency percentiles. It only
// talks to loopback addresses. scripts/bench-serve.sh (make bench-serve)
// starts the servers and runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "servebench:", err)
		os.Exit(1)
	}
}

// result is one request's measurements.
type result struct {
	ttft    time.Duration // to the first text
	total   time.Duration
	tokens  int
	gaps    []time.Duration // between text chunks
	err     error
	counted bool // tokens from usage, not from chunks
}

// level is one concurrency's summary.
type level struct {
	Name        string  `json:"name"`
	Clients     int     `json:"clients"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	Tokens      int     `json:"tokens"`
	Seconds     float64 `json:"seconds"`
	TokensPerS  float64 `json:"tokens_per_s"`
	TTFTp50ms   float64 `json:"ttft_p50_ms"`
	TTFTp99ms   float64 `json:"ttft_p99_ms"`
	ITLp50ms    float64 `json:"itl_p50_ms"`
	ITLp99ms    float64 `json:"itl_p99_ms"`
	Latencyp50s float64 `json:"latency_p50_s"`
	Latencyp99s float64 `json:"latency_p99_s"`
	FirstError  string  `json:"first_error,omitempty"` // why the first failed request failed
}

func run() error {
	base := flag.String("url", "", "the server's base `URL` (loopback only), e.g. http://127.0.0.1:8080")
	name := flag.String("name", "server", "the `name` the report gives the server")
	clientsFlag := flag.String("clients", "1,4,8,16", "concurrency `levels`, comma-separated")
	perClient := flag.Int("requests", 2, "requests per client at each level (`N`, 1 to 100)")
	maxTokens := flag.Int("max-tokens", 64, "tokens each request generates (`N`, 1 to 4096)")
	prompt := flag.String("prompt", "Once upon a time, in a small village by the sea, there lived", "the prompt `text`")
	limit := flag.Duration("limit", 10*time.Minute, "stop a level after `duration`")
	key := flag.String("api-key", "", "send this Bearer `key`")
	asJSON := flag.Bool("json", false, "print one JSON object per level instead of a table row")
	flag.Parse()
	u, err := url.Parse(*base)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" {
		return fmt.Errorf("-url %q: want http://HOST:PORT", *base)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-url %q: only loopback servers are load-tested", *base)
	}
	if *perClient < 1 || *perClient > 100 || *maxTokens < 1 || *maxTokens > 4096 {
		return errors.New("-requests wants 1 to 100, -max-tokens 1 to 4096")
	}
	var levels []int
	for _, f := range strings.Split(*clientsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("-clients %q: want numbers from 1 to 64", *clientsFlag)
		}
		levels = append(levels, n)
	}
	body, _ := json.Marshal(map[string]any{
		"model": "any", "prompt": *prompt, "max_tokens": *maxTokens, "temperature": 0,
		"ignore_eos": true, "stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	// A fresh connection per request: a server may close an idle keep-alive
	// connection just as a client reuses it (llama-server does), and Go does
	// not retry a POST on it, which would count as a failed request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	endpoint := strings.TrimSuffix(*base, "/") + "/v1/completions"
	// One request first: it warms the server and checks that it answers.
	if r := request(context.Background(), client, endpoint, *key, body); r.err != nil {
		return fmt.Errorf("%s: %w", *name, r.err)
	}
	if !*asJSON {
		fmt.Printf("%-12s %7s %8s %6s %8s %9s %9s %9s %9s %9s %9s\n", "server", "clients", "requests", "failed", "tokens",
			"tok/s", "ttft p50", "ttft p99", "itl p50", "itl p99", "lat p99")
	}
	for _, n := range levels {
		ctx, cancel := context.WithTimeout(context.Background(), *limit)
		res := make([][]result, n)
		t0 := time.Now()
		var wg sync.WaitGroup
		for c := range n {
			wg.Go(func() {
				for range *perClient {
					if ctx.Err() != nil {
						return
					}
					res[c] = append(res[c], request(ctx, client, endpoint, *key, body))
				}
			})
		}
		wg.Wait()
		wall := time.Since(t0)
		cancel()
		l := summarize(*name, n, slices.Concat(res...), wall)
		if *asJSON {
			b, _ := json.Marshal(l)
			fmt.Println(string(b))
		} else {
			fmt.Printf("%-12s %7d %8d %6d %8d %9.1f %7.0fms %7.0fms %7.1fms %7.1fms %8.2fs\n", l.Name, l.Clients, l.Requests, l.Failed,
				l.Tokens, l.TokensPerS, l.TTFTp50ms, l.TTFTp99ms, l.ITLp50ms, l.ITLp99ms, l.Latencyp99s)
		}
		if l.FirstError != "" {
			fmt.Fprintf(os.Stderr, "%s, %d clients: %d failed, the first: %s\n", l.Name, l.Clients, l.Failed, l.FirstError)
		}
	}
	return nil
}

func summarize(name string, clients int, rs []result, wall time.Duration) level {
	l := level{Name: name, Clients: clients, Seconds: wall.Seconds()}
	var ttft, lat, gaps []float64
	for _, r := range rs {
		l.Requests++
		if r.err != nil {
			if l.Failed == 0 {
				l.FirstError = r.err.Error()
			}
			l.Failed++
			continue
		}
		l.Tokens += r.tokens
		ttft = append(ttft, r.ttft.Seconds()*1000)
		lat = append(lat, r.total.Seconds())
		for _, g := range r.gaps {
			gaps = append(gaps, g.Seconds()*1000)
		}
	}
	if wall > 0 {
		l.TokensPerS = float64(l.Tokens) / wall.Seconds()
	}
	l.TTFTp50ms, l.TTFTp99ms = pct(ttft, 50), pct(ttft, 99)
	l.ITLp50ms, l.ITLp99ms = pct(gaps, 50), pct(gaps, 99)
	l.Latencyp50s, l.Latencyp99s = pct(lat, 50), pct(lat, 99)
	return l
}

// pct is the p-th percentile (nearest rank) of xs; 0 for none.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(float64(len(xs))*p/100+0.5) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

// request sends one streaming completion and times it.
func request(ctx context.Context, client *http.Client, endpoint, key string, body []byte) (r result) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		r.err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		return r
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var last time.Time
	chunks := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			r.err = fmt.Errorf("chunk %q: %w", data, err)
			return r
		}
		if len(c.Error) > 0 {
			r.err = fmt.Errorf("error event: %s", c.Error)
			return r
		}
		if c.Usage != nil && c.Usage.CompletionTokens > 0 {
			r.tokens, r.counted = c.Usage.CompletionTokens, true
		}
		if len(c.Choices) > 0 && c.Choices[0].Text != "" {
			now := time.Now()
			if last.IsZero() {
				r.ttft = now.Sub(t0)
			} else {
				r.gaps = append(r.gaps, now.Sub(last))
			}
			last = now
			chunks++
		}
	}
	if err := sc.Err(); err != nil {
		r.err = err
		return r
	}
	r.total = time.Since(t0)
	if !r.counted {
		r.tokens = chunks
	}
	if r.tokens == 0 {
		r.err = errors.New("no tokens")
	}
	return r
}
