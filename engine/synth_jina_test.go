package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// The synthetic jina-bert-v2 (jina-embeddings-v2's architecture): the
// synthetic BERT's WordPiece vocabulary, hidden 192 in 6 heads of 32 (so
// ALiBi's slopes take both of ggml's branches: four heads from m0, two
// from m1), ffn 384, 4 layers, no position embeddings, separate Q, K and
// V with biases, and the GeGLU network as current conversions write it:
// ffn_up of 768 rows (the gate's, then the up's) here with a bias over
// both, which llama.cpp applies when present. Weights N(0, 0.08²);
// LayerNorm weights 1 + 0.1·N(0,1), biases 0.02·N(0,1).
//
// No file is committed: the tests generate the Q8_0 file (synthModel) and
// the F32 one, and the references carry each file's SHA-256.
const (
	jinaDim, jinaHeads, jinaFF, jinaLayers, jinaCtx = 192, 6, 384, 4, 512
	jinaSeed                                        = 17
)

// jinaVariant is what a synthetic jina-bert-v2 file adds to or changes in
// the base one.
type jinaVariant struct {
	name string
	// older: the FFN as older conversions wrote it (ffn_gate without a
	// bias, ffn_up of the FFN length with its bias), LayerNorms with
	// biases of the queries (every layer) and keys (all but layer 1),
	// and attn_norm_2 with its bias in layers 0 and 2.
	older bool
	// reranker: a classifier of one output, cls.weight and cls.bias, as
	// jina-reranker-v1's files, after the blocks.
	reranker bool
}

var (
	jinaBase     = jinaVariant{name: "synth-jina-bert-v2"}
	jinaOlder    = jinaVariant{name: "synth-jina-bert-v2-older", older: true}
	jinaReranker = jinaVariant{name: "synth-jina-reranker", reranker: true}
)

// buildSynthJinaBertV2 writes the synthetic jina-bert-v2 in F32 or (q8)
// Q8_0 (block matrices and token embeddings quantized).
func buildSynthJinaBertV2(t testing.TB, q8 bool) []byte { return buildSynthJina(t, q8, jinaBase) }

// buildSynthJinaOlder writes the older conversion's synthetic jina-bert-v2.
func buildSynthJinaOlder(t testing.TB, q8 bool) []byte { return buildSynthJina(t, q8, jinaOlder) }

// buildSynthJinaReranker writes the synthetic jina reranker (the base file
// with a classifier head; cls.weight is quantized in Q8_0).
func buildSynthJinaReranker(t testing.TB, q8 bool) []byte {
	return buildSynthJina(t, q8, jinaReranker)
}

// buildSynthJina writes variant v of the synthetic jina-bert-v2.
func buildSynthJina(t testing.TB, q8 bool, v jinaVariant) []byte {
	t.Helper()
	toks, types := bertVocab(t)
	a := "jina-bert-v2"
	w, set := newEncoderWriter(t, a, v.name, q8, jinaCtx, jinaDim, jinaLayers, jinaFF, jinaHeads, 1e-12)
	if !v.reranker {
		set(a+".pooling_type", uint32(1)) // mean, as jina-embeddings-v2's files
	}
	setWordPieceVocab(set, "jina-v2-en", toks, types)
	if q8 {
		set("general.quantization_version", uint32(2))
	}
	add := synthAdder(t, w, rand.New(rand.NewPCG(jinaSeed, 0x5eed)), q8)
	mat := func(name string, cols, rows int64) { add(name, true, 0.08, 0, cols, rows) }
	normW := func(name string) { add(name, false, 0.1, 1, jinaDim) }
	bias := func(name string, n int64) { add(name, false, 0.02, 0, n) }
	mat("token_embd.weight", jinaDim, int64(len(toks)))
	add("token_types.weight", false, 0.08, 0, jinaDim, 2)
	normW("token_embd_norm.weight")
	bias("token_embd_norm.bias", jinaDim)
	for il := 0; il < jinaLayers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			mat(p+n+".weight", jinaDim, jinaDim)
			bias(p+n+".bias", jinaDim)
		}
		if v.older {
			normW(p + "attn_q_norm.weight")
			bias(p+"attn_q_norm.bias", jinaDim)
			if il != 1 {
				normW(p + "attn_k_norm.weight")
				bias(p+"attn_k_norm.bias", jinaDim)
			}
		}
		normW(p + "attn_output_norm.weight")
		bias(p+"attn_output_norm.bias", jinaDim)
		if v.older && il%2 == 0 {
			normW(p + "attn_norm_2.weight")
			bias(p+"attn_norm_2.bias", jinaDim)
		}
		if v.older {
			mat(p+"ffn_gate.weight", jinaDim, jinaFF)
			mat(p+"ffn_up.weight", jinaDim, jinaFF)
			bias(p+"ffn_up.bias", jinaFF)
		} else {
			mat(p+"ffn_up.weight", jinaDim, 2*jinaFF)
			bias(p+"ffn_up.bias", 2*jinaFF)
		}
		mat(p+"ffn_down.weight", jinaFF, jinaDim)
		bias(p+"ffn_down.bias", jinaDim)
		normW(p + "layer_output_norm.weight")
		bias(p+"layer_output_norm.bias", jinaDim)
	}
	if v.reranker {
		// Scaled so that the scores spread over tanh's range.
		add("cls.weight", true, 0.05, 0, jinaDim, 1)
		bias("cls.bias", 1)
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

func TestWriteSynthJinaBertV2(t *testing.T) {
	writeSynthEncoder(t, "synth-jina-bert-v2", buildSynthJinaBertV2)
}

// The synthetic jina-bert-v2 against llama.cpp's embeddings
// (engine/testdata/synth/synth-jina-bert-v2-*.embed.json): mean, cls,
// last and per-token pooling, with and without L2 normalization. The
// pooled vectors meet embedRuleF32; of the 200 per-token vectors, which
// carry llama.cpp's own noise unaveraged (its GELU reads an f16 table, see
// embedRule; element differences of the unit vectors have a median of
// 1-3e-5 here, as on the synthetic BERT), one has an element 1.7e-4 off,
// so per-token elements are held to 2e-4.
func TestJinaBertV2SynthEmbedF32(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf") // the generator's vocabulary
	m, ref := openSynthEncoder(t, "synth-jina-bert-v2", "f32", buildSynthJinaBertV2, ModelParams{Threads: 2})
	pooled, perToken := *ref, *ref
	pooled.Cases, perToken.Cases = nil, nil
	for _, c := range ref.Cases {
		if c.Pooling == "none" {
			perToken.Cases = append(perToken.Cases, c)
		} else {
			pooled.Cases = append(pooled.Cases, c)
		}
	}
	require.NotEmpty(t, perToken.Cases)
	assert.Empty(t, runEmbedRef(t, m, &pooled, embedRuleF32))
	rule := embedRuleF32
	rule.maxAbs = 2e-4
	assert.Empty(t, runEmbedRef(t, m, &perToken, rule))
}

func TestJinaBertV2SynthEmbedQ8(t *testing.T) {
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp} {
		t.Run(n.String(), func(t *testing.T) {
			if n != NumericsFast && testing.Short() {
				t.Skip("the reference numerics modes' pure-Go products take seconds; not in -short")
			}
			m, ref := openSynthEncoder(t, "synth-jina-bert-v2", "Q8_0", buildSynthJinaBertV2, ModelParams{Threads: 2, Numerics: n})
			assert.Empty(t, runEmbedRef(t, m, ref, embedRuleQ8))
		})
	}
}

// TestJinaBertV2SynthNeedsAlibi runs the F32 file without ALiBi and with
// half its maximum bias: the references must see both.
func TestJinaBertV2SynthNeedsAlibi(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	for _, bias := range []float32{0, 4} {
		t.Run(fmt.Sprint(bias), func(t *testing.T) {
			m, ref := openSynthEncoder(t, "synth-jina-bert-v2", "f32", buildSynthJinaBertV2, ModelParams{Threads: 2})
			m.cfg.AlibiMaxBias = bias
			assert.NotEmpty(t, runEmbedRef(t, m, ref, embedRuleQ8), "ALiBi of maximum bias %v met the references", bias)
		})
	}
}

// The slopes against ggml's formula for 6 heads and a maximum bias of 8:
// n2 = 4, m0 = 2^-2, m1 = 2^-1.
func TestAlibiSlopes(t *testing.T) {
	assert.Equal(t, []float32{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}, alibiSlopes(6, 8))
	s := []float32{1, 1, 1, 1}
	addAlibi(s, 0.5, -2)
	assert.Equal(t, []float32{0, 0.5, 1, 0.5}, s)
}

// TestWriteSynthJinaOlder and TestWriteSynthJinaReranker check the
// variants' F32 files are those their references were made from (with
// -update-synth they write them to build/synth/).
func TestWriteSynthJinaOlder(t *testing.T) {
	writeSynthEncoder(t, jinaOlder.name, buildSynthJinaOlder)
}

func TestWriteSynthJinaReranker(t *testing.T) {
	writeSynthEncoder(t, jinaReranker.name, buildSynthJinaReranker)
}

// The older conversion's synthetic jina-bert-v2 (separate ffn_gate, Q and
// K LayerNorms, attn_norm_2 in some layers) against llama.cpp's
// embeddings (synth-jina-bert-v2-older-*.embed.json), under the base
// file's rules (per-token elements to 2e-4 on F32, as there).
func TestJinaBertV2OlderSynthEmbedF32(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	m, ref := openSynthEncoder(t, jinaOlder.name, "f32", buildSynthJinaOlder, ModelParams{Threads: 2})
	checkEncoderRef(t, m, ref)
}

func TestJinaBertV2OlderSynthEmbedQ8(t *testing.T) {
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp} {
		t.Run(n.String(), func(t *testing.T) {
			if n != NumericsFast && testing.Short() {
				t.Skip("the reference numerics modes' pure-Go products take seconds; not in -short")
			}
			m, ref := openSynthEncoder(t, jinaOlder.name, "Q8_0", buildSynthJinaOlder, ModelParams{Threads: 2, Numerics: n})
			assert.Empty(t, runEmbedRef(t, m, ref, embedRuleQ8))
		})
	}
}

// checkEncoderRef runs ref's cases on m: pooled vectors and rank scores
// under embedRuleF32, per-token vectors with elements to 2e-4.
func checkEncoderRef(t *testing.T, m *Model, ref *embedRef) {
	pooled, perToken := *ref, *ref
	pooled.Cases, perToken.Cases = nil, nil
	for _, c := range ref.Cases {
		if c.Pooling == "none" {
			perToken.Cases = append(perToken.Cases, c)
		} else {
			pooled.Cases = append(pooled.Cases, c)
		}
	}
	assert.Empty(t, runEmbedRef(t, m, &pooled, embedRuleF32))
	if len(perToken.Cases) > 0 {
		rule := embedRuleF32
		rule.maxAbs = 2e-4
		assert.Empty(t, runEmbedRef(t, m, &perToken, rule))
	}
}

// TestJinaBertV2OlderNeedsEachPart drops each optional part of the older
// file in turn (the Q norm's bias, one layer's K norm, one layer's
// attn_norm_2): the file still opens, and the references see the
// difference under the rule the whole file meets (embedRuleF32; the Q
// norm's bias of one layer moves the mean vectors to cosine 0.99998).
func TestJinaBertV2OlderNeedsEachPart(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	ref := readEmbedRef(t, jinaOlder.name+"-f32.embed.json")
	src := filepath.Join(t.TempDir(), jinaOlder.name+"-f32.gguf")
	require.NoError(t, os.WriteFile(src, buildSynthJinaOlder(t, false), 0o644))
	for _, name := range []string{"blk.3.attn_q_norm.bias", "blk.2.attn_k_norm.weight", "blk.2.attn_norm_2.weight"} {
		t.Run(name, func(t *testing.T) {
			path := copyGGUF(t, src, nil, func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
				if ts.Name != name && !(strings.HasSuffix(name, ".weight") && ts.Name == strings.TrimSuffix(name, ".weight")+".bias") {
					add(ts.Name, ts.Type, ts.Shape, ts.Data)
				}
			})
			m, err := Open(path, ModelParams{Threads: 2})
			require.NoError(t, err)
			defer m.Close()
			mean := *ref
			mean.Cases = ref.Cases[:1]
			assert.NotEmpty(t, runEmbedRef(t, m, &mean, embedRuleF32), "without %s the references were met", name)
		})
	}
}

// TestJinaBertV2RefusesUngated: a block with ffn_up of the feed-forward
// length and no ffn_gate (a plain GELU network) is refused, naming it.
func TestJinaBertV2RefusesUngated(t *testing.T) {
	src := synthModel(t, jinaOlder.name+"-Q8_0.gguf")
	path := copyGGUF(t, src, nil, func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
		if !strings.HasSuffix(ts.Name, ".ffn_gate.weight") {
			add(ts.Name, ts.Type, ts.Shape, ts.Data)
		}
	})
	_, err := Open(path, ModelParams{Threads: 1})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "ungated")
}

// The synthetic jina reranker (jina-reranker-v1's head: cls of one
// output, no cls.output) against llama.cpp's rank scores and embeddings
// (synth-jina-reranker-*.embed.json); Rerank gives the same scores.
func TestJinaRerankerSynth(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf")
	for _, typ := range []string{"f32", "Q8_0"} {
		t.Run(typ, func(t *testing.T) {
			m, ref := openSynthEncoder(t, jinaReranker.name, typ, buildSynthJinaReranker, ModelParams{Threads: 2})
			n, err := m.EmbedSize(PoolingRank)
			require.NoError(t, err)
			require.Equal(t, 1, n, "one score")
			rule := embedRuleF32
			if typ == "Q8_0" {
				rule = embedRuleQ8
			}
			assert.Empty(t, runEmbedRef(t, m, ref, rule))
			for _, c := range ref.Cases {
				if c.Pooling != "rank" {
					continue
				}
				var want [][]float32
				require.NoError(t, json.Unmarshal(c.Embeddings, &want))
				for i, pair := range c.Pairs {
					scores, err := m.Rerank(pair[0], []string{pair[1]})
					require.NoError(t, err)
					assert.InDelta(t, want[i][0], scores[0], rule.maxScore, "pair %d", i)
				}
			}
		})
	}
}
