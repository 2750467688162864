package engine

import (
	"bufio"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// The embedding benchmark: sentences per second for batches of 32 texts
// of about 64 tokens on a bge-base-shaped encoder (hidden 768, 12 layers,
// 12 heads, ffn 3072, 512 positions) with random weights, at F16 and
// Q8_0. The files and the texts (one a line, for llama.cpp's
// llama-embedding: scripts/bench-embed.sh) are written into build/bench/
// (-embed-bench-dir) on first use and reused after. Run it with
//
//	go test ./engine/ -run '^$' -bench EmbedBgeBase -embed-threads 2
//
// It is a benchmark, not a test: nothing here checks a speed.
var (
	embedThreads  = flag.Int("embed-threads", 2, "threads of BenchmarkEmbedBgeBase")
	embedBenchDir = flag.String("embed-bench-dir", filepath.Join("..", "build", "bench"), "where BenchmarkEmbedBgeBase keeps its files")
)

const (
	bgeDim, bgeHeads, bgeFF, bgeLayers, bgeCtx = 768, 12, 3072, 12, 512
	embedBatchTexts, embedTextWords            = 32, 62 // [CLS] + 62 words + [SEP] = 64 tokens
)

// buildBgeBase writes the bge-base-shaped encoder of type typ (gguf.F16 or
// gguf.Q8_0 for its matrices; vectors and the position and type
// embeddings F32) to path. Its vocabulary is the synthetic BERT's.
func buildBgeBase(t testing.TB, typ gguf.Type, path string) {
	meta := encoderMeta{arch: "bert", name: "bench-bge-base", fileType: map[gguf.Type]uint32{gguf.F16: 1, gguf.Q8_0: 7}[typ],
		ctx: bgeCtx, dim: bgeDim, layers: bgeLayers, ff: bgeFF, head: bgeHeads, pooling: 2} // cls, as bge's files
	w, set, nVocab := newEncoderWriter(t, meta)
	set("general.quantization_version", uint32(2))
	d := encoderDraw{t: t, w: w, rng: rand.New(rand.NewPCG(5, 0x5eed)), matType: typ, matScale: 0.04}
	d.bertTensors(meta, nVocab)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	require.NoError(t, err)
	bw := bufio.NewWriterSize(f, 1<<20)
	_, err = w.WriteTo(bw)
	require.NoError(t, err)
	require.NoError(t, bw.Flush())
	require.NoError(t, f.Close())
	require.NoError(t, os.Rename(tmp, path))
}

// benchEmbedTexts is the benchmark's batch: texts of 62 whole words of
// the vocabulary each (64 tokens with [CLS] and [SEP]).
func benchEmbedTexts(b *testing.B) []string {
	toks, _ := bertVocab(b)
	var words []string
	for _, s := range toks {
		if w, ok := strings.CutPrefix(s, "\u2581"); ok && len(w) > 1 && strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") == "" {
			words = append(words, w)
		}
	}
	require.Greater(b, len(words), 500)
	rng := rand.New(rand.NewPCG(6, 0x5eed))
	texts := make([]string, embedBatchTexts)
	for i := range texts {
		ws := make([]string, embedTextWords)
		for j := range ws {
			ws[j] = words[rng.IntN(len(words))]
		}
		texts[i] = strings.Join(ws, " ")
	}
	return texts
}

func BenchmarkEmbedBgeBase(b *testing.B) {
	dir := *embedBenchDir
	require.NoError(b, os.MkdirAll(dir, 0o755))
	texts := benchEmbedTexts(b)
	require.NoError(b, os.WriteFile(filepath.Join(dir, "embed-texts.txt"), []byte(strings.Join(texts, "\n")+"\n"), 0o644))
	for _, typ := range []gguf.Type{gguf.F16, gguf.Q8_0} {
		b.Run(typ.String(), func(b *testing.B) {
			path := filepath.Join(dir, "bge-base-"+typ.String()+".gguf")
			if _, err := os.Stat(path); err != nil {
				buildBgeBase(b, typ, path)
			}
			m, err := Open(path, ModelParams{Threads: *embedThreads})
			require.NoError(b, err)
			defer m.Close()
			seqs := make([][]int32, len(texts))
			tokens := 0
			for i, s := range texts {
				seqs[i], err = m.Tokenize(s, true, false)
				require.NoError(b, err)
				tokens += len(seqs[i])
			}
			s, err := m.NewSession(SessionParams{NCtx: bgeCtx})
			require.NoError(b, err)
			defer s.Close()
			outs := make([][]float32, len(seqs))
			for i := range outs {
				outs[i] = make([]float32, bgeDim)
			}
			p := EmbedParams{Pooling: PoolingMean, Normalize: true}
			require.NoError(b, s.EmbedBatch(seqs, p, outs)) // warm-up
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := s.EmbedBatch(seqs, p, outs); err != nil {
					b.Fatal(err)
				}
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N*len(seqs))/sec, "sentences/s")
			b.ReportMetric(float64(b.N*tokens)/sec, "tokens/s")
			b.ReportMetric(float64(tokens)/float64(len(seqs)), "tokens/text")
		})
	}
}
