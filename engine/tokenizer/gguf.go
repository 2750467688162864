package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// FromGGUF builds the tokenizer of a model file from its tokenizer.ggml.*
// keys. The tokenizer copies what it needs: it stays valid after f is closed.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := readVocab(f, true)
	if err != nil {
		return nil, err
	}
	t, err := New(v)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: building from GGUF: %w", err)
	}
	return t, nil
}

// VocabFromGGUF reads the tokenizer metadata of a model file.
func VocabFromGGUF(f *gguf.File) (*Vocab, error) { return readVocab(f, false) }

// readVocab reads the metadata; packed leaves tokens and merges packed for
// New instead of filling Tokens and Merges.
func readVocab(f *gguf.File, packed bool) (*Vocab, error) {
	v := &Vocab{Special: map[string]int64{}}
	var err error
	if v.Model, err = optString(f, "tokenizer.ggml.model"); err != nil {
		return nil, err
	}
	if v.Model == "" {
		return nil, fmt.Errorf("%w: key tokenizer.ggml.model missing", ErrBadVocab)
	}
	if v.Pre, err = optString(f, "tokenizer.ggml.pre"); err != nil {
		return nil, err
	}
	if v.Name, err = optString(f, "general.name"); err != nil {
		return nil, err
	}
	if v.packedTokens, err = stringArray(f, "tokenizer.ggml.tokens", true); err != nil {
		return nil, err
	}
	if v.Model == "gpt2" || v.Model == "gemma4" || v.Model == "whitespace" {
		if v.packedMerges, err = stringArray(f, "tokenizer.ggml.merges", true); err != nil {
			return nil, err
		}
	}
	if !packed {
		v.Tokens = v.packedTokens.unpack()
		v.packedTokens = nil
		if v.packedMerges != nil {
			v.Merges = v.packedMerges.unpack()
			v.packedMerges = nil
		}
	}
	if v.Scores, err = floatArray(f, "tokenizer.ggml.scores"); err != nil {
		return nil, err
	}
	if v.Types, err = intArray(f, "tokenizer.ggml.token_type"); err != nil {
		return nil, err
	}
	for _, k := range specialKeys {
		key := "tokenizer.ggml." + k + "_token_id"
		val, ok := f.Lookup(key)
		if !ok {
			continue
		}
		id, err := val.Int64()
		if err != nil {
			return nil, fmt.Errorf("tokenizer: key %s: %w", key, err)
		}
		v.Special[k] = id
	}
	for _, b := range []struct {
		key string
		dst **bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_sep_token", &v.AddSep},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
		{"tokenizer.ggml.remove_extra_whitespaces", &v.RemoveExtraWhitespaces},
		{"tokenizer.ggml.normalizer.lowercase", &v.Lowercase},
		{"tokenizer.ggml.normalizer.strip_accents", &v.StripAccents},
	} {
		val, ok := f.Lookup(b.key)
		if !ok {
			continue
		}
		x, err := val.Bool()
		if err != nil {
			return nil, fmt.Errorf("tokenizer: key %s: %w", b.key, err)
		}
		*b.dst = &x
	}
	if v.Model == "t5" {
		if v.Charsmap, err = byteArray(f, "tokenizer.ggml.precompiled_charsmap"); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// arrayKey is the array under key; ok is false when the file has no such
// key, and err names the key when its value is not an array.
func arrayKey(f *gguf.File, key string) (a gguf.Array, ok bool, err error) {
	val, ok := f.Lookup(key)
	if !ok {
		return a, false, nil
	}
	if a, err = val.Array(); err != nil {
		return a, true, fmt.Errorf("tokenizer: key %s: %w", key, err)
	}
	return a, true, nil
}

// byteArray reads an array of bytes (u8 or i8), copied.
func byteArray(f *gguf.File, key string) ([]byte, error) {
	a, ok, err := arrayKey(f, key)
	if !ok || err != nil {
		return nil, err
	}
	if et := a.ElemType(); et != gguf.ValueUint8 && et != gguf.ValueInt8 {
		return nil, fmt.Errorf("%w: key %s holds %s, not bytes", ErrBadVocab, key, et)
	}
	if raw := a.Raw(); len(raw) == a.Len() {
		return slices.Clone(raw), nil
	}
	out := make([]byte, a.Len())
	for i := range out {
		x, err := a.Int64(i)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: key %s[%d]: %w", key, i, err)
		}
		out[i] = byte(x)
	}
	return out, nil
}

func optString(f *gguf.File, key string) (string, error) {
	val, ok := f.Lookup(key)
	if !ok {
		return "", nil
	}
	s, err := val.String()
	if err != nil {
		return "", fmt.Errorf("tokenizer: key %s: %w", key, err)
	}
	return strings.Clone(s), nil
}

// stringArray packs a string array into one allocation (see strs). It
// parses the array's encoding itself (u32 element type, u64 count, then per
// string a u64 length and the bytes): a vocabulary has 10^5 strings, and
// going through the file's per-element accessors costs more than the rest of
// the tokenizer's construction.
func stringArray(f *gguf.File, key string, required bool) (*strs, error) {
	val, ok := f.Lookup(key)
	if !ok {
		if required {
			return nil, fmt.Errorf("%w: key %s missing", ErrBadVocab, key)
		}
		return nil, nil
	}
	if val.Type() != gguf.ValueArray {
		return nil, fmt.Errorf("%w: key %s is a %s, not an array", ErrBadVocab, key, val.Type())
	}
	raw := val.Raw()
	if len(raw) < 12 {
		return nil, fmt.Errorf("%w: key %s: array header truncated", ErrBadVocab, key)
	}
	if et := gguf.ValueType(binary.LittleEndian.Uint32(raw)); et != gguf.ValueString {
		return nil, fmt.Errorf("%w: key %s holds %s, not strings", ErrBadVocab, key, et)
	}
	n := binary.LittleEndian.Uint64(raw[4:])
	body := raw[12:]
	if n > uint64(len(body))/8 {
		return nil, fmt.Errorf("%w: key %s: %d strings cannot fit in %d bytes", ErrBadVocab, key, n, len(body))
	}
	ends := make([]uint32, n)
	total := uint64(0)
	for i := range ends {
		if len(body) < 8 {
			return nil, fmt.Errorf("%w: key %s[%d]: truncated", ErrBadVocab, key, i)
		}
		l := binary.LittleEndian.Uint64(body)
		if l > uint64(len(body)-8) {
			return nil, fmt.Errorf("%w: key %s[%d]: length %d past the end", ErrBadVocab, key, i, l)
		}
		total += l
		if total > 1<<32-1 {
			return nil, fmt.Errorf("%w: key %s: strings exceed 4 GiB", ErrBadVocab, key)
		}
		ends[i] = uint32(total)
		body = body[8+l:]
	}
	buf := make([]byte, 0, total)
	body = raw[12:]
	for range ends {
		l := binary.LittleEndian.Uint64(body)
		buf = append(buf, body[8:8+l]...)
		body = body[8+l:]
	}
	return &strs{data: unsafe.String(unsafe.SliceData(buf), len(buf)), ends: ends}, nil
}

func floatArray(f *gguf.File, key string) ([]float32, error) {
	a, ok, err := arrayKey(f, key)
	if !ok || err != nil {
		return nil, err
	}
	out := make([]float32, a.Len())
	if raw := a.Raw(); a.ElemType() == gguf.ValueFloat32 && len(raw) == 4*len(out) {
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	}
	for i := range out {
		x, err := a.Float64(i)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: key %s[%d]: %w", key, i, err)
		}
		out[i] = float32(x)
	}
	return out, nil
}

func intArray(f *gguf.File, key string) ([]int32, error) {
	a, ok, err := arrayKey(f, key)
	if !ok || err != nil {
		return nil, err
	}
	out := make([]int32, a.Len())
	if raw := a.Raw(); a.ElemType() == gguf.ValueInt32 && len(raw) == 4*len(out) {
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return out, nil
	}
	for i := range out {
		x, err := a.Int64(i)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: key %s[%d]: %w", key, i, err)
		}
		out[i] = int32(x)
	}
	return out, nil
}
