package tokenizer

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// benchText is the test cases of a vocabulary joined: a mix of prose, code,
// whitespace runs, numbers, emoji and several scripts.
func benchText(tb testing.TB, name string) string {
	var sb strings.Builder
	for _, c := range readCases(tb, name) {
		sb.WriteString(c.text)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// Building the 150k-token Qwen3 tokenizer (vocabulary, 151k merges, pieces)
// from an open file must be fast: it happens at every model load.
func TestBuildSpeedQwen3(t *testing.T) {
	path := shareddata.Path(t, "vocab/ggml-vocab-qwen3.gguf")
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	// The machine may be shared: take the best of a few runs, timing both
	// the wall clock and the CPU the process used (GC included).
	best, bestCPU := time.Hour, time.Hour
	for i := 0; i < 5; i++ {
		c0 := cpuTime()
		start := time.Now()
		_, err := FromGGUF(f)
		require.NoError(t, err)
		best = min(best, time.Since(start))
		bestCPU = min(bestCPU, cpuTime()-c0)
	}
	if !haveCPUTime {
		bestCPU = best
	}
	t.Logf("qwen3 tokenizer built in %v (CPU %v)", best, bestCPU)
	if testing.Short() || raceEnabled {
		return
	}
	require.Less(t, min(best, bestCPU), 100*time.Millisecond)
}

func BenchmarkBuild(b *testing.B) {
	for _, name := range []string{"llama-spm", "qwen3", "llama3"} {
		b.Run(name, func(b *testing.B) {
			f, err := gguf.Open(shareddata.Path(b, "vocab/ggml-vocab-"+name+".gguf"))
			require.NoError(b, err)
			defer f.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := FromGGUF(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncode reports tokens/s over the joined test cases.
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"llama-spm", "gpt-2", "qwen3", "llama3", "deepseek-llm", "bert-bge"} {
		b.Run(name, func(b *testing.B) {
			tok := openTokenizer(b, "vocab/ggml-vocab-"+name+".gguf")
			text := benchText(b, name)
			ids, err := tok.Encode(text, false, false)
			require.NoError(b, err)
			dst := make([]int32, 0, 2*len(ids))
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				dst, _ = tok.AppendEncode(dst[:0], text, false, false)
			}
			b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := openTokenizer(b, "vocab/ggml-vocab-qwen3.gguf")
	ids, err := tok.Encode(benchText(b, "qwen3"), false, false)
	require.NoError(b, err)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = tok.AppendDecode(buf[:0], ids)
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
