package engine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// encoderMeta is the metadata of a synthetic encoder: the keys the BERT
// family shares, with the encoder's own (archKeys, after
// attention.causal) before its pooling type.
type encoderMeta struct {
	arch, name                 string
	fileType                   uint32
	ctx, dim, layers, ff, head uint32 // head: attention heads
	archKeys                   []synthKey
	pooling                    uint32
}

// newEncoderWriter starts a synthetic encoder's file: m's keys, then the
// tokenizer keys of the bge vocabulary subset (bertVocab), special tokens
// at their usual ids. It returns the writer, a key setter for what the
// caller adds after, and the vocabulary size.
func newEncoderWriter(t testing.TB, m encoderMeta) (w *gguf.Writer, set func(k string, v any), nVocab int) {
	t.Helper()
	toks, types := bertVocab(t)
	w = gguf.NewWriter()
	set = func(k string, v any) { require.NoError(t, w.Set(k, v)) }
	a := m.arch
	set("general.architecture", a)
	set("general.name", m.name)
	set("general.file_type", m.fileType)
	set(a+".context_length", m.ctx)
	set(a+".embedding_length", m.dim)
	set(a+".block_count", m.layers)
	set(a+".feed_forward_length", m.ff)
	set(a+".attention.head_count", m.head)
	set(a+".attention.layer_norm_epsilon", float32(1e-12))
	set(a+".attention.causal", false)
	for _, k := range m.archKeys {
		set(a+"."+k.name, k.v)
	}
	set(a+".pooling_type", m.pooling)
	set("tokenizer.ggml.model", "bert")
	set("tokenizer.ggml.pre", "bert-bge")
	set("tokenizer.ggml.tokens", toks)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.token_type_count", uint32(2))
	set("tokenizer.ggml.unknown_token_id", uint32(100))
	set("tokenizer.ggml.seperator_token_id", uint32(102))
	set("tokenizer.ggml.padding_token_id", uint32(0))
	set("tokenizer.ggml.cls_token_id", uint32(101))
	set("tokenizer.ggml.mask_token_id", uint32(103))
	set("tokenizer.ggml.bos_token_id", uint32(101))
	return w, set, len(toks)
}

// encoderDraw adds a synthetic encoder's tensors to w, drawing their values
// from rng in the order they are added: matrices N(0, matScale²) of type
// matType, vectors and embedding tables F32.
type encoderDraw struct {
	t        testing.TB
	w        *gguf.Writer
	rng      *rand.Rand
	matType  gguf.Type
	matScale float64
}

// f32 adds an F32 tensor of values offset + scale·N(0,1).
func (d encoderDraw) f32(name string, scale, offset float64, shape ...int64) {
	d.add(name, gguf.F32, scale, offset, shape)
}

// mat adds a cols×rows weight matrix.
func (d encoderDraw) mat(name string, cols, rows int64) {
	d.add(name, d.matType, d.matScale, 0, []int64{cols, rows})
}

// normW adds a LayerNorm weight vector, 1 + 0.1·N(0,1).
func (d encoderDraw) normW(name string, n int64) { d.f32(name, 0.1, 1, n) }

// bias adds a bias vector, 0.02·N(0,1).
func (d encoderDraw) bias(name string, n int64) { d.f32(name, 0.02, 0, n) }

func (d encoderDraw) add(name string, typ gguf.Type, scale, offset float64, shape []int64) {
	n := shape[0]
	if len(shape) == 2 {
		n *= shape[1]
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(offset + scale*d.rng.NormFloat64())
	}
	addSynthTensor(d.t, d.w, name, typ, shape, vals)
}

// bertTensors adds the BERT architecture's tensors (learned positions,
// separate Q/K/V, every bias) for nVocab tokens and m's shape.
func (d encoderDraw) bertTensors(m encoderMeta, nVocab int) {
	dim, ff := int64(m.dim), int64(m.ff)
	d.mat("token_embd.weight", dim, int64(nVocab))
	d.f32("token_types.weight", d.matScale, 0, dim, 2)
	d.f32("position_embd.weight", d.matScale, 0, dim, int64(m.ctx))
	d.normW("token_embd_norm.weight", dim)
	d.bias("token_embd_norm.bias", dim)
	for il := 0; il < int(m.layers); il++ {
		p := fmt.Sprintf("blk.%d.", il)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			d.mat(p+n+".weight", dim, dim)
			d.bias(p+n+".bias", dim)
		}
		d.normW(p+"attn_output_norm.weight", dim)
		d.bias(p+"attn_output_norm.bias", dim)
		d.mat(p+"ffn_up.weight", dim, ff)
		d.bias(p+"ffn_up.bias", ff)
		d.mat(p+"ffn_down.weight", ff, dim)
		d.bias(p+"ffn_down.bias", dim)
		d.normW(p+"layer_output_norm.weight", dim)
		d.bias(p+"layer_output_norm.bias", dim)
	}
}

// encoderSynthPath is the synthetic encoder synth-NAME of type typ ("f32"
// or "Q8_0"): the committed Q8_0 file, or the F32 one build writes into
// dir.
func encoderSynthPath(t *testing.T, name, typ, dir string, build func(t *testing.T, q8 bool) []byte) string {
	t.Helper()
	if typ == "Q8_0" {
		return synthNewPath("synth-" + name + "-Q8_0.gguf")
	}
	p := filepath.Join(dir, "synth-"+name+"-f32.gguf")
	require.NoError(t, os.WriteFile(p, build(t, false), 0o644))
	return p
}

// writeOrMatchEncoderSynth checks the committed Q8_0 file of the synthetic
// encoder synth-NAME is what build writes; with -update-synth it rewrites
// it, and writes the F32 file to build/synth/ for making references.
func writeOrMatchEncoderSynth(t *testing.T, name string, build func(t *testing.T, q8 bool) []byte) {
	t.Helper()
	writeOrMatchSynth(t, synthNewPath("synth-"+name+"-Q8_0.gguf"), build(t, true))
	if *updateSynth {
		dir := filepath.Join("..", "build", "synth")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "synth-"+name+"-f32.gguf"), build(t, false), 0o644))
	}
}
