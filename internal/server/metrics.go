package server

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// metrics are the server's Prometheus metrics. Everything a generated
// token updates is an atomic (no lock, no allocation per token).
type metrics struct {
	mu       sync.Mutex
	requests map[requestKey]int64 // by route and status

	promptTokens    atomic.Int64
	reusedTokens    atomic.Int64
	generatedTokens atomic.Int64
	queueDepth      atomic.Int64
	active          atomic.Int64
	ttft            *histogram // seconds from request to first token
	perToken        *histogram // seconds between generated tokens
	duration        *histogram // seconds per request
}

type requestKey struct {
	route string
	code  int
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[requestKey]int64{},
		ttft:     newHistogram(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
		perToken: newHistogram(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
		duration: newHistogram(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
	}
}

// request counts a finished request.
func (m *metrics) request(route string, code int) {
	m.mu.Lock()
	m.requests[requestKey{route, code}]++
	m.mu.Unlock()
}

// histogram is a Prometheus histogram with fixed bounds; observations are
// atomic. The sum is kept in nanoseconds (an integer, so it adds
// atomically).
type histogram struct {
	bounds []float64
	counts []atomic.Int64 // per bucket (not cumulative); the last is +Inf
	sumNs  atomic.Int64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]atomic.Int64, len(bounds)+1)}
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := sort.SearchFloat64s(h.bounds, s) // first bound >= s
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", name, cum)
	fmt.Fprintf(w, "%s_sum %s\n", name, strconv.FormatFloat(float64(h.sumNs.Load())/1e9, 'g', -1, 64))
	fmt.Fprintf(w, "%s_count %d\n", name, cum)
}

func writeCounter(w io.Writer, name, help string, v int64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
}

func writeGauge(w io.Writer, name, help string, v float64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, strconv.FormatFloat(v, 'g', -1, 64))
}

// write renders every metric in the Prometheus text format (0.0.4).
func (m *metrics) write(w io.Writer, slots int, kvUsed, kvCap int64, ready bool) {
	m.mu.Lock()
	keys := make([]requestKey, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].route != keys[j].route {
			return keys[i].route < keys[j].route
		}
		return keys[i].code < keys[j].code
	})
	fmt.Fprintf(w, "# HELP moonlm_requests_total HTTP requests answered, by route and status code.\n# TYPE moonlm_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "moonlm_requests_total{route=%q,code=\"%d\"} %d\n", k.route, k.code, m.requests[k])
	}
	m.mu.Unlock()
	writeCounter(w, "moonlm_prompt_tokens_total", "Prompt tokens of the sequences run (tokens in).", m.promptTokens.Load())
	writeCounter(w, "moonlm_prompt_tokens_reused_total", "Prompt tokens a slot's KV cache already held (prefix reuse), not evaluated again.", m.reusedTokens.Load())
	writeCounter(w, "moonlm_generated_tokens_total", "Tokens generated (tokens out).", m.generatedTokens.Load())
	m.ttft.write(w, "moonlm_time_to_first_token_seconds", "Time from a request's arrival to its first generated token.")
	m.perToken.write(w, "moonlm_time_per_output_token_seconds", "Time between consecutive generated tokens of a sequence.")
	m.duration.write(w, "moonlm_request_duration_seconds", "Time to answer a generation request, from arrival to the last byte.")
	writeGauge(w, "moonlm_queue_depth", "Sequences waiting for a slot.", float64(m.queueDepth.Load()))
	writeGauge(w, "moonlm_active_sequences", "Sequences running on a slot.", float64(m.active.Load()))
	writeGauge(w, "moonlm_slots", "Sequences that can run at once (--parallel).", float64(slots))
	writeGauge(w, "moonlm_kv_cache_used_tokens", "KV cache positions in use, over all slots.", float64(kvUsed))
	writeGauge(w, "moonlm_kv_cache_capacity_tokens", "KV cache positions, over all slots.", float64(kvCap))
	ratio := 0.0
	if kvCap > 0 {
		ratio = float64(kvUsed) / float64(kvCap)
	}
	writeGauge(w, "moonlm_kv_cache_usage_ratio", "moonlm_kv_cache_used_tokens / moonlm_kv_cache_capacity_tokens.", math.Round(ratio*1e6)/1e6)
	r := 0.0
	if ready {
		r = 1
	}
	writeGauge(w, "moonlm_ready", "1 once the model is open and the server takes requests.", r)
}
