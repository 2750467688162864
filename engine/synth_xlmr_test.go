package engine

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// The synthetic XLM-RoBERTa encoder: bge-m3, multilingual-e5 and
// bge-reranker-v2-m3 as llama.cpp loads them, the bert architecture with
// a SentencePiece Unigram vocabulary ("t5") and its precompiled character
// map, one token type, a LayerNorm epsilon of 1e-5, CLS pooling and a
// reranker's classifier head. Hidden 128, 4 heads of 32, ffn 256, 4
// layers, 512 positions (the converter drops XLM-R's two padding
// positions). Its vocabulary is XLM-R's first 8000 pieces (specials,
// then the most frequent ones, with their scores and types) and <mask>,
// from llama.cpp's models/ggml-vocab-nomic-bert-moe.gguf, so text in
// scripts those pieces miss meets UNK. Weights as the synthetic BERT's.
// That vocabulary is fetched by `make llamacpp-data` (MOONLM_LLAMACPP_DIR);
// without it the tests that need it skip, saying so.
//
// No file is committed: the tests generate the Q8_0 file (synthModel) and
// the F32 one where the vocabulary is at hand, and the references carry
// each file's SHA-256.
const (
	xlmrDim, xlmrHeads, xlmrFF, xlmrLayers, xlmrCtx = 128, 4, 256, 4, 512
	xlmrPieces, xlmrMask                            = 8000, 250001
	xlmrSeed                                        = 13
)

// xlmrVocab is the subset of XLM-R's vocabulary: tokens, scores, types and
// the character map.
func xlmrVocab(t testing.TB) ([]string, []float32, []int32, []byte) {
	// The shared test data's vocab/ folder or llama.cpp's models/
	// (MOONLM_LLAMACPP_DIR, build/llamacpp from `make llamacpp-data`).
	path := shareddata.Path(t, "vocab/ggml-vocab-nomic-bert-moe.gguf")
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	arr := func(key string) gguf.Array {
		v, ok := f.Lookup(key)
		require.True(t, ok, key)
		a, err := v.Array()
		require.NoError(t, err, key)
		return a
	}
	toksA, scoresA, typesA := arr("tokenizer.ggml.tokens"), arr("tokenizer.ggml.scores"), arr("tokenizer.ggml.token_type")
	var toks []string
	var scores []float32
	var types []int32
	for i := 0; i <= xlmrMask; i++ {
		if i == xlmrPieces {
			i = xlmrMask
		}
		s, err := toksA.String(i)
		require.NoError(t, err)
		sc, err := scoresA.Float64(i)
		require.NoError(t, err)
		ty, err := typesA.Int64(i)
		require.NoError(t, err)
		toks, scores, types = append(toks, s), append(scores, float32(sc)), append(types, int32(ty))
	}
	require.Equal(t, "<mask>", toks[len(toks)-1])
	cm := arr("tokenizer.ggml.precompiled_charsmap").Raw()
	require.NotEmpty(t, cm)
	return toks, scores, types, bytes.Clone(cm)
}

// buildSynthXLMR writes the synthetic XLM-R in F32 or (q8) Q8_0 (block
// matrices, token embeddings and the classifier head quantized).
func buildSynthXLMR(t testing.TB, q8 bool) []byte {
	t.Helper()
	toks, scores, types, cm := xlmrVocab(t)
	a := "bert"
	w, set := newEncoderWriter(t, a, "synth-xlmr", q8, xlmrCtx, xlmrDim, xlmrLayers, xlmrFF, xlmrHeads, 1e-5)
	set(a+".pooling_type", uint32(2)) // cls, as bge-m3's files
	set("tokenizer.ggml.model", "t5")
	set("tokenizer.ggml.pre", "default")
	set("tokenizer.ggml.tokens", toks)
	set("tokenizer.ggml.scores", scores)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.add_space_prefix", true)
	set("tokenizer.ggml.token_type_count", uint32(1))
	set("tokenizer.ggml.remove_extra_whitespaces", true)
	set("tokenizer.ggml.precompiled_charsmap", cm)
	set("tokenizer.ggml.bos_token_id", uint32(0))
	set("tokenizer.ggml.eos_token_id", uint32(2))
	set("tokenizer.ggml.unknown_token_id", uint32(3))
	set("tokenizer.ggml.seperator_token_id", uint32(2))
	set("tokenizer.ggml.padding_token_id", uint32(1))
	set("tokenizer.ggml.cls_token_id", uint32(0))
	set("tokenizer.ggml.mask_token_id", uint32(len(toks)-1))
	set("tokenizer.ggml.add_bos_token", true)
	set("tokenizer.ggml.add_eos_token", true)
	if q8 {
		set("general.quantization_version", uint32(2))
	}
	add := synthAdder(t, w, rand.New(rand.NewPCG(xlmrSeed, 0x5eed)), q8)
	addBertTensors(add, bertShape{dim: xlmrDim, ff: xlmrFF, layers: xlmrLayers, ctx: xlmrCtx, vocab: int64(len(toks)), typeRows: 1})
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// TestWriteSynthXLMR checks the generator's F32 file is the one its
// references were made from; with -update-synth it writes it to
// build/synth/ for making references. (The Q8_0 file is
// TestWriteSynthModels'.)
func TestWriteSynthXLMR(t *testing.T) { writeSynthEncoder(t, "synth-xlmr", buildSynthXLMR) }

// writeSynthEncoder checks that build's F32 file NAME-f32.gguf has the
// sha256 its references (NAME-f32.embed.json) carry; with -update-synth it
// writes that file to build/synth/ instead, for making references.
func writeSynthEncoder(t *testing.T, name string, build func(testing.TB, bool) []byte) {
	img := build(t, false)
	if *updateSynth {
		dir := filepath.Join("..", "build", "synth")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-f32.gguf"), img, 0o644))
		t.Logf("wrote %s-f32.gguf, sha256 %s", name, sha256Hex(img))
		return
	}
	ref := readEmbedRef(t, name+"-f32.embed.json")
	require.Equal(t, ref.SHA256, sha256Hex(img), "the generator's %s-f32.gguf is not the file its references were made from", name)
}

// openSynthEncoder opens the synthetic encoder NAME of type typ ("f32",
// generated by build into a temporary folder, or the "Q8_0" file of
// synthModel), checking the file is the one its references
// (NAME-typ.embed.json) were made from.
func openSynthEncoder(t *testing.T, name, typ string, build func(testing.TB, bool) []byte, p ModelParams) (*Model, *embedRef) {
	ref := readEmbedRef(t, name+"-"+typ+".embed.json")
	var path string
	if typ == "f32" {
		path = filepath.Join(t.TempDir(), name+"-f32.gguf")
		require.NoError(t, os.WriteFile(path, build(t, false), 0o644))
	} else {
		path = synthModel(t, name+"-Q8_0.gguf")
	}
	sum, err := fileSHA256(path)
	require.NoError(t, err)
	require.Equal(t, ref.SHA256, sum, "%s is not the file the references were made from", filepath.Base(path))
	m, err := Open(path, p)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m, ref
}

// The synthetic XLM-R against llama.cpp's embeddings and rerank scores
// (engine/testdata/synth/synth-xlmr-*.embed.json): its tokens (Unigram,
// <s> ... </s>, the pairs as <s> query </s> document </s>), every pooling
// with and without L2 normalization, and rank scores.
func TestXLMRSynthEmbedF32(t *testing.T) {
	m, ref := openSynthEncoder(t, "synth-xlmr", "f32", buildSynthXLMR, ModelParams{Threads: 2})
	assert.Empty(t, runEmbedRef(t, m, ref, embedRuleF32))
}

func TestXLMRSynthEmbedQ8(t *testing.T) {
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp} {
		t.Run(n.String(), func(t *testing.T) {
			if n != NumericsFast && testing.Short() {
				t.Skip("the reference numerics modes' pure-Go products take seconds; not in -short")
			}
			m, ref := openSynthEncoder(t, "synth-xlmr", "Q8_0", buildSynthXLMR, ModelParams{Threads: 2, Numerics: n})
			assert.Empty(t, runEmbedRef(t, m, ref, embedRuleQ8))
		})
	}
}
