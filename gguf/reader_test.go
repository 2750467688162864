package gguf

import (
	"errors"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenStories260K checks the reader on a real model whose layout the
// shared test data README documents (llama, dim 64, 5 layers, all F32).
func TestOpenStories260K(t *testing.T) {
	f, err := Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()

	assert.Equal(t, uint32(3), f.Version)
	assert.Equal(t, int64(32), f.Alignment)
	assert.Zero(t, f.DataOffset%f.Alignment)

	v, ok := f.Lookup("general.architecture")
	require.True(t, ok)
	arch, err := v.String()
	require.NoError(t, err)
	assert.Equal(t, "llama", arch)

	v, ok = f.Lookup("llama.embedding_length")
	require.True(t, ok)
	dim, err := v.Uint64()
	require.NoError(t, err)
	assert.Equal(t, uint64(64), dim)

	v, ok = f.Lookup("llama.block_count")
	require.True(t, ok)
	nl, err := v.Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(5), nl)

	_, ok = f.Lookup("llama.rope.freq_base")
	assert.False(t, ok, "README says the key is absent")

	v, ok = f.Lookup("tokenizer.ggml.tokens")
	require.True(t, ok)
	toks, err := v.Array()
	require.NoError(t, err)
	assert.Equal(t, ValueString, toks.ElemType())
	assert.Equal(t, 512, toks.Len())
	for i := 0; i < toks.Len(); i++ {
		_, err := toks.String(i)
		require.NoError(t, err, "token %d", i)
	}
	_, err = toks.String(512)
	assert.Error(t, err)

	keys := f.Keys()
	require.NotEmpty(t, keys)
	assert.Contains(t, keys, "general.architecture")
	for _, k := range keys {
		_, ok := f.Lookup(k)
		assert.True(t, ok, k)
	}

	ts := f.Tensors()
	require.NotEmpty(t, ts)
	emb, ok := f.Tensor("token_embd.weight")
	require.True(t, ok)
	assert.Equal(t, F32, emb.Type)
	assert.Equal(t, []int64{64, 512}, emb.Shape)
	assert.Len(t, emb.Data, 64*512*4)
	out, ok := f.Tensor("output.weight")
	require.True(t, ok)
	assert.Equal(t, []int64{64, 512}, out.Shape)
	ffn, ok := f.Tensor("blk.0.ffn_gate.weight")
	require.True(t, ok)
	assert.Equal(t, []int64{64, 172}, ffn.Shape)
	for _, tn := range ts {
		assert.Equal(t, F32, tn.Type, tn.Name)
		assert.Zero(t, (tn.Offset-f.DataOffset)%f.Alignment, tn.Name)
		assert.Equal(t, tn.NumElements()*4, int64(len(tn.Data)), tn.Name)
	}
	require.NoError(t, f.Close())
	require.NoError(t, f.Close())
	_, err = v.Array()
	assert.ErrorIs(t, err, ErrClosed)
}

func TestOpenQwen3Vocab(t *testing.T) {
	f, err := Open(shareddata.Path(t, "vocab/ggml-vocab-qwen3.gguf"))
	require.NoError(t, err)
	defer f.Close()
	assert.Empty(t, f.Tensors())
	v, ok := f.Lookup("tokenizer.ggml.tokens")
	require.True(t, ok)
	toks, err := v.Array()
	require.NoError(t, err)
	assert.Equal(t, 151669, toks.Len(), "README: 151,669 tokens")
	b, err := toks.StringBytes(0)
	require.NoError(t, err)
	assert.Equal(t, "!", string(b))
	v, ok = f.Lookup("tokenizer.ggml.pre")
	require.True(t, ok)
	pre, err := v.String()
	require.NoError(t, err)
	assert.Equal(t, "qwen2", pre)
	v, ok = f.Lookup("tokenizer.ggml.merges")
	require.True(t, ok)
	merges, err := v.Array()
	require.NoError(t, err)
	require.Greater(t, merges.Len(), 100000)
	last, err := merges.String(merges.Len() - 1)
	require.NoError(t, err)
	assert.Contains(t, last, " ")
}

func BenchmarkOpenQwen3Vocab(b *testing.B) {
	path := shareddata.Path(b, "vocab/ggml-vocab-qwen3.gguf")
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func TestErrorClasses(t *testing.T) {
	_, err := Parse([]byte("GGUF\x04\x00\x00\x00"))
	assert.ErrorIs(t, err, ErrUnsupported)
	assert.False(t, errors.Is(err, ErrFormat))
	_, err = Parse([]byte("GGML\x03\x00\x00\x00"))
	assert.ErrorIs(t, err, ErrFormat)
}

// TestOpenQwen3VocabAllocs holds opening a 150k-token vocabulary to a
// handful of allocations (at most 100), and reading a token
// to none.
func TestOpenQwen3VocabAllocs(t *testing.T) {
	path := shareddata.Path(t, "vocab/ggml-vocab-qwen3.gguf")
	allocs := testing.AllocsPerRun(5, func() {
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	})
	assert.Less(t, allocs, 100.0)

	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	v, _ := f.Lookup("tokenizer.ggml.tokens")
	toks, err := v.Array()
	require.NoError(t, err)
	_, err = toks.StringBytes(0) // builds the index once
	require.NoError(t, err)
	i := 0
	allocs = testing.AllocsPerRun(1000, func() {
		if _, err := toks.StringBytes(i % toks.Len()); err != nil {
			t.Fatal(err)
		}
		i += 97
	})
	assert.Zero(t, allocs)
}

// TestConcurrentArrayAccess reads one string array from many goroutines,
// racing the lazy index build (run with -race).
func TestConcurrentArrayAccess(t *testing.T) {
	w := NewWriter()
	strs := make([]string, 1000)
	for i := range strs {
		strs[i] = string(rune('a'+i%26)) + "x"
	}
	require.NoError(t, w.Set("s", strs))
	f, err := Parse(writeFile(t, w))
	require.NoError(t, err)
	done := make(chan error)
	for g := 0; g < 8; g++ {
		go func(g int) {
			v, _ := f.Lookup("s")
			a, err := v.Array()
			if err == nil {
				for i := g; i < a.Len() && err == nil; i += 3 {
					var s string
					if s, err = a.String(i); err == nil && s != strs[i] {
						err = errors.New("wrong string " + s)
					}
				}
			}
			done <- err
		}(g)
	}
	for g := 0; g < 8; g++ {
		assert.NoError(t, <-done)
	}
}

// BenchmarkVocabStrings reads every token of the qwen3 vocabulary, as a
// tokenizer loading it does.
func BenchmarkVocabStrings(b *testing.B) {
	f, err := Open(shareddata.Path(b, "vocab/ggml-vocab-qwen3.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		v, _ := f.Lookup("tokenizer.ggml.tokens")
		a, _ := v.Array()
		n := 0
		for i := 0; i < a.Len(); i++ {
			s, err := a.StringBytes(i)
			if err != nil {
				b.Fatal(err)
			}
			n += len(s)
		}
	}
}

// TestForEachString checks the sequential walk against indexed access on a
// real vocabulary.
func TestForEachString(t *testing.T) {
	f, err := Open(shareddata.Path(t, "vocab/ggml-vocab-llama-spm.gguf"))
	require.NoError(t, err)
	defer f.Close()
	v, _ := f.Lookup("tokenizer.ggml.tokens")
	a, err := v.Array()
	require.NoError(t, err)
	n := 0
	require.NoError(t, a.ForEachString(func(i int, b []byte) error {
		want, err := a.StringBytes(i)
		if err != nil {
			return err
		}
		require.Equal(t, string(want), string(b), "token %d", i)
		n++
		return nil
	}))
	assert.Equal(t, a.Len(), n)
	stop := errors.New("stop")
	assert.Equal(t, stop, a.ForEachString(func(i int, b []byte) error { return stop }))
	s, _ := f.Lookup("tokenizer.ggml.scores")
	sa, err := s.Array()
	require.NoError(t, err)
	assert.Error(t, sa.ForEachString(func(int, []byte) error { return nil }))
}
