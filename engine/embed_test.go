package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// The synthetic BERT (synth_bert_test.go) against llama.cpp's embeddings
// (engine/testdata/synth/synth-bert-*.embed.json, made as
// engine/testdata/README.md says): every pooling, with and without L2
// normalization, and rank scores. F32: cosine similarity >= 0.99999 and
// every element within 1e-4; Q8_0: cosine >= 0.999.

type embedRef struct {
	Model  string `json:"model"`
	SHA256 string `json:"sha256"`
	Cases  []struct {
		Pooling    string          `json:"pooling"`
		Normalize  int             `json:"normalize"`
		Texts      []string        `json:"texts"`
		Pairs      [][2]string     `json:"pairs"`
		Tokens     [][]int32       `json:"tokens"`
		Embeddings json.RawMessage `json:"embeddings"`
	} `json:"cases"`
}

func readEmbedRef(t *testing.T, name string) *embedRef {
	b, err := os.ReadFile(synthRefPath(name))
	require.NoError(t, err)
	var r embedRef
	require.NoError(t, json.Unmarshal(b, &r))
	require.NotEmpty(t, r.Cases)
	return &r
}

// embedRule is a tolerance: the least cosine similarity and, when > 0, the
// largest element difference of the two vectors scaled to unit length.
// The element rule is on unit vectors because llama.cpp's own results move
// by more than 1e-4 on raw ones: its GELU looks its input up in an f16
// table, so a change of summation order (one text decoded alone or in a
// batch with others) flips table entries, and the raw CLS vectors of the
// synthetic BERT (norm ~16) move by up to 6e-4 between llama.cpp's own two
// runs. Scores (one value) are held to maxScore: on Q8_0 the classifier
// head quantizes its input to q8_0 twice, and a first-token state that
// llama.cpp itself moves to cosine 0.99992 (one pair, decoded alone or
// batched) moves the score by 0.005 there and by 0.027 against ours.
type embedRule struct {
	minCos, maxAbs, maxScore float64
}

var (
	embedRuleF32 = embedRule{minCos: 0.99999, maxAbs: 1e-4, maxScore: 1e-3}
	embedRuleQ8  = embedRule{minCos: 0.999, maxScore: 3e-2}
)

// cosine is the cosine similarity of a and b.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// check reports how got misses want under the rule ("" when it meets it).
func (r embedRule) check(got, want []float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	if len(got) == 1 {
		if d := math.Abs(float64(got[0] - want[0])); !(d <= r.maxScore) {
			return fmt.Sprintf("score %g, want %g", got[0], want[0])
		}
		return ""
	}
	var dot, ng, nw float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		dot += g * w
		ng += g * g
		nw += w * w
	}
	ng, nw = math.Sqrt(ng), math.Sqrt(nw)
	cos := dot / (ng * nw)
	if !(cos >= r.minCos) {
		return fmt.Sprintf("cosine %.7f < %g", cos, r.minCos)
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i])/ng-float64(want[i])/nw))
	}
	if r.maxAbs > 0 && worst > r.maxAbs {
		return fmt.Sprintf("element difference %.2g > %g", worst, r.maxAbs)
	}
	return ""
}

func TestEmbedRuleDiscriminates(t *testing.T) {
	a := []float32{0.6, 0.8, 0}
	// The rule is on unit vectors: a scaled copy meets it.
	assert.Empty(t, embedRuleF32.check(a, []float32{6, 8, 0}))
	assert.Empty(t, embedRuleF32.check(a, []float32{0.6, 0.8, 0.0001}))
	assert.Contains(t, embedRuleF32.check(a, []float32{0.6, 0.8, 0.0003}), "element difference")
	assert.Contains(t, embedRuleF32.check(a, []float32{0.6, 0.8, 0.01}), "cosine")
	assert.Empty(t, embedRuleQ8.check(a, []float32{0.6, 0.8, 0.02}))
	assert.Contains(t, embedRuleQ8.check(a, []float32{0.6, 0.8, 0.1}), "cosine")
	assert.Empty(t, embedRuleF32.check([]float32{1}, []float32{1.0005}))
	assert.Contains(t, embedRuleF32.check([]float32{1}, []float32{1.002}), "score")
}

// runEmbedRef embeds every case of ref with m and returns, per case, what
// missed the rule (empty when all met it).
func runEmbedRef(t *testing.T, m *Model, ref *embedRef, rule embedRule) []string {
	var misses []string
	worst := 1.0
	defer func() { t.Logf("least cosine similarity of a pooled vector: %.7f", worst) }()
	for _, c := range ref.Cases {
		pooling, err := ParsePooling(c.Pooling)
		require.NoError(t, err)
		p := EmbedParams{Pooling: pooling, Normalize: c.Normalize == 2}
		// Our tokens for the texts (or pairs) must be llama.cpp's.
		seqs := make([][]int32, len(c.Tokens))
		for i := range c.Tokens {
			var ids []int32
			if pooling == PoolingRank {
				ids, err = m.RerankTokens(c.Pairs[i][0], c.Pairs[i][1])
			} else {
				ids, err = m.Tokenize(c.Texts[i], true, false)
			}
			require.NoError(t, err)
			require.Equal(t, c.Tokens[i], ids, "tokens of case %s text %d", c.Pooling, i)
			seqs[i] = ids
		}
		got, err := m.EmbedTokens(seqs, p)
		require.NoError(t, err, "pooling %s", c.Pooling)
		var want [][]float32
		if pooling == PoolingNone {
			var rows [][][]float32
			require.NoError(t, json.Unmarshal(c.Embeddings, &rows))
			for _, r := range rows {
				var flat []float32
				for _, row := range r {
					flat = append(flat, row...)
				}
				want = append(want, flat)
			}
		} else {
			require.NoError(t, json.Unmarshal(c.Embeddings, &want))
		}
		require.Len(t, got, len(want))
		for i := range want {
			if pooling == PoolingNone {
				// Each token's vector against its own.
				d := m.Info().EmbeddingSize
				for r := 0; r*d < len(want[i]); r++ {
					if msg := rule.check(got[i][r*d:(r+1)*d], want[i][r*d:(r+1)*d]); msg != "" {
						misses = append(misses, fmt.Sprintf("%s/%d text %d token %d: %s", c.Pooling, c.Normalize, i, r, msg))
					}
				}
				continue
			}
			if len(want[i]) > 1 {
				worst = min(worst, cosine(got[i], want[i]))
			}
			if msg := rule.check(got[i], want[i]); msg != "" {
				misses = append(misses, fmt.Sprintf("%s/%d text %d: %s", c.Pooling, c.Normalize, i, msg))
			}
		}
	}
	return misses
}

// openSynthBert opens the synthetic BERT of type typ ("f32" or "Q8_0"),
// checking the file is the one its references were made from.
func openSynthBert(t *testing.T, typ string, p ModelParams) (*Model, *embedRef) {
	return openSynthEncoder(t, "synth-bert", typ, buildSynthBert, p)
}

func TestBertSynthEmbedF32(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf") // the generator's vocabulary
	m, ref := openSynthBert(t, "f32", ModelParams{Threads: 2})
	assert.Empty(t, runEmbedRef(t, m, ref, embedRuleF32))
}

func TestBertSynthEmbedQ8(t *testing.T) {
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp} {
		t.Run(n.String(), func(t *testing.T) {
			if n != NumericsFast && testing.Short() {
				t.Skip("the reference numerics modes' pure-Go products take seconds; not in -short")
			}
			m, ref := openSynthBert(t, "Q8_0", ModelParams{Threads: 2, Numerics: n})
			assert.Empty(t, runEmbedRef(t, m, ref, embedRuleQ8))
		})
	}
}

// TestBertSynthEmbedIkRefused: the ik mode follows ik_llama.cpp's causal
// flash attention over an f16 cache, not an encoder's, so it refuses one
// at open rather than compute it some other way.
func TestBertSynthEmbedIkRefused(t *testing.T) {
	path := synthBertPath(t, "Q8_0", t.TempDir())
	_, err := Open(path, ModelParams{Threads: 2, Numerics: NumericsIk})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Contains(t, err.Error(), "numerics mode ik: encoders")
}

// TestBertSynthEmbedCausalDiffers runs the F32 file with causal attention:
// the references must see the difference (they test non-causal attention).
func TestBertSynthEmbedCausalDiffers(t *testing.T) {
	m, ref := openSynthBert(t, "f32", ModelParams{Threads: 2})
	m.cfg.NonCausal = false
	misses := runEmbedRef(t, m, ref, embedRuleQ8)
	assert.NotEmpty(t, misses, "causal attention met the references")
	t.Logf("%d misses, e.g. %s", len(misses), strings.Join(misses[:min(2, len(misses))], "; "))
}

// TestEmbedDecoderSynth embeds with a decoder (the shared synthetic qwen3,
// causal attention, the hidden states after the output norm): mean and
// last-token pooling as Qwen3-Embedding uses, against llama.cpp with its
// default F16 KV cache (ours too).
func TestEmbedDecoderSynth(t *testing.T) {
	for _, c := range []struct {
		typ  string
		rule embedRule
	}{{"f32", embedRuleF32}, {"Q8_0", embedRuleQ8}} {
		t.Run(c.typ, func(t *testing.T) {
			ref := readEmbedRef(t, "synth-qwen3-"+c.typ+".embed.json")
			path := shareddata.Path(t, "synth/"+ref.Model)
			img, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, ref.SHA256, sha256Hex(img), "%s is not the file the references were made from", ref.Model)
			m, err := Open(path, ModelParams{Threads: 2})
			require.NoError(t, err)
			defer m.Close()
			assert.Empty(t, runEmbedRef(t, m, ref, c.rule))
		})
	}
}

// TestEmbedErrors: what Embed and an encoder refuse, and the API's
// shapes.
func TestEmbedErrors(t *testing.T) {
	m, _ := openSynthBert(t, "Q8_0", ModelParams{Threads: 2})
	assert.Equal(t, PoolingMean, m.Pooling(), "the file's pooling_type 1")
	n, err := m.EmbedSize(PoolingRank)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one classifier label")
	n, err = m.EmbedSize(PoolingModel)
	require.NoError(t, err)
	assert.Equal(t, 256, n)

	_, err = m.NewSession(SessionParams{NCtx: 513})
	assert.ErrorIs(t, err, ErrInvalidArgument, "beyond the learned positions")
	s, err := m.NewSession(SessionParams{NCtx: 8})
	require.NoError(t, err)
	defer s.Close()
	assert.ErrorIs(t, s.Prefill([]int32{101, 102}, nil), ErrUnsupported, "an encoder has no logits")
	out := make([]float32, 256)
	_, err = s.Embed([]int32{101, 102}, EmbedParams{}, out[:255])
	assert.ErrorIs(t, err, ErrInvalidArgument, "output too small")
	_, err = s.Embed([]int32{101, 99999}, EmbedParams{}, out)
	assert.ErrorIs(t, err, ErrInvalidArgument, "token outside the vocabulary")
	_, err = s.Embed(make([]int32, 9), EmbedParams{}, out)
	assert.ErrorIs(t, err, ErrContextFull)
	_, err = s.Embed(nil, EmbedParams{}, out)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.Embed([]int32{101, 102}, EmbedParams{Pooling: 42}, out)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	// The session stays usable after refusals, and embeds from position 0
	// every time: the same text twice gives the same vector.
	n1, err := s.Embed([]int32{101, 1107, 102}, EmbedParams{Normalize: true}, out)
	require.NoError(t, err)
	again := make([]float32, 256)
	_, err = s.Embed([]int32{101, 1107, 102}, EmbedParams{Normalize: true}, again)
	require.NoError(t, err)
	assert.Equal(t, out[:n1], again)
	assert.Equal(t, 0, s.Pos())
	var norm float64
	for _, v := range out {
		norm += float64(v) * float64(v)
	}
	assert.InDelta(t, 1, norm, 1e-5)

	// Embed (texts) tokenizes as Tokenize with special tokens.
	res, err := m.Embed([]string{"hello world", "a"}, EmbedParams{Pooling: PoolingNone})
	require.NoError(t, err)
	ids, _ := m.Tokenize("a", true, false)
	assert.Len(t, res[1], len(ids)*256)
	_, err = m.Embed([]string{"hello", ""}, EmbedParams{})
	require.NoError(t, err, "an empty text is still [CLS] [SEP]")
	_, err = m.EmbedTokens([][]int32{{101}, {}}, EmbedParams{})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = m.EmbedTokens([][]int32{make([]int32, 513)}, EmbedParams{})
	assert.ErrorIs(t, err, ErrContextFull)

	scores, err := m.Rerank("what is a panda?", []string{"The giant panda is a bear species endemic to China.", "hi"})
	require.NoError(t, err)
	assert.Len(t, scores, 2)

	for _, name := range []string{"model", "none", "MEAN", "cls", "last", "rank"} {
		p, err := ParsePooling(name)
		require.NoError(t, err)
		assert.True(t, strings.EqualFold(name, p.String()))
	}
	_, err = ParsePooling("max")
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// TestEmbedDecoderRefusesRank: rank pooling needs an encoder's head.
func TestEmbedDecoderRefusesRank(t *testing.T) {
	m, err := Open(shareddata.Path(t, "models/stories260K.gguf"), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Embed([]string{"Once upon a time"}, EmbedParams{Pooling: PoolingRank})
	assert.ErrorIs(t, err, ErrUnsupported)
	res, err := m.Embed([]string{"Once upon a time", "x"}, EmbedParams{Pooling: PoolingLast})
	require.NoError(t, err)
	assert.Len(t, res, 2)
	assert.Len(t, res[0], m.Info().EmbeddingSize)
	assert.Equal(t, PoolingMean, m.Pooling(), "no pooling_type: mean")
}

// TestEmbedBatchPacks: an encoder's texts packed into shared passes (here
// a context of 64 tokens, so five texts take several passes, and one of 78
// tokens is refused) give what each text alone gives, every pooling.
func TestEmbedBatchPacks(t *testing.T) {
	m, ref := openSynthBert(t, "f32", ModelParams{Threads: 2})
	texts := ref.Cases[0].Texts
	seqs := make([][]int32, 0, len(texts))
	for _, s := range texts {
		ids, err := m.Tokenize(s, true, false)
		require.NoError(t, err)
		if len(ids) <= 64 {
			seqs = append(seqs, ids)
		}
	}
	require.Len(t, seqs, 5)
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	for _, pooling := range []Pooling{PoolingNone, PoolingMean, PoolingCLS, PoolingLast, PoolingRank} {
		p := EmbedParams{Pooling: pooling, Normalize: true}
		outs := make([][]float32, len(seqs))
		alone := make([][]float32, len(seqs))
		for i, sq := range seqs {
			n := 256
			if pooling == PoolingNone {
				n *= len(sq)
			}
			if pooling == PoolingRank {
				n = 1
			}
			outs[i], alone[i] = make([]float32, n), make([]float32, n)
			_, err := s.Embed(sq, p, alone[i])
			require.NoError(t, err)
		}
		require.NoError(t, s.EmbedBatch(seqs, p, outs))
		// Not bit for bit: a pass of other tokens sums some products in
		// another order, and GELU's f16 table turns that into the spread
		// llama.cpp shows between its batched and single runs; the F32
		// rule holds.
		for i := range seqs {
			for r := 0; r < len(outs[i]); r += 256 {
				end := min(r+256, len(outs[i]))
				assert.Empty(t, embedRuleF32.check(outs[i][r:end], alone[i][r:end]), "%s text %d row %d", pooling, i, r/256)
			}
		}
	}
	long, _ := m.Tokenize(texts[4], true, false)
	err = s.EmbedBatch([][]int32{seqs[0], long}, EmbedParams{}, [][]float32{make([]float32, 256), make([]float32, 256)})
	assert.ErrorIs(t, err, ErrContextFull)
	assert.ErrorIs(t, s.EmbedBatch(seqs, EmbedParams{}, nil), ErrInvalidArgument)
	assert.Equal(t, 0, s.Pos())
}

// TestBertRefusesBadFiles: what a BERT file must have, each refusal naming
// what is wrong.
func TestBertRefusesBadFiles(t *testing.T) {
	src := synthModel(t, "synth-bert-Q8_0.gguf")
	drop := func(name string) func(*gguf.Tensor, func(string, gguf.Type, []int64, []byte)) {
		return func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
			if ts.Name != name {
				add(ts.Name, ts.Type, ts.Shape, ts.Data)
			}
		}
	}
	setKey := func(key string, val any) func(string, any) any {
		return func(k string, v any) any {
			if k == key {
				return val
			}
			return v
		}
	}
	for _, c := range []struct {
		what   string
		key    func(string, any) any
		tensor func(*gguf.Tensor, func(string, gguf.Type, []int64, []byte))
		want   error
		msg    string
	}{
		{"no position embeddings", nil, drop("position_embd.weight"), ErrBadFile, "position_embd.weight"},
		{"no embedding norm bias", nil, drop("token_embd_norm.bias"), ErrBadFile, "token_embd_norm.bias"},
		{"no layer output norm", nil, drop("blk.2.layer_output_norm.weight"), ErrBadFile, "blk.2.layer_output_norm.weight"},
		{"causal attention", setKey("bert.attention.causal", true), nil, ErrUnsupported, "causal"},
		{"pooling type 9", setKey("bert.pooling_type", uint32(9)), nil, ErrBadFile, "pooling_type"},
		{"no layer norm epsilon", setKey("bert.attention.layer_norm_epsilon", nil), nil, ErrBadFile, "layer_norm_epsilon"},
		{"more positions than the file has", setKey("bert.context_length", uint32(1024)), nil, ErrBadFile, "position_embd.weight"},
	} {
		t.Run(c.what, func(t *testing.T) {
			path := copyGGUF(t, src, c.key, c.tensor)
			m, err := Open(path, ModelParams{Threads: 1})
			if m != nil {
				m.Close()
			}
			require.ErrorIs(t, err, c.want)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
	// Without the classifier head the file still embeds; rank pooling then
	// returns the first token's state, as llama.cpp's does.
	path := copyGGUF(t, src, nil, func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
		if !strings.HasPrefix(ts.Name, "cls.") {
			add(ts.Name, ts.Type, ts.Shape, ts.Data)
		}
	})
	m, err := Open(path, ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	n, err := m.EmbedSize(PoolingRank)
	require.NoError(t, err)
	assert.Equal(t, 256, n)
	cls, err := m.EmbedTokens([][]int32{{101, 1107, 102}}, EmbedParams{Pooling: PoolingCLS})
	require.NoError(t, err)
	rank, err := m.EmbedTokens([][]int32{{101, 1107, 102}}, EmbedParams{Pooling: PoolingRank})
	require.NoError(t, err)
	assert.Equal(t, cls, rank)
}

// TestRerankDecoderSynth: a decoder reranker as Qwen3-Reranker's files
// are (the shared synthetic qwen3 with a yes/no cls.output head and a
// rerank prompt template) scores as llama.cpp does: the last token's
// normed state through the head, then a softmax; Rerank gives P(yes).
func TestRerankDecoderSynth(t *testing.T) {
	ref := readEmbedRef(t, "synth-qwen3-reranker-f32.embed.json")
	img := buildSynthQwen3Reranker(t)
	require.Equal(t, ref.SHA256, sha256Hex(img), "the reranker is not the file the references were made from")
	path := filepath.Join(t.TempDir(), ref.Model)
	require.NoError(t, os.WriteFile(path, img, 0o644))
	m, err := Open(path, ModelParams{Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	n, err := m.EmbedSize(PoolingRank)
	require.NoError(t, err)
	require.Equal(t, 2, n, "yes and no")
	assert.Empty(t, runEmbedRef(t, m, ref, embedRuleF32))
	c := ref.Cases[0]
	var want [][]float32
	require.NoError(t, json.Unmarshal(c.Embeddings, &want))
	for i, pair := range c.Pairs {
		scores, err := m.Rerank(pair[0], []string{pair[1]})
		require.NoError(t, err)
		assert.InDelta(t, want[i][0], scores[0], 1e-3, "pair %d", i)
	}
}
