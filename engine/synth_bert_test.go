package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// The synthetic BERT encoder: hidden 256, 4 heads of 64, ffn 512, 4
// layers, 512 positions, with a reranker's classifier head (cls and
// cls.output, one label) so that one file tests every pooling. Its
// vocabulary is a subset of the shared bge WordPiece vocabulary (the
// special tokens at their usual ids, the first 2000 whole-word tokens and
// every single-character continuation piece), so any ASCII text tokenizes
// without [UNK]. Weights N(0, 0.08²); LayerNorm weights 1 + 0.1·N(0,1),
// biases 0.02·N(0,1).
//
// No file is committed: the tests generate the Q8_0 file (synthModel,
// which checks its sha256) and the F32 one (11 MB) where they need it, and
// the references carry each file's SHA-256, so they are known to be of
// this very file.
const (
	bertDim, bertHeads, bertFF, bertLayers, bertCtx = 256, 4, 512, 4, 512
	bertSeed                                        = 7
)

// bertVocab is the subset of the bge vocabulary: tokens and their types.
func bertVocab(t testing.TB) ([]string, []int32) {
	f, err := gguf.Open(shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf"))
	require.NoError(t, err)
	defer f.Close()
	v, ok := f.Lookup("tokenizer.ggml.tokens")
	require.True(t, ok)
	arr, err := v.Array()
	require.NoError(t, err)
	tv, ok := f.Lookup("tokenizer.ggml.token_type")
	require.True(t, ok)
	tarr, err := tv.Array()
	require.NoError(t, err)
	var toks []string
	var types []int32
	for i := 0; i < arr.Len(); i++ {
		s, err := arr.String(i)
		require.NoError(t, err)
		tyv, err := tarr.Index(i)
		require.NoError(t, err)
		ty, err := tyv.Int64()
		require.NoError(t, err)
		// Specials at 0..103 keep their ids ([PAD], [UNK], [CLS], [SEP],
		// [MASK] and unused slots); then whole words and single-character
		// continuations.
		cont := !strings.HasPrefix(s, "\u2581") && len([]rune(s)) == 1
		if i <= 103 || (i >= 999 && i < 2999) || (i >= 2999 && cont) {
			toks = append(toks, s)
			types = append(types, int32(ty))
		}
	}
	require.Greater(t, len(toks), 2000)
	return toks, types
}

// buildSynthBert writes the synthetic BERT in F32 or (q8) Q8_0 (block
// matrices, token embeddings and the classifier head quantized; position
// and token-type embeddings and vectors F32).
func buildSynthBert(t testing.TB, q8 bool) []byte {
	t.Helper()
	toks, types := bertVocab(t)
	a := "bert"
	w, set := newEncoderWriter(t, a, "synth-bert", q8, bertCtx, bertDim, bertLayers, bertFF, bertHeads, 1e-12)
	set(a+".pooling_type", uint32(1)) // mean, as bge-small's files
	setWordPieceVocab(set, "bert-bge", toks, types)
	if q8 {
		set("general.quantization_version", uint32(2))
	}
	add := synthAdder(t, w, rand.New(rand.NewPCG(bertSeed, 0x5eed)), q8)
	addBertTensors(add, bertShape{dim: bertDim, ff: bertFF, layers: bertLayers, ctx: bertCtx, vocab: int64(len(toks)), typeRows: 2})
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// newEncoderWriter starts a synthetic encoder's file: the writer and its
// key setter, with the architecture a, the name, the file type (F32 or
// (q8) Q8_0) and the shape keys set, in the order the synthetic encoders
// write them.
func newEncoderWriter(t testing.TB, a, name string, q8 bool, ctx, dim, layers, ff, heads int, eps float32) (*gguf.Writer, func(string, any)) {
	w := gguf.NewWriter()
	set := func(k string, v any) { require.NoError(t, w.Set(k, v)) }
	set("general.architecture", a)
	set("general.name", name)
	set("general.file_type", map[bool]uint32{false: 0, true: 7}[q8])
	setEncoderShape(set, a, ctx, dim, layers, ff, heads, eps)
	return w, set
}

// setEncoderShape sets an encoder's shape keys under arch a (non-causal).
func setEncoderShape(set func(string, any), a string, ctx, dim, layers, ff, heads int, eps float32) {
	set(a+".context_length", uint32(ctx))
	set(a+".embedding_length", uint32(dim))
	set(a+".block_count", uint32(layers))
	set(a+".feed_forward_length", uint32(ff))
	set(a+".attention.head_count", uint32(heads))
	set(a+".attention.layer_norm_epsilon", eps)
	set(a+".attention.causal", false)
}

// setWordPieceVocab sets the tokenizer keys of bertVocab's subset of the
// bge WordPiece vocabulary, with pre-tokenizer name pre.
func setWordPieceVocab(set func(string, any), pre string, toks []string, types []int32) {
	set("tokenizer.ggml.model", "bert")
	set("tokenizer.ggml.pre", pre)
	set("tokenizer.ggml.tokens", toks)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.token_type_count", uint32(2))
	set("tokenizer.ggml.unknown_token_id", uint32(100))
	set("tokenizer.ggml.seperator_token_id", uint32(102))
	set("tokenizer.ggml.padding_token_id", uint32(0))
	set("tokenizer.ggml.cls_token_id", uint32(101))
	set("tokenizer.ggml.mask_token_id", uint32(103))
	set("tokenizer.ggml.bos_token_id", uint32(101))
}

// synthAdder returns a function adding a tensor of the given shape (cols,
// rows) with values offset + scale·N(0,1) drawn from rng, Q8_0 when q8
// and quant, else F32.
func synthAdder(t testing.TB, w *gguf.Writer, rng *rand.Rand, q8 bool) func(name string, quant bool, scale, offset float64, shape ...int64) {
	return func(name string, quant bool, scale, offset float64, shape ...int64) {
		n := int(shape[0])
		rows := 1
		if len(shape) == 2 {
			rows = int(shape[1])
		}
		vals := make([]float32, n*rows)
		for i := range vals {
			vals[i] = float32(offset + scale*rng.NormFloat64())
		}
		typ := gguf.F32
		if q8 && quant {
			typ = gguf.Q8_0
		}
		addSynthTensor(t, w, name, typ, shape, vals)
	}
}

// bertShape is the shape of a synthetic encoder of the bert family.
type bertShape struct{ dim, ff, layers, ctx, vocab, typeRows int64 }

// addBertTensors adds a bert encoder's tensors through add, in the
// synthetic BERT's order: embeddings (token-type ones with typeRows rows),
// blocks with biased projections, and a reranker's classifier head of
// one label. Weights N(0, 0.08²); LayerNorm weights 1 + 0.1·N(0,1),
// biases 0.02·N(0,1).
func addBertTensors(add func(name string, quant bool, scale, offset float64, shape ...int64), s bertShape) {
	mat := func(name string, cols, rows int64) { add(name, true, 0.08, 0, cols, rows) }
	normW := func(name string) { add(name, false, 0.1, 1, s.dim) }
	bias := func(name string, n int64) { add(name, false, 0.02, 0, n) }
	mat("token_embd.weight", s.dim, s.vocab)
	add("token_types.weight", false, 0.08, 0, s.dim, s.typeRows)
	add("position_embd.weight", false, 0.08, 0, s.dim, s.ctx)
	normW("token_embd_norm.weight")
	bias("token_embd_norm.bias", s.dim)
	for il := 0; il < int(s.layers); il++ {
		p := fmt.Sprintf("blk.%d.", il)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			mat(p+n+".weight", s.dim, s.dim)
			bias(p+n+".bias", s.dim)
		}
		normW(p + "attn_output_norm.weight")
		bias(p+"attn_output_norm.bias", s.dim)
		mat(p+"ffn_up.weight", s.dim, s.ff)
		bias(p+"ffn_up.bias", s.ff)
		mat(p+"ffn_down.weight", s.ff, s.dim)
		bias(p+"ffn_down.bias", s.dim)
		normW(p + "layer_output_norm.weight")
		bias(p+"layer_output_norm.bias", s.dim)
	}
	mat("cls.weight", s.dim, s.dim)
	bias("cls.bias", s.dim)
	mat("cls.output.weight", s.dim, 1)
	bias("cls.output.bias", 1)
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// synthBertPath is the synthetic BERT file of the given type ("f32" or
// "Q8_0"): the generated Q8_0 file, or the F32 one written into dir.
func synthBertPath(t *testing.T, typ, dir string) string {
	if typ == "Q8_0" {
		return synthModel(t, "synth-bert-Q8_0.gguf")
	}
	p := filepath.Join(dir, "synth-bert-f32.gguf")
	require.NoError(t, os.WriteFile(p, buildSynthBert(t, false), 0o644))
	return p
}

// TestWriteSynthBert checks the generator's F32 BERT is the file its
// references were made from; with -update-synth it writes it to
// build/synth/ for making references (writeSynthEncoder).
func TestWriteSynthBert(t *testing.T) { writeSynthEncoder(t, "synth-bert", buildSynthBert) }

// rerankTemplate is the synthetic Qwen3 reranker's prompt template
// (tokenizer.chat_template.rerank), one line as the reference tool reads
// prompts.
const rerankTemplate = "query: {query} document: {document} relevant:"

// buildSynthQwen3Reranker is the shared synthetic qwen3 (F32) made a
// reranker as Qwen3-Reranker's files are: a cls.output head of two
// labels ("yes", "no"; rows N(0, 0.08²)) and a rerank prompt template.
func buildSynthQwen3Reranker(t *testing.T) []byte {
	t.Helper()
	f, err := gguf.Open(shareddata.Path(t, "synth/synth-qwen3-f32.gguf"))
	require.NoError(t, err)
	defer f.Close()
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	require.NoError(t, w.Set("general.name", "synth-qwen3-reranker"))
	require.NoError(t, w.Set("qwen3.classifier.output_labels", []string{"yes", "no"}))
	require.NoError(t, w.Set("tokenizer.chat_template.rerank", rerankTemplate))
	for _, ts := range f.Tensors() {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Shape, ts.Data))
	}
	rng := rand.New(rand.NewPCG(8, 0x5eed))
	data := make([]byte, 4*256*2)
	for i := 0; i < 256*2; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(0.08*rng.NormFloat64())))
	}
	require.NoError(t, w.AddTensor("cls.output.weight", gguf.F32, []int64{256, 2}, data))
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// TestWriteSynthQwen3Reranker writes the reranker to build/synth/ with
// -update-synth (for making references); the tests build it themselves.
func TestWriteSynthQwen3Reranker(t *testing.T) {
	img := buildSynthQwen3Reranker(t)
	if *updateSynth {
		dir := filepath.Join("..", "build", "synth")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "synth-qwen3-reranker-f32.gguf"), img, 0o644))
	}
}
