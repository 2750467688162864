package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
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

// The synthetic nomic-bert (nomic-embed-text's architecture): the
// synthetic BERT's shapes and vocabulary (hidden 256, 4 heads of 64, ffn
// 512, 4 layers, 512 positions) with nomic's differences: Q, K and V in
// one fused attn_qkv matrix, no learned positions (NeoX rotary ones, base
// 1000 as nomic's files say), a SwiGLU FFN (ffn_gate, ffn_up) and no
// biases outside the LayerNorms, as nomic-embed-text has none. Weights
// N(0, 0.08²); LayerNorm weights 1 + 0.1·N(0,1), biases 0.02·N(0,1).
//
// No file is committed: the tests generate the Q8_0 file (synthModel) and
// the F32 one, and the references carry each file's SHA-256.
const nomicSeed = 11

// buildSynthNomicBert writes the synthetic nomic-bert in F32 or (q8) Q8_0
// (block matrices and token embeddings quantized; token-type embeddings
// and vectors F32).
func buildSynthNomicBert(t testing.TB, q8 bool) []byte {
	t.Helper()
	toks, types := bertVocab(t)
	a := "nomic-bert"
	w, set := newEncoderWriter(t, a, "synth-nomic-bert", q8, bertCtx, bertDim, bertLayers, bertFF, bertHeads, 1e-12)
	set(a+".rope.freq_base", float32(1000))
	set(a+".pooling_type", uint32(1)) // mean, as nomic-embed-text's files
	setWordPieceVocab(set, "bert-bge", toks, types)
	set("tokenizer.ggml.eos_token_id", uint32(102))
	if q8 {
		set("general.quantization_version", uint32(2))
	}
	rng := rand.New(rand.NewPCG(nomicSeed, 0x5eed))
	add := func(name string, quant bool, scale, offset float64, shape ...int64) {
		n := int(shape[0])
		rows := 1
		if len(shape) == 2 {
			rows = int(shape[1])
		}
		vals := make([]float32, n*rows)
		for i := range vals {
			vals[i] = float32(offset + scale*rng.NormFloat64())
		}
		if q8 && quant {
			rb := n / 32 * 34
			data := make([]byte, rows*rb)
			for r := 0; r < rows; r++ {
				kernels.QuantizeWeightRow(gguf.Q8_0, vals[r*n:(r+1)*n], data[r*rb:(r+1)*rb])
			}
			require.NoError(t, w.AddTensor(name, gguf.Q8_0, shape, data))
			return
		}
		data := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, shape, data))
	}
	mat := func(name string, cols, rows int64) { add(name, true, 0.08, 0, cols, rows) }
	normW := func(name string) { add(name, false, 0.1, 1, bertDim) }
	bias := func(name string, n int64) { add(name, false, 0.02, 0, n) }
	mat("token_embd.weight", bertDim, int64(len(toks)))
	add("token_types.weight", false, 0.08, 0, bertDim, 2)
	normW("token_embd_norm.weight")
	bias("token_embd_norm.bias", bertDim)
	for il := 0; il < bertLayers; il++ {
		p := fmt.Sprintf("blk.%d.", il)
		mat(p+"attn_qkv.weight", bertDim, 3*bertDim)
		mat(p+"attn_output.weight", bertDim, bertDim)
		normW(p + "attn_output_norm.weight")
		bias(p+"attn_output_norm.bias", bertDim)
		mat(p+"ffn_gate.weight", bertDim, bertFF)
		mat(p+"ffn_up.weight", bertDim, bertFF)
		mat(p+"ffn_down.weight", bertFF, bertDim)
		normW(p + "layer_output_norm.weight")
		bias(p+"layer_output_norm.bias", bertDim)
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// synthNomicBertPath is the synthetic nomic-bert of the given type ("f32"
// or "Q8_0"): the generated Q8_0 file, or the F32 one written into dir.
func synthNomicBertPath(t *testing.T, typ, dir string) string {
	if typ == "Q8_0" {
		return synthModel(t, "synth-nomic-bert-Q8_0.gguf")
	}
	p := filepath.Join(dir, "synth-nomic-bert-f32.gguf")
	require.NoError(t, os.WriteFile(p, buildSynthNomicBert(t, false), 0o644))
	return p
}

// TestWriteSynthNomicBert checks the generator's F32 nomic-bert is the file
// its references were made from; with -update-synth it writes it to
// build/synth/ for making references (writeSynthEncoder).
func TestWriteSynthNomicBert(t *testing.T) {
	writeSynthEncoder(t, "synth-nomic-bert", buildSynthNomicBert)
}

// openSynthNomicBert opens the synthetic nomic-bert of type typ, checking
// the file is the one its references were made from.
func openSynthNomicBert(t *testing.T, typ string, p ModelParams) (*Model, *embedRef) {
	shareddata.Path(t, "vocab/ggml-vocab-bert-bge.gguf") // the generator's vocabulary
	return openSynthEncoder(t, "synth-nomic-bert", typ, buildSynthNomicBert, p)
}

// The synthetic nomic-bert against llama.cpp's embeddings
// (engine/testdata/synth/synth-nomic-bert-*.embed.json): mean, cls, last
// and per-token pooling, with and without L2 normalization.
func TestNomicBertSynthEmbedF32(t *testing.T) {
	m, ref := openSynthNomicBert(t, "f32", ModelParams{Threads: 2})
	assert.Empty(t, runEmbedRef(t, m, ref, embedRuleF32))
}

// The Q8_0 file in the fast and llama.cpp numerics modes. Not in the ik
// mode: the references are mainline llama.cpp's, and that mode follows
// ik_llama.cpp's products (activations quantized with bf16 block scales),
// which the SwiGLU network here moves to cosine ~0.998 from them.
func TestNomicBertSynthEmbedQ8(t *testing.T) {
	for _, n := range []Numerics{NumericsFast, NumericsLlamaCpp} {
		t.Run(n.String(), func(t *testing.T) {
			if n != NumericsFast && testing.Short() {
				t.Skip("the reference numerics modes' pure-Go products take seconds; not in -short")
			}
			m, ref := openSynthNomicBert(t, "Q8_0", ModelParams{Threads: 2, Numerics: n})
			assert.Empty(t, runEmbedRef(t, m, ref, embedRuleQ8))
		})
	}
}

// TestNomicBertSynthNeoxRoPE runs the F32 file with RoPE rotating adjacent
// pairs in place of NeoX's halves: the references must see the
// difference (they test the rotary layout).
func TestNomicBertSynthNeoxRoPE(t *testing.T) {
	m, ref := openSynthNomicBert(t, "f32", ModelParams{Threads: 2})
	m.cfg.Neox = false // GPT-J pairs in place of NeoX's halves
	misses := runEmbedRef(t, m, ref, embedRuleQ8)
	assert.NotEmpty(t, misses, "RoPE in the wrong layout met the references")
}

// TestNomicBertSeparateQKV: a file with attn_q, attn_k and attn_v in place
// of the fused attn_qkv (llama.cpp takes either) embeds as the fused one.
func TestNomicBertSeparateQKV(t *testing.T) {
	m, ref := openSynthNomicBert(t, "Q8_0", ModelParams{Threads: 2})
	path := copyGGUF(t, synthNomicBertPath(t, "Q8_0", ""), nil, func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
		base, ok := strings.CutSuffix(ts.Name, "attn_qkv.weight")
		if !ok {
			add(ts.Name, ts.Type, ts.Shape, ts.Data)
			return
		}
		part := len(ts.Data) / 3
		for i, n := range []string{"attn_q", "attn_k", "attn_v"} {
			add(base+n+".weight", ts.Type, []int64{ts.Shape[0], ts.Shape[1] / 3}, ts.Data[i*part:(i+1)*part])
		}
	})
	sep, err := Open(path, ModelParams{Threads: 2})
	require.NoError(t, err)
	defer sep.Close()
	assert.Empty(t, runEmbedRef(t, sep, ref, embedRuleQ8))
	seqs := [][]int32{{101, 1107, 1999, 102}, {101, 2000, 102}}
	want, err := m.EmbedTokens(seqs, EmbedParams{Pooling: PoolingMean})
	require.NoError(t, err)
	got, err := sep.EmbedTokens(seqs, EmbedParams{Pooling: PoolingMean})
	require.NoError(t, err)
	for i := range want {
		assert.Greater(t, cosine(got[i], want[i]), 0.999999, "text %d", i)
	}
}

func TestNomicBertRefusesBadFiles(t *testing.T) {
	src := synthNomicBertPath(t, "Q8_0", "")
	for _, c := range []struct{ what, drop, msg string }{
		{"no gate", "blk.1.ffn_gate.weight", "blk.1.ffn_gate.weight"},
		{"no qkv", "blk.0.attn_qkv.weight", "attn_q"},
		{"no embedding norm", "token_embd_norm.weight", "token_embd_norm.weight"},
	} {
		t.Run(c.what, func(t *testing.T) {
			path := copyGGUF(t, src, nil, func(ts *gguf.Tensor, add func(string, gguf.Type, []int64, []byte)) {
				if ts.Name != c.drop {
					add(ts.Name, ts.Type, ts.Shape, ts.Data)
				}
			})
			m, err := Open(path, ModelParams{Threads: 1})
			if m != nil {
				m.Close()
			}
			require.ErrorIs(t, err, ErrBadFile)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}
