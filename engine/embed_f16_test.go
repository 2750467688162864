package engine

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/kernels"
)

// synthBertF16Path writes the synthetic BERT with its blocks' matrices
// rounded to f16 (the embeddings, norms and head stay f32).
func synthBertF16Path(t *testing.T) string {
	src := synthBertPath(t, "f32", t.TempDir())
	return copyGGUF(t, src, func(k string, v any) any {
		if k == "general.file_type" {
			return uint32(1)
		}
		return v
	}, f16Blocks)
}

// f16Blocks is a copyGGUF tensor edit: the blocks' f32 matrices to f16.
func f16Blocks(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
	if !strings.HasPrefix(ts.Name, "blk.") || len(ts.Shape) != 2 || ts.Type != gguf.F32 {
		add(ts.Name, ts.Type, ts.Shape, ts.Data)
		return
	}
	v := make([]float32, len(ts.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(ts.Data[4*i:]))
	}
	h := make([]byte, 2*len(v))
	kernels.F32RowToF16(v, h)
	add(ts.Name, gguf.F16, ts.Shape, h)
}

// embedRuleF16Order bounds two runs of one f16 encoder whose products add
// the same exact f16 products in another order (AMX tiles, f16 kernels):
// the F32 rule's cosine; elements within 5e-4 (measured: 1.4e-4 at worst,
// on an un-normalized CLS vector; GELU's f16 table turns a last-bit
// difference of its input into a step of the table).
var embedRuleF16Order = embedRule{minCos: 0.99999, maxAbs: 5e-4}

// TestBertSynthEmbedF16: the synthetic BERT in f16 embeds on the AMX tiles
// (where the CPU and OS have them: the encoder's f16 matrices packed in
// their layout) as on the f16 kernels of the set without them
// (embedRuleF16Order), and both stay within the Q8 rule of llama.cpp's
// embeddings of the F32 file (the weights' rounding to f16 is the
// difference there).
func TestBertSynthEmbedF16(t *testing.T) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf") // the generator's vocabulary
	ref := readEmbedRef(t, "synth-bert-f32.embed.json")
	path := synthBertF16Path(t)
	ks := kernels.Detect()
	if !ks.AMX() {
		t.Logf("the %s set has no AMX tiles on this CPU or OS: both runs take the f16 kernels", ks.Name())
	}
	open := func(k *kernels.Set) *Model {
		m, err := Open(path, ModelParams{Threads: 2, Kernels: k})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		return m
	}
	tiles, plain := open(ks), open(ks.WithoutAMX())
	if ks.AMX() {
		assert.Positive(t, tiles.OpenStats().PackedMatrices, "an encoder's f16 matrices take the AMX layout")
	}
	assert.Zero(t, plain.OpenStats().PackedMatrices, "without AMX the f16 matrices stay as mapped")
	assert.Empty(t, runEmbedRef(t, tiles, ref, embedRuleQ8))
	assert.Empty(t, runEmbedRef(t, plain, ref, embedRuleQ8))
	for _, c := range ref.Cases {
		pooling, err := ParsePooling(c.Pooling)
		require.NoError(t, err)
		if pooling == PoolingRank || pooling == PoolingNone {
			continue
		}
		p := EmbedParams{Pooling: pooling, Normalize: c.Normalize == 2}
		a, err := tiles.EmbedTokens(c.Tokens, p)
		require.NoError(t, err)
		b, err := plain.EmbedTokens(c.Tokens, p)
		require.NoError(t, err)
		for i := range a {
			assert.Empty(t, embedRuleF16Order.check(a[i], b[i]), "%s text %d", c.Pooling, i)
		}
	}
}

// TestEncoderF16AMXOnlyEncoders: a decoder's f16 matrices never take the
// AMX layout (its products stay the row kernels' bit for bit).
func TestEncoderF16AMXOnlyEncoders(t *testing.T) {
	ks := kernels.Detect()
	if !ks.AMX() {
		t.Skipf("the %s set has no AMX tiles on this CPU or OS", ks.Name())
	}
	src := filepath.Join(t.TempDir(), "smollm3-f32.gguf")
	require.NoError(t, os.WriteFile(src, buildSynth(t, synthSpecOf(t, "smollm3"), false), 0o644))
	path := copyGGUF(t, src, nil, f16Blocks)
	m, err := Open(path, ModelParams{Threads: 1, Kernels: ks})
	require.NoError(t, err)
	defer m.Close()
	assert.Zero(t, m.OpenStats().PackedMatrices)
}
