package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// longJSON is a deterministic document of about n objects mixing the
// shapes a model writes: nested objects and arrays, numbers, booleans,
// escapes and non-ASCII text, indented as json.MarshalIndent does.
func longJSON(n int) string {
	rng := rand.New(rand.NewPCG(1, 1))
	words := []string{"alpha", "beta", "gamma", "delta", "café", "東京", "naïve", "quote\"d", "back\\slash", "tab\there", "emoji 😀", "line\nbreak", "Zürich", "データ"}
	var items []any
	for i := range n {
		w := func() string { return words[rng.IntN(len(words))] }
		item := map[string]any{
			"id":      i,
			"name":    w() + " " + w(),
			"score":   float64(rng.IntN(100000)) / 100,
			"active":  rng.IntN(2) == 0,
			"tags":    []string{w(), w(), w()},
			"owner":   map[string]any{"name": w(), "email": fmt.Sprintf("user%d@example.com", rng.IntN(1000)), "level": rng.IntN(10)},
			"history": []any{map[string]any{"t": 1700000000 + rng.IntN(1e6), "v": rng.NormFloat64()}, nil},
			"note":    strings.Repeat(w()+" ", 1+rng.IntN(6)),
		}
		items = append(items, item)
	}
	b, err := json.MarshalIndent(map[string]any{"items": items, "count": n}, "", "  ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// BenchmarkMaskJSON reports, per token of a long JSON document, the time
// of Mask plus Accept with the built-in JSON grammar, from a fresh matcher
// (cold caches) each iteration: p50, p99 and max in microseconds.
func BenchmarkMaskJSON(b *testing.B) {
	for _, name := range []string{"smollm2", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok := openVocab(b, name)
			doc := longJSON(120)
			ids, err := tok.Encode(doc, false, false)
			if err != nil {
				b.Fatal(err)
			}
			var back []byte
			for _, id := range ids {
				back = append(back, tok.Piece(id)...)
			}
			if string(back) != doc {
				b.Fatal("the document does not round-trip through the tokenizer")
			}
			g := JSON()
			if _, err := NewMatcher(g, tok); err != nil { // builds the shared trie
				b.Fatal(err)
			}
			logits := make([]float32, tok.VocabSize())
			var times, cpu []time.Duration
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			type slow struct {
				d   time.Duration
				i   int
				run int
			}
			var slowest []slow
			run := 0
			b.ResetTimer()
			for b.Loop() {
				run++
				m, err := NewMatcher(g, tok)
				if err != nil {
					b.Fatal(err)
				}
				for i, id := range ids {
					t0, c0 := time.Now(), threadCPU()
					m.Mask(logits)
					if err := m.Accept(id); err != nil {
						b.Fatalf("token %d %q: %v", i, tok.Piece(id), err)
					}
					dc := threadCPU() - c0
					times = append(times, time.Since(t0))
					cpu = append(cpu, dc)
					slowest = append(slowest, slow{dc, i, run})
					if len(slowest) > 64 {
						slices.SortFunc(slowest, func(a, b slow) int { return int(b.d - a.d) })
						slowest = slowest[:8]
					}
				}
				if !m.CanEnd() {
					b.Fatal("document incomplete for the grammar")
				}
			}
			b.StopTimer()
			pct := func(d []time.Duration, p float64) float64 {
				s := slices.Clone(d)
				slices.Sort(s)
				return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds())
			}
			b.ReportMetric(float64(len(ids)), "tokens/doc")
			b.ReportMetric(pct(times, 0.50), "p50-wall-µs")
			b.ReportMetric(pct(times, 0.99), "p99-wall-µs")
			b.ReportMetric(pct(cpu, 0.50), "p50-cpu-µs")
			b.ReportMetric(pct(cpu, 0.99), "p99-cpu-µs")
			b.ReportMetric(pct(cpu, 1), "max-cpu-µs")
			slices.SortFunc(slowest, func(a, b slow) int { return int(b.d - a.d) })
			for _, s := range slowest[:min(5, len(slowest))] {
				b.Logf("slow: run %d token %d %q after %q: %v", s.run, s.i, tok.Piece(ids[s.i]), doc[max(0, len(back[:0])):0], s.d)
			}
		})
	}
}
