package engine

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
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
	toks, types := bertVocab(t)
	w := gguf.NewWriter()
	set := func(k string, v any) { require.NoError(t, w.Set(k, v)) }
	a := "bert"
	set("general.architecture", a)
	set("general.name", "bench-bge-base")
	set("general.file_type", map[gguf.Type]uint32{gguf.F16: 1, gguf.Q8_0: 7}[typ])
	setEncoderShape(set, a, bgeCtx, bgeDim, bgeLayers, bgeFF, bgeHeads, 1e-12)
	set(a+".pooling_type", uint32(2)) // cls, as bge's files
	setWordPieceVocab(set, "bert-bge", toks, types)
	set("general.quantization_version", uint32(2))
	rng := rand.New(rand.NewPCG(5, 0x5eed))
	vals := func(n int, scale, offset float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(offset + scale*rng.NormFloat64())
		}
		return v
	}
	f32 := func(name string, v []float32, shape ...int64) {
		data := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, shape, data))
	}
	mat := func(name string, cols, rows int) {
		v := vals(cols*rows, 0.04, 0)
		var data []byte
		if typ == gguf.Q8_0 {
			rb := cols / 32 * 34
			data = make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				kernels.QuantizeWeightRow(gguf.Q8_0, v[r*cols:(r+1)*cols], data[r*rb:(r+1)*rb])
			}
		} else {
			data = make([]byte, 2*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint16(data[2*i:], kernels.F32ToF16(x))
			}
		}
		require.NoError(t, w.AddTensor(name, typ, []int64{int64(cols), int64(rows)}, data))
	}
	normW := func(name string) { f32(name, vals(bgeDim, 0.1, 1), bgeDim) }
	bias := func(name string, n int) { f32(name, vals(n, 0.02, 0), int64(n)) }
	mat("token_embd.weight", bgeDim, len(toks))
	f32("token_types.weight", vals(2*bgeDim, 0.04, 0), bgeDim, 2)
	f32("position_embd.weight", vals(bgeCtx*bgeDim, 0.04, 0), bgeDim, bgeCtx)
	normW("token_embd_norm.weight")
	bias("token_embd_norm.bias", bgeDim)
	for il := 0; il < bgeLayers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			mat(p+n+".weight", bgeDim, bgeDim)
			bias(p+n+".bias", bgeDim)
		}
		normW(p + "attn_output_norm.weight")
		bias(p+"attn_output_norm.bias", bgeDim)
		mat(p+"ffn_up.weight", bgeDim, bgeFF)
		bias(p+"ffn_up.bias", bgeFF)
		mat(p+"ffn_down.weight", bgeFF, bgeDim)
		bias(p+"ffn_down.bias", bgeDim)
		normW(p + "layer_output_norm.weight")
		bias(p+"layer_output_norm.bias", bgeDim)
	}
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
