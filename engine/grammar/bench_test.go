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
// (cold caches) each iteration: p50, p99 and max in microseconds, by wall
// clock and by the thread's CPU time (the wall clock also counts the time
// other processes take the CPU on a busy machine).
func BenchmarkMaskJSON(b *testing.B) {
	benchMask(b, JSON(), longJSON(120))
}

// BenchmarkMaskSchema is BenchmarkMaskJSON with a schema's grammar whose
// strings have a maxLength (bounded repetitions).
func BenchmarkMaskSchema(b *testing.B) {
	g, err := CompileJSONSchema([]byte(`{"type":"array","items":{"type":"object","properties":{
		"title":{"type":"string","maxLength":80},
		"body":{"type":"string","minLength":1,"maxLength":400},
		"n":{"type":"integer","minimum":0,"maximum":1000}},"required":["title","body","n"]}}`))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 2))
	words := strings.Fields("the model writes a long answer about café prices in Zürich and 東京 with numbers like 42 and quotes \"here\" and more words to fill the text")
	type item struct {
		Title string `json:"title"`
		Body  string `json:"body"`
		N     int    `json:"n"`
	}
	var items []item
	for i := range 40 {
		var body []string
		for range 20 + rng.IntN(40) {
			body = append(body, words[rng.IntN(len(words))])
		}
		text := strings.Join(body, " ")
		if len(text) > 390 {
			text = text[:390]
		}
		items = append(items, item{strings.Join(body[:5], " "), strings.ToValidUTF8(text, ""), i * 7})
	}
	doc, err := json.Marshal(items)
	if err != nil {
		b.Fatal(err)
	}
	benchMask(b, g, string(doc))
}

func benchMask(b *testing.B, g *Grammar, doc string) {
	for _, name := range []string{"smollm2", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok := openVocab(b, name)
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
				b.Logf("slowest: run %d token %d %q: %v", s.run, s.i, tok.Piece(ids[s.i]), s.d)
			}
		})
	}
}
