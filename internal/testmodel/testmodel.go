// Package testmodel writes tiny, self-contained GGUF models for tests: a
// llama model with a small SentencePiece vocabulary of its own and
// deterministic weights (F32, or quantized matrices), so tests need no
// downloaded file. Hostile lists
// variants whose metadata lies about what the file holds; a model open must
// refuse each with a clear error, without allocating what the lie asks for.
package testmodel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// Spec is the shape of a tiny llama model.
type Spec struct {
	Dim, Layers, Heads, KVHeads, FF, Ctx int
	// Meta overrides or adds metadata keys (a nil value removes the key).
	Meta map[string]any
	// Drop names tensors left out of the file.
	Drop map[string]bool
	// Quant is the type of the weight matrices: F32 (the zero value) or
	// a type kernels.QuantizeWeightRow makes, such as Q8_0.
	Quant gguf.Type
}

// Small is the default shape: two layers, grouped-query attention.
var Small = Spec{Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, FF: 64, Ctx: 128}

// pieces end the vocabulary, after <unk>, <s>, </s> and the 256 byte
// tokens.
var pieces = []string{"\u2581", "\u2581a", "\u2581the", "e", "t", "a", "o", "n"}

// VocabSize is the size of the vocabulary every model of this package has.
var VocabSize = 3 + 256 + len(pieces)

// Build writes the model s describes and returns the file's bytes.
func Build(s Spec) ([]byte, error) {
	w := gguf.NewWriter()
	meta := map[string]any{
		"general.architecture":                   "llama",
		"general.name":                           "moonlm test model",
		"llama.context_length":                   uint32(s.Ctx),
		"llama.embedding_length":                 uint32(s.Dim),
		"llama.block_count":                      uint32(s.Layers),
		"llama.feed_forward_length":              uint32(s.FF),
		"llama.attention.head_count":             uint32(s.Heads),
		"llama.attention.head_count_kv":          uint32(s.KVHeads),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.freq_base":                   float32(10000),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.bos_token_id":            uint32(1),
		"tokenizer.ggml.eos_token_id":            uint32(2),
		"tokenizer.ggml.unknown_token_id":        uint32(0),
	}
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
	}
	toks = append(toks, pieces...)
	scores := make([]float32, len(toks))
	for i := range pieces {
		types = append(types, 1)
		scores[3+256+i] = -float32(i)
	}
	meta["tokenizer.ggml.tokens"] = toks
	meta["tokenizer.ggml.scores"] = scores
	meta["tokenizer.ggml.token_type"] = types
	for k, v := range s.Meta {
		if v == nil {
			delete(meta, k)
			continue
		}
		meta[k] = v
	}
	for _, k := range sortedKeys(meta) {
		if err := w.Set(k, meta[k]); err != nil {
			return nil, fmt.Errorf("testmodel: key %s: %w", k, err)
		}
	}
	seed := uint32(1)
	f32 := func(n int, base float32) []byte {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			seed = seed*1664525 + 1013904223
			x := base + (float32(seed>>8)/float32(1<<24)-0.5)*0.2
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	}
	add := func(name string, shape []int64, base float32) error {
		if s.Drop[name] {
			return nil
		}
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		typ, data := gguf.F32, f32(n, base)
		if len(shape) == 2 && s.Quant != gguf.F32 {
			cols, rows := int(shape[0]), int(shape[1])
			rb := kernels.RowBytes(s.Quant, cols)
			q := make([]byte, rows*rb)
			row := make([]float32, cols)
			for r := 0; r < rows; r++ {
				for c := range row {
					row[c] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*(r*cols+c):]))
				}
				kernels.QuantizeWeightRow(s.Quant, row, q[r*rb:(r+1)*rb])
			}
			typ, data = s.Quant, q
		}
		if err := w.AddTensor(name, typ, shape, data); err != nil {
			return fmt.Errorf("testmodel: tensor %s: %w", name, err)
		}
		return nil
	}
	hd := s.Dim / s.Heads
	qDim, kvDim := s.Heads*hd, s.KVHeads*hd
	d, ff := int64(s.Dim), int64(s.FF)
	type step struct {
		name  string
		shape []int64
		base  float32
	}
	// Vectors first, then matrices: a file cut after its vectors keeps
	// what open copies and loses what packing reads.
	vecs := []step{{"output_norm.weight", []int64{d}, 1}}
	mats := []step{{"token_embd.weight", []int64{d, int64(VocabSize)}, 0}}
	for i := 0; i < s.Layers; i++ {
		p := "blk." + strconv.Itoa(i) + "."
		vecs = append(vecs, step{p + "attn_norm.weight", []int64{d}, 1}, step{p + "ffn_norm.weight", []int64{d}, 1})
		mats = append(mats,
			step{p + "attn_q.weight", []int64{d, int64(qDim)}, 0},
			step{p + "attn_k.weight", []int64{d, int64(kvDim)}, 0},
			step{p + "attn_v.weight", []int64{d, int64(kvDim)}, 0},
			step{p + "attn_output.weight", []int64{int64(qDim), d}, 0},
			step{p + "ffn_gate.weight", []int64{d, ff}, 0},
			step{p + "ffn_up.weight", []int64{d, ff}, 0},
			step{p + "ffn_down.weight", []int64{ff, d}, 0},
		)
	}
	for _, st := range append(vecs, mats...) {
		if err := add(st.name, st.shape, st.base); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("testmodel: %w", err)
	}
	return buf.Bytes(), nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// manyKeys adds n one-byte metadata keys to s.
func manyKeys(s Spec, n int) Spec {
	for i := 0; i < n; i++ {
		s.Meta["x."+strconv.Itoa(i)] = uint8(1)
	}
	return s
}

// Case is a hostile model: its bytes and a word the refusal's message must
// contain (the key or tensor at fault). It is refused as a bad file, or as
// unsupported when Unsupported is set.
type Case struct {
	Name        string
	Data        []byte
	Want        string
	Unsupported bool
}

// Hostile returns models whose metadata asks for far more than the file
// holds, or holds numbers a model cannot run with. Each must be refused
// (BAD_FILE, or UNSUPPORTED for more keys than a file may have) with a
// message containing Want.
func Hostile() ([]Case, error) {
	with := func(kv ...any) Spec {
		s := Small
		s.Meta = map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Meta[kv[i].(string)] = kv[i+1]
		}
		return s
	}
	nan := float32(math.NaN())
	specs := []struct {
		name string
		spec Spec
		want string
	}{
		{"block_count_max_int32", with("llama.block_count", uint32(math.MaxInt32)), "block_count"},
		{"block_count_1e8", with("llama.block_count", uint32(100_000_000)), "block_count"},
		{"block_count_u64", with("llama.block_count", uint64(math.MaxUint64)), "block_count"},
		{"block_count_per_layer_array", with("llama.block_count", []uint64{1 << 40, 1 << 40, 1 << 40}), "block_count"},
		{"embedding_length_huge", with("llama.embedding_length", uint32(math.MaxInt32)), "rope dimensions"},
		{"feed_forward_length_huge", with("llama.feed_forward_length", uint32(1<<30)), "feed_forward_length"},
		{"head_count_huge", with("llama.attention.head_count", uint32(1<<30), "llama.attention.head_count_kv", uint32(1<<30)), "rope dimensions"},
		{"head_count_beyond_dim", with("llama.attention.head_count", uint32(16), "llama.attention.head_count_kv", uint32(16), "llama.attention.key_length", uint32(8), "llama.attention.value_length", uint32(8), "llama.rope.dimension_count", uint32(8)), "head_count"},
		{"embedding_length_lies", with("llama.embedding_length", uint32(64), "llama.attention.key_length", uint32(8), "llama.attention.value_length", uint32(8), "llama.rope.dimension_count", uint32(8)), "embedding_length"},
		{"key_length_huge", with("llama.attention.key_length", uint32(1<<30), "llama.attention.value_length", uint32(1<<30), "llama.rope.dimension_count", uint32(16)), "head size"},
		{"rope_dimension_huge", with("llama.rope.dimension_count", uint32(1<<30)), "rope"},
		{"freq_base_nan", with("llama.rope.freq_base", nan), "freq_base"},
		{"freq_base_zero", with("llama.rope.freq_base", float32(0)), "freq_base"},
		{"freq_base_negative", with("llama.rope.freq_base", float32(-10000)), "freq_base"},
		{"epsilon_nan", with("llama.attention.layer_norm_rms_epsilon", nan), "epsilon"},
		{"epsilon_zero", with("llama.attention.layer_norm_rms_epsilon", float32(0)), "epsilon"},
		{"epsilon_negative", with("llama.attention.layer_norm_rms_epsilon", float32(-1e-5)), "epsilon"},
		{"rope_scale_negative", with("llama.rope.scaling.factor", float32(-2)), "rope.scaling.factor"},
		{"rope_scale_inf", with("llama.rope.scaling.factor", float32(math.Inf(1))), "rope.scaling.factor"},
	}
	many := make([]string, 1<<20)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	specs = append(specs, []struct {
		name string
		spec Spec
		want string
	}{
		{"context_length_per_layer_huge", with("llama.context_length", []uint64{1 << 40, 1 << 40}), "context_length"},
		{"metadata_keys_70k", manyKeys(with(), 70_000), "metadata keys"},
		{"vocab_beyond_embedding", with("tokenizer.ggml.tokens", many), "tokenizer.ggml.tokens"},
		{"scores_longer_than_vocab", with("tokenizer.ggml.scores", make([]uint8, 4<<20)), "tokenizer.ggml.scores"},
		{"token_type_longer_than_vocab", with("tokenizer.ggml.token_type", make([]int8, 4<<20)), "tokenizer.ggml.token_type"},
	}...)
	out := make([]Case, 0, len(specs))
	for _, s := range specs {
		b, err := Build(s.spec)
		if err != nil {
			return nil, fmt.Errorf("testmodel: hostile %s: %w", s.name, err)
		}
		out = append(out, Case{Name: s.name, Data: b, Want: s.want, Unsupported: strings.HasPrefix(s.name, "metadata_keys")})
	}
	return out, nil
}
