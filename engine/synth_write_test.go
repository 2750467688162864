package engine

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// addSynthTensor adds vals to w as tensor name: quantized row by row (rows
// of shape[0] values) when typ is a block type, else as little-endian F32.
// Every synthetic-model writer goes through it, so the bytes of a tensor
// depend only on its values and type.
func addSynthTensor(t testing.TB, w *gguf.Writer, name string, typ gguf.Type, shape []int64, vals []float32) {
	t.Helper()
	if typ == gguf.F32 {
		data := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		}
		require.NoError(t, w.AddTensor(name, gguf.F32, shape, data))
		return
	}
	n := int(shape[0])
	rb64, err := typ.RowBytes(int64(n))
	require.NoError(t, err)
	rb := int(rb64)
	rows := len(vals) / n
	data := make([]byte, rows*rb)
	for r := 0; r < rows; r++ {
		kernels.QuantizeWeightRow(typ, vals[r*n:(r+1)*n], data[r*rb:(r+1)*rb])
	}
	require.NoError(t, w.AddTensor(name, typ, shape, data))
}

// setSynthTail sets the keys every synthetic decoder ends its metadata with,
// in this order: the spec's own keys under arch, the tokenizer's keys (which
// must hold 512 tokens), the vocabulary size and, for a quantized file, the
// quantization version. It returns the vocabulary size.
func setSynthTail(t testing.TB, tokFile *gguf.File, set func(string, any), arch string, keys []synthKey, q8 bool) int {
	t.Helper()
	for _, k := range keys {
		set(arch+"."+k.name, k.v)
	}
	vocab := copySynthTokenizer(t, tokFile, set)
	require.Equal(t, 512, vocab)
	set(arch+".vocab_size", uint32(vocab))
	if q8 {
		set("general.quantization_version", uint32(2))
	}
	return vocab
}

// copySynthTokenizer copies every tokenizer.* key of tokFile through set,
// in the file's order, and returns the vocabulary size.
func copySynthTokenizer(t testing.TB, tokFile *gguf.File, set func(string, any)) int {
	t.Helper()
	vocab := 0
	for _, k := range tokFile.Keys() {
		if strings.HasPrefix(k, "tokenizer.") {
			v, _ := tokFile.Lookup(k)
			set(k, v)
			if k == "tokenizer.ggml.tokens" {
				arr, err := v.Array()
				require.NoError(t, err)
				vocab = arr.Len()
			}
		}
	}
	return vocab
}

// writeTempGGUF writes w to a file called name in the test's temporary
// directory and returns its path.
func writeTempGGUF(t *testing.T, w *gguf.Writer, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = w.WriteTo(out)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}
