package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

func init() {
	register(&command{
		name:    "make-bench-model",
		summary: "write a random-weight Llama-3.2-1B-, Qwen3.5-0.8B-, OLMoE-1B-7B- or gpt-oss-20b-shaped benchmark model (--vocab FILE -o OUT [--type q8_0|q4_k_m|mxfp4] [--arch qwen35|olmoe|gpt-oss])",
		run:     runMakeBenchModel,
	})
}

const makeBenchUsage = `usage: moonlm make-bench-model --vocab VOCAB.gguf -o OUT.gguf [--type q8_0|q4_k_m|mxfp4] [--seed S] [-t THREADS]
       [--arch llama|qwen35|olmoe|qwen3moe|gpt-oss] [--dim 2048] [--layers 16] [--heads 32] [--kv-heads 8] [--ffn 8192]
       [--experts 64] [--used 8] [--vocab-size N] [--reuse EARLIER.gguf]

Writes a llama-architecture model with random weights shaped like
Llama-3.2-1B (hidden 2048, 16 layers, 32 query and 8 KV heads, ffn 8192,
tied embeddings, llama3 RoPE scaling) for benchmarks. The tokenizer (every
tokenizer.* key) is copied from VOCAB.gguf, whose vocabulary size sets the
embedding rows; use the Llama 3 vocabulary for the real shape.

--type q4_k_m mixes types as llama.cpp's Q4_K_M does for this shape: Q4_K,
with Q6_K for the tied token_embd and for attn_v and ffn_down of layers
0, 1, 4, 7, 10, 13, 14, 15. Norms and rope_freqs are F32.

--arch qwen35 writes a Qwen3.5 hybrid shaped like Qwen3.5-0.8B instead
(unless the shape flags say otherwise: hidden 1024, 24 layers, every
fourth one full attention with 8 query and 2 KV heads of 256 and RoPE on
64 dimensions, the others gated DeltaNet with 16 key and 16 value heads of
128 and a convolution of 4, ffn 3584, tied embeddings), in q8_0 only; the
convolution's weights, the decay's parameters and the norms are F32.

--arch olmoe writes a mixture of experts shaped like OLMoE-1B-7B instead
(unless the shape flags say otherwise: hidden 2048, 16 layers, 16 query
and 16 KV heads, 64 experts of 1024 of which 8 are used, an untied output
head, 50304 embedding rows, the vocabulary padded with control tokens up
to --vocab-size). Its q4_k_m follows llama.cpp for a model of more than
8 experts: Q4_K, with Q6_K for the output head and for attn_v and
ffn_down_exps of layers 0, 1, 4, 7, 10, 13, 14, 15; the router is F32.
--arch qwen3moe writes the same shape (and, with the same seed, the same
matrices) as a Qwen3-MoE, for engines that lack olmoe (ik_llama.cpp): Q
and K norms per head of 128, the chosen experts' weights renormalized.
--reuse EARLIER.gguf copies the quantized matrices of an earlier file made
with the same seed (same name, type and shape) instead of making them
again, e.g. the olmoe file's for its qwen3moe twin.

--arch gpt-oss writes a mixture of experts shaped like gpt-oss-20b
(unless the shape flags say otherwise: hidden 2880, 24 layers, 64 query
and 8 KV heads of 64, 32 experts of 2880 of which 4 are used, an untied
output head, 201088 embedding rows, the vocabulary padded as for olmoe;
RoPE base 150000 with YaRN 32x, a sliding window of 128 on every other
layer, attention sinks, biases), in mxfp4 only (its default): as
llama-quantize's MXFP4_MOE, the experts MXFP4, every other matrix Q8_0,
the router and the vectors F32. Its hidden and ffn sizes need only be
multiples of 32.
`

// benchShape is a model's hyperparameters.
type benchShape struct {
	Dim, Layers, Heads, KVHeads, FFN int
	// Experts and Used are the experts per layer and per token (olmoe);
	// VocabSize pads the vocabulary to that many tokens when larger.
	Experts, Used, VocabSize int
	// Arch is "llama" (or "") or "qwen35" or "olmoe" or "qwen3moe" or
	// "gpt-oss".
	Arch string
	// Reuse names an earlier file made with the same seed whose quantized
	// matrices of the same name, type and shape are copied instead of
	// drawn and quantized again (minutes for a MoE): the olmoe file's
	// matrices for its qwen3moe twin.
	Reuse string
}

func runMakeBenchModel(args []string) error {
	fs := newFlagSet("make-bench-model")
	var vocab, out, typ string
	var seed uint64
	var threads int
	sh := benchShape{}
	fs.StringVar(&vocab, "vocab", "", "GGUF `file` to copy the tokenizer from")
	fs.StringVar(&out, "o", "", "output `file`")
	fs.StringVar(&typ, "type", "q8_0", "weight `type`: q8_0, q4_k_m or mxfp4 (gpt-oss, its default)")
	fs.Uint64Var(&seed, "seed", 1, "random `seed`")
	fs.IntVar(&threads, "t", runtime.NumCPU(), "`threads`")
	fs.IntVar(&sh.Dim, "dim", 2048, "hidden `size`")
	fs.IntVar(&sh.Layers, "layers", 16, "`layers`")
	fs.IntVar(&sh.Heads, "heads", 32, "query `heads`")
	fs.IntVar(&sh.KVHeads, "kv-heads", 8, "KV `heads`")
	fs.IntVar(&sh.FFN, "ffn", 8192, "feed-forward `size`")
	fs.IntVar(&sh.Experts, "experts", 64, "`experts` per layer (olmoe)")
	fs.IntVar(&sh.Used, "used", 8, "`experts` used per token (olmoe)")
	fs.IntVar(&sh.VocabSize, "vocab-size", 0, "pad the vocabulary to `n` tokens (0: as VOCAB)")
	fs.StringVar(&sh.Reuse, "reuse", "", "copy the matrices of `file` (made with the same seed) that match by name, type and shape")
	fs.StringVar(&sh.Arch, "arch", "llama", "`architecture`: llama, qwen35, olmoe, qwen3moe or gpt-oss")
	if help, err := parseFlags(fs, makeBenchUsage, args); help || err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if sh.Arch == "gpt-oss" && !set["type"] {
		typ = "mxfp4"
	}
	if defaults := map[string]map[string]int{"qwen35": qwen35BenchShape, "olmoe": olmoeBenchShape, "qwen3moe": olmoeBenchShape, "gpt-oss": gptOSSBenchShape}[sh.Arch]; defaults != nil {
		// The shape's sizes where the flags were not given.
		for name, v := range map[string]*int{"dim": &sh.Dim, "layers": &sh.Layers, "heads": &sh.Heads, "kv-heads": &sh.KVHeads,
			"ffn": &sh.FFN, "experts": &sh.Experts, "used": &sh.Used, "vocab-size": &sh.VocabSize} {
			if d, ok := defaults[name]; ok && !set[name] {
				*v = d
			}
		}
	}
	if vocab == "" || out == "" || fs.NArg() > 0 {
		return usageErr(makeBenchUsage, "--vocab and -o are required")
	}
	start := time.Now()
	n, err := makeBenchModel(out, vocab, typ, sh, seed, threads)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s: %.1f MiB in %.1f s\n", out, float64(n)/(1<<20), time.Since(start).Seconds())
	return nil
}

// benchTensorType is the weight type of tensor name in layer il (-1 for
// none) under the file type ftype, following llama.cpp's choices for a
// llama model without an importance matrix.
func benchTensorType(ftype, name string, il, nLayer int) gguf.Type {
	if ftype == "q8_0" {
		return gguf.Q8_0
	}
	// llama.cpp's use_more_bits: the first and last eighth of the layers
	// and every third one between.
	moreBits := il >= 0 && (il < nLayer/8 || il >= 7*nLayer/8 || (il-nLayer/8)%3 == 2)
	switch {
	case name == "token_embd.weight" || name == "output.weight":
		return gguf.Q6_K
	case (strings.HasSuffix(name, ".attn_v.weight") || strings.HasSuffix(name, ".ffn_down.weight")) && moreBits:
		return gguf.Q6_K
	}
	return gguf.Q4_K
}

// benchTensor is one tensor to write: its name, type, shape and, for F32
// tensors, fixed values.
type benchTensor struct {
	name  string
	typ   gguf.Type
	shape []int64
	f32   []float32
	data  []byte
}

// llama3RopeFreqs are the per-pair frequency divisors Llama 3.2 stores in
// rope_freqs.weight (factor 32, low/high frequency factors 1 and 4, original
// context 8192), computed from the published scaling rule.
func llama3RopeFreqs(headDim int, base float64) []float32 {
	const factor, lowFF, highFF, oldCtx = 32.0, 1.0, 4.0, 8192.0
	lowWave, highWave := oldCtx/lowFF, oldCtx/highFF
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(headDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = factor
		default:
			smooth := (oldCtx/wave - lowFF) / (highFF - lowFF)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// makeBenchModel writes the model to out (through a temporary file renamed
// into place, so an interrupted run leaves no partial model) and returns its
// size.
func makeBenchModel(out, vocabPath, ftype string, sh benchShape, seed uint64, threads int) (int64, error) {
	var fileType uint32
	switch ftype {
	case "q8_0":
		fileType = 7 // LLAMA_FTYPE_MOSTLY_Q8_0
	case "q4_k_m":
		fileType = 15 // LLAMA_FTYPE_MOSTLY_Q4_K_M
	case "mxfp4":
		fileType = 38 // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
	default:
		return 0, fmt.Errorf("make-bench-model: --type %q: want q8_0, q4_k_m or mxfp4", ftype)
	}
	if (ftype == "mxfp4") != (sh.Arch == "gpt-oss") {
		return 0, fmt.Errorf("make-bench-model: --arch gpt-oss is written in mxfp4, and mxfp4 is for gpt-oss only")
	}
	switch sh.Arch {
	case "", "llama":
	case "olmoe", "qwen3moe", "gpt-oss":
		if sh.Experts <= 0 || sh.Used <= 0 || sh.Used > sh.Experts || sh.Experts > 1024 {
			return 0, fmt.Errorf("make-bench-model: --arch %s: %d of %d experts: want 1 <= used <= experts <= 1024", sh.Arch, sh.Used, sh.Experts)
		}
	case "qwen35":
		if ftype != "q8_0" {
			return 0, fmt.Errorf("make-bench-model: --arch qwen35 is written in q8_0 only")
		}
	default:
		return 0, fmt.Errorf("make-bench-model: --arch %q: want llama, qwen35, olmoe, qwen3moe or gpt-oss", sh.Arch)
	}
	// The K-quants' rows are 256 values; gpt-oss's types (MXFP4, Q8_0)
	// take 32, and its heads are of 64 whatever the hidden size.
	mult := 256
	if sh.Arch == "gpt-oss" {
		mult = 32
	}
	if sh.Dim <= 0 || sh.Layers <= 0 || sh.Heads <= 0 || sh.KVHeads <= 0 || sh.FFN <= 0 ||
		sh.Heads%sh.KVHeads != 0 || sh.Dim%mult != 0 || sh.FFN%mult != 0 ||
		(sh.Arch != "qwen35" && sh.Arch != "gpt-oss" && sh.Dim%sh.Heads != 0) {
		return 0, fmt.Errorf("make-bench-model: shape %+v: sizes must be positive, heads divide the hidden size (but for qwen35 and gpt-oss), KV heads the heads, and hidden and ffn sizes be multiples of %d", sh, mult)
	}
	threads = max(threads, 1)
	vf, err := gguf.Open(vocabPath)
	if err != nil {
		return 0, fmt.Errorf("make-bench-model: vocabulary: %w", err)
	}
	defer vf.Close()
	tokens, ok := vf.Lookup("tokenizer.ggml.tokens")
	if !ok {
		return 0, fmt.Errorf("make-bench-model: %s has no tokenizer.ggml.tokens", vocabPath)
	}
	arr, err := tokens.Array()
	if err != nil {
		return 0, fmt.Errorf("make-bench-model: %s: tokenizer.ggml.tokens: %w", vocabPath, err)
	}
	nTok := arr.Len()
	nVocab := nTok
	if sh.VocabSize > nTok {
		if sh.VocabSize > 1<<22 {
			return 0, fmt.Errorf("make-bench-model: --vocab-size %d is too large", sh.VocabSize)
		}
		nVocab = sh.VocabSize
	}

	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err == nil {
			if e := w.Set(k, v); e != nil {
				err = fmt.Errorf("make-bench-model: key %s: %w", k, e)
			}
		}
	}
	keys, ts := llamaBench(sh, ftype, nVocab)
	switch sh.Arch {
	case "qwen35":
		keys, ts = qwen35Bench(sh, nVocab)
	case "olmoe", "qwen3moe":
		keys, ts = olmoeBench(sh, ftype, nVocab, seed, sh.Arch)
	case "gpt-oss":
		keys, ts = gptOSSBench(sh, nVocab, seed)
	}
	set("general.architecture", keys[0].v)
	set("general.name", fmt.Sprintf("moonlm bench %s-shaped random %s", keys[1].v, strings.ToUpper(ftype)))
	set("general.file_type", fileType)
	for _, kv := range keys[2:] {
		set(kv.k, kv.v)
	}
	for _, k := range vf.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := vf.Lookup(k)
			pv, perr := padVocabValue(v, nTok, nVocab)
			if perr != nil {
				return 0, fmt.Errorf("make-bench-model: %s: %w", k, perr)
			}
			set(k, pv)
		}
	}
	if err != nil {
		return 0, err
	}

	var reuse *gguf.File
	if sh.Reuse != "" {
		if reuse, err = gguf.Open(sh.Reuse); err != nil {
			return 0, fmt.Errorf("make-bench-model: --reuse: %w", err)
		}
		defer reuse.Close()
	}
	for ti, t := range ts {
		if r, ok := reuseTensor(reuse, t); ok {
			t.data = r
		} else if t.f32 != nil {
			t.data = make([]byte, 4*len(t.f32))
			for i, v := range t.f32 {
				putF32(t.data[4*i:], v)
			}
		} else {
			rows := 1 // a 3-D tensor is quantized as one matrix of all its experts' rows
			for _, n := range t.shape[1:] {
				rows *= int(n)
			}
			t.data = quantizeRandomMatrix(t.typ, int(t.shape[0]), rows, seed, uint64(ti), threads)
		}
		if err := w.AddTensor(t.name, t.typ, t.shape, t.data); err != nil {
			return 0, fmt.Errorf("make-bench-model: %w", err)
		}
	}

	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, fmt.Errorf("make-bench-model: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".part*")
	if err != nil {
		return 0, fmt.Errorf("make-bench-model: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	n, err := w.WriteTo(tmp)
	if err == nil {
		err = tmp.Chmod(0o644) // CreateTemp makes it private
	}
	if err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return 0, fmt.Errorf("make-bench-model: write %s: %w", out, err)
	}
	return n, nil
}

// reuseTensor returns the data of f's tensor of t's name when it is a
// quantized matrix of t's type and shape (nil f: none).
func reuseTensor(f *gguf.File, t *benchTensor) ([]byte, bool) {
	if f == nil || t.f32 != nil {
		return nil, false
	}
	r, ok := f.Tensor(t.name)
	if !ok || r.Type != t.typ || !slices.Equal(r.Shape, t.shape) {
		return nil, false
	}
	return r.Data, true
}

// benchKey is one metadata key and its value.
type benchKey struct {
	k string
	v any
}

// llamaBench is the Llama-3.2-1B-shaped model's keys (the architecture and
// the shape's name first) and tensors, in the order llama.cpp's converter
// writes them.
func llamaBench(sh benchShape, ftype string, nVocab int) ([]benchKey, []*benchTensor) {
	headDim := sh.Dim / sh.Heads
	const ropeBase = 500000.0
	keys := []benchKey{
		{"general.architecture", "llama"}, {"", "Llama-3.2-1B"},
		{"llama.context_length", uint32(131072)},
		{"llama.embedding_length", uint32(sh.Dim)},
		{"llama.block_count", uint32(sh.Layers)},
		{"llama.feed_forward_length", uint32(sh.FFN)},
		{"llama.attention.head_count", uint32(sh.Heads)},
		{"llama.attention.head_count_kv", uint32(sh.KVHeads)},
		{"llama.rope.freq_base", float32(ropeBase)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.attention.key_length", uint32(headDim)},
		{"llama.attention.value_length", uint32(headDim)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.vocab_size", uint32(nVocab)},
	}
	qDim, kvDim := sh.Heads*headDim, sh.KVHeads*headDim
	mat := func(name string, il int, cols, rows int) *benchTensor {
		return &benchTensor{name: name, typ: benchTensorType(ftype, name, il, sh.Layers), shape: []int64{int64(cols), int64(rows)}}
	}
	ts := []*benchTensor{
		mat("token_embd.weight", -1, sh.Dim, nVocab),
		{name: "rope_freqs.weight", typ: gguf.F32, shape: []int64{int64(headDim / 2)}, f32: llama3RopeFreqs(headDim, ropeBase)},
	}
	for il := 0; il < sh.Layers; il++ {
		p := "blk." + strconv.Itoa(il) + "."
		ts = append(ts,
			benchVector(p+"attn_norm.weight", sh.Dim, 1),
			mat(p+"attn_q.weight", il, sh.Dim, qDim),
			mat(p+"attn_k.weight", il, sh.Dim, kvDim),
			mat(p+"attn_v.weight", il, sh.Dim, kvDim),
			mat(p+"attn_output.weight", il, qDim, sh.Dim),
			benchVector(p+"ffn_norm.weight", sh.Dim, 1),
			mat(p+"ffn_gate.weight", il, sh.Dim, sh.FFN),
			mat(p+"ffn_up.weight", il, sh.Dim, sh.FFN),
			mat(p+"ffn_down.weight", il, sh.FFN, sh.Dim),
		)
	}
	return keys, append(ts, benchVector("output_norm.weight", sh.Dim, 1))
}

// benchVector is an F32 vector of n values v.
func benchVector(name string, n int, v float32) *benchTensor {
	f := make([]float32, n)
	for i := range f {
		f[i] = v
	}
	return &benchTensor{name: name, typ: gguf.F32, shape: []int64{int64(n)}, f32: f}
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// benchRowsPerChunk is the unit of work and of seeding: a chunk's weights
// depend only on (seed, tensor, chunk), so the file is the same whatever
// the thread count.
const benchRowsPerChunk = 64

// quantizeRandomMatrix makes rows x cols weights drawn from N(0, 0.02^2)
// (the usual initialization scale) and quantizes them to typ with ggml's
// reference quantizers, chunks of rows in parallel.
func quantizeRandomMatrix(typ gguf.Type, cols, rows int, seed, tensor uint64, threads int) []byte {
	rowBytes := kernels.RowBytes(typ, cols)
	data := make([]byte, rowBytes*rows)
	nChunks := (rows + benchRowsPerChunk - 1) / benchRowsPerChunk
	var next sync.Mutex
	chunk := 0
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			row := make([]float32, cols)
			for {
				next.Lock()
				c := chunk
				chunk++
				next.Unlock()
				if c >= nChunks {
					return
				}
				rng := rand.New(rand.NewPCG(seed, tensor<<32|uint64(c)))
				for r := c * benchRowsPerChunk; r < min(rows, (c+1)*benchRowsPerChunk); r++ {
					for i := range row {
						row[i] = float32(rng.NormFloat64() * 0.02)
					}
					kernels.QuantizeWeightRow(typ, row, data[r*rowBytes:(r+1)*rowBytes])
				}
			}
		}()
	}
	wg.Wait()
	return data
}
