package abitest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

// EmbedParams mirrors moonlm_embed_params.
type EmbedParams struct {
	Size    uintptr
	Pooling int32
	Flags   uint32
}

// Pooling values and flags of include/moonlm.h.
const (
	PoolingModel int32 = iota
	PoolingNone
	PoolingMean
	PoolingCLS
	PoolingLast
	PoolingRank

	EmbedNormalize uint32 = 1
)

// embedFuncs are the embedding entry points, registered from the library
// lib() loaded.
type embedFuncs struct {
	paramsInit  func(p *EmbedParams, size uintptr)
	size        func(m uintptr, pooling int32, nOut *uintptr) int32
	embed       func(m uintptr, texts **byte, lens *uintptr, n uintptr, p *EmbedParams, out *float32, cap uintptr, nOut *uintptr) int32
	embedTokens func(m uintptr, toks **int32, lens *uintptr, n uintptr, p *EmbedParams, out *float32, cap uintptr, nOut *uintptr) int32
	rerank      func(m uintptr, query *byte, docs **byte, n uintptr, out *float32, cap uintptr, nOut *uintptr) int32
}

func embedAPI(t *testing.T, l *Lib) embedFuncs {
	h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	require.NoError(t, err)
	var f embedFuncs
	purego.RegisterLibFunc(&f.paramsInit, h, "moonlm_embed_params_init")
	purego.RegisterLibFunc(&f.size, h, "moonlm_embed_size")
	purego.RegisterLibFunc(&f.embed, h, "moonlm_embed")
	purego.RegisterLibFunc(&f.embedTokens, h, "moonlm_embed_tokens")
	purego.RegisterLibFunc(&f.rerank, h, "moonlm_rerank")
	return f
}

// synthBert opens the engine's generated synthetic BERT (Q8_0) and reads
// its llama.cpp references.
func synthBert(t *testing.T, l *Lib) (uintptr, *embedRefFile) {
	return synthEncoder(t, l, "synth-bert")
}

// synthEncoder opens the engine's generated synthetic encoder NAME (its
// Q8_0 file) and reads its llama.cpp references.
func synthEncoder(t *testing.T, l *Lib, name string) (uintptr, *embedRefFile) {
	root, err := repoRoot()
	require.NoError(t, err)
	dir := filepath.Join(root, "engine", "testdata", "synth")
	b, err := os.ReadFile(filepath.Join(dir, name+"-Q8_0.embed.json"))
	require.NoError(t, err)
	var ref embedRefFile
	require.NoError(t, json.Unmarshal(b, &ref))
	var m uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	requireStatus(t, l, OK, l.ModelOpen(shareddata.SynthModel(t, name+"-Q8_0.gguf"), nil, &m), "open "+name)
	t.Cleanup(func() { l.ModelFree(m) })
	return m, &ref
}

// moonlm_rerank on a jina-bert-v2 reranker (jina-reranker-v1's head: cls
// of one output, no cls.output) gives llama.cpp's scores under the Q8_0
// rule, one per document, several documents in one call.
func TestRerankJinaAgainstLlamaCpp(t *testing.T) {
	l := lib(t)
	f := embedAPI(t, l)
	m, ref := synthEncoder(t, l, "synth-jina-reranker")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var one uintptr
	requireStatus(t, l, OK, f.size(m, PoolingRank, &one), "rank size")
	require.Equal(t, uintptr(1), one)
	checked := 0
	for _, c := range ref.Cases {
		if c.Pooling != "rank" {
			continue
		}
		var want [][]float32
		require.NoError(t, json.Unmarshal(c.Embeddings, &want))
		// The pairs share the first query: score its documents together.
		var docs []string
		var idx []int
		for i, pair := range c.Pairs {
			if pair[0] == c.Pairs[0][0] {
				docs, idx = append(docs, pair[1]), append(idx, i)
			}
		}
		ptrs, keep := cStrings(docs)
		scores := make([]float32, len(docs))
		var n uintptr
		requireStatus(t, l, OK, f.rerank(m, cstr(c.Pairs[0][0]), &ptrs[0], uintptr(len(ptrs)), &scores[0], uintptr(len(scores)), &n), "rerank")
		runtime.KeepAlive(keep)
		require.Equal(t, uintptr(len(docs)), n)
		for k, i := range idx {
			assert.InDelta(t, want[i][0], scores[k], 3e-2, "pair %d", i)
		}
		checked += len(idx)
	}
	require.Greater(t, checked, 1, "rank pairs of one query in the references")
}

type embedRefFile struct {
	Cases []struct {
		Pooling    string          `json:"pooling"`
		Normalize  int             `json:"normalize"`
		Texts      []string        `json:"texts"`
		Pairs      [][2]string     `json:"pairs"`
		Tokens     [][]int32       `json:"tokens"`
		Embeddings json.RawMessage `json:"embeddings"`
	} `json:"cases"`
}

func cosineSim(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// cStrings makes NUL-terminated copies of ss and an array of pointers to
// them (kept alive by the returned slices).
func cStrings(ss []string) ([]*byte, [][]byte) {
	ptrs := make([]*byte, len(ss))
	keep := make([][]byte, len(ss))
	for i, s := range ss {
		keep[i] = append([]byte(s), 0)
		ptrs[i] = &keep[i][0]
	}
	return ptrs, keep
}

// The struct as the C compiler lays it out and the defaults _init writes.
func TestEmbedParamsLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
int main(void) {
	printf("%zu %zu %zu %d %d %d %d %d %d %u\n", sizeof(moonlm_embed_params), offsetof(moonlm_embed_params, pooling),
	       offsetof(moonlm_embed_params, flags), MOONLM_POOLING_MODEL, MOONLM_POOLING_NONE, MOONLM_POOLING_MEAN,
	       MOONLM_POOLING_CLS, MOONLM_POOLING_LAST, MOONLM_POOLING_RANK, MOONLM_EMBED_NORMALIZE);
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var p EmbedParams
	assert.Equal(t, fmt.Sprintf("%d %d %d 0 1 2 3 4 5 1\n", unsafe.Sizeof(p), unsafe.Offsetof(p.Pooling), unsafe.Offsetof(p.Flags)), string(out))
	f := embedAPI(t, l)
	p = EmbedParams{Pooling: 9, Flags: 9}
	f.paramsInit(&p, unsafe.Sizeof(p))
	assert.Equal(t, EmbedParams{Size: unsafe.Sizeof(p)}, p)
}

// moonlm_embed through the ABI gives llama.cpp's vectors (the Q8_0 rule:
// cosine >= 0.999) for every pooled case, with the size protocol.
func TestEmbedAgainstLlamaCpp(t *testing.T) {
	l := lib(t)
	f := embedAPI(t, l)
	m, ref := synthBert(t, l)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var dim uintptr
	requireStatus(t, l, OK, f.size(m, PoolingModel, &dim), "embed size")
	require.Equal(t, uintptr(256), dim)
	var one uintptr
	requireStatus(t, l, OK, f.size(m, PoolingRank, &one), "rank size")
	require.Equal(t, uintptr(1), one)
	pool := map[string]int32{"mean": PoolingMean, "cls": PoolingCLS, "last": PoolingLast, "none": PoolingNone}
	checked := 0
	for _, c := range ref.Cases {
		if c.Pooling == "rank" {
			var want [][]float32
			require.NoError(t, json.Unmarshal(c.Embeddings, &want))
			for i, pair := range c.Pairs {
				docs, keep := cStrings([]string{pair[1]})
				var score [1]float32
				var n uintptr
				requireStatus(t, l, OK, f.rerank(m, cstr(pair[0]), &docs[0], 1, &score[0], 1, &n), "rerank")
				runtime.KeepAlive(keep)
				assert.Equal(t, uintptr(1), n)
				assert.InDelta(t, want[i][0], score[0], 3e-2, "pair %d", i)
			}
			checked++
			continue
		}
		p := EmbedParams{Size: unsafe.Sizeof(EmbedParams{}), Pooling: pool[c.Pooling]}
		if c.Normalize == 2 {
			p.Flags = EmbedNormalize
		}
		ptrs, keep := cStrings(c.Texts)
		var need uintptr
		requireStatus(t, l, BufferTooSmall, f.embed(m, &ptrs[0], nil, uintptr(len(ptrs)), &p, nil, 0, &need), "size query")
		out := make([]float32, need)
		var n uintptr
		requireStatus(t, l, OK, f.embed(m, &ptrs[0], nil, uintptr(len(ptrs)), &p, &out[0], need, &n), "embed "+c.Pooling)
		runtime.KeepAlive(keep)
		require.Equal(t, need, n)
		var want [][]float32
		if c.Pooling == "none" {
			var rows [][][]float32
			require.NoError(t, json.Unmarshal(c.Embeddings, &rows))
			for _, r := range rows {
				want = append(want, r...)
			}
		} else {
			require.NoError(t, json.Unmarshal(c.Embeddings, &want))
		}
		require.Equal(t, uintptr(len(want))*dim, n)
		for i, w := range want {
			cos := cosineSim(out[uintptr(i)*dim:uintptr(i+1)*dim], w)
			assert.GreaterOrEqual(t, cos, 0.999, "%s/%d vector %d", c.Pooling, c.Normalize, i)
		}
		checked++
	}
	assert.Equal(t, len(ref.Cases), checked)

	// Token lists give the same vectors as the texts they come from.
	c := ref.Cases[0]
	ptrs, keep := cStrings(c.Texts)
	p := EmbedParams{Size: unsafe.Sizeof(EmbedParams{}), Pooling: PoolingMean, Flags: EmbedNormalize}
	byText := make([]float32, uintptr(len(c.Texts))*dim)
	requireStatus(t, l, OK, f.embed(m, &ptrs[0], nil, uintptr(len(ptrs)), &p, &byText[0], uintptr(len(byText)), nil), "by text")
	runtime.KeepAlive(keep)
	toks := make([]*int32, len(c.Tokens))
	lens := make([]uintptr, len(c.Tokens))
	for i, tk := range c.Tokens {
		toks[i], lens[i] = &tk[0], uintptr(len(tk))
	}
	byTokens := make([]float32, len(byText))
	requireStatus(t, l, OK, f.embedTokens(m, &toks[0], &lens[0], uintptr(len(toks)), &p, &byTokens[0], uintptr(len(byTokens)), nil), "by tokens")
	assert.Equal(t, byText, byTokens)
	// Lengths instead of NUL terminators: "hello world" cut to "hello".
	lens5 := []uintptr{5}
	one5 := make([]float32, dim)
	requireStatus(t, l, OK, f.embed(m, &ptrs[0], &lens5[0], 1, nil, &one5[0], dim, nil), "with lens")
	hello, keep2 := cStrings([]string{"hello"})
	want5 := make([]float32, dim)
	requireStatus(t, l, OK, f.embed(m, &hello[0], nil, 1, nil, &want5[0], dim, nil), "hello")
	runtime.KeepAlive(keep2)
	assert.Equal(t, want5, one5)
}

// What moonlm_embed, moonlm_embed_tokens and moonlm_rerank refuse.
func TestEmbedMisuse(t *testing.T) {
	l := lib(t)
	f := embedAPI(t, l)
	m, _ := synthBert(t, l)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptrs, keep := cStrings([]string{"hello", "world"})
	defer runtime.KeepAlive(keep)
	out := make([]float32, 512)
	var n uintptr
	requireStatus(t, l, OK, f.embed(m, &ptrs[0], nil, 0, nil, nil, 0, &n), "no texts")
	assert.Equal(t, uintptr(0), n)
	requireStatus(t, l, InvalidArg, f.embed(m, nil, nil, 2, nil, &out[0], 512, &n), "texts NULL")
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], nil, 2, nil, nil, 512, &n), "out NULL with a cap")
	requireStatus(t, l, BufferTooSmall, f.embed(m, &ptrs[0], nil, 2, nil, &out[0], 511, &n), "one float short")
	assert.Equal(t, uintptr(512), n)
	bad := EmbedParams{Size: unsafe.Sizeof(EmbedParams{}), Pooling: 6}
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], nil, 2, &bad, &out[0], 512, &n), "pooling 6")
	bad = EmbedParams{Size: unsafe.Sizeof(EmbedParams{}), Flags: 2}
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], nil, 2, &bad, &out[0], 512, &n), "unknown flag")
	bad = EmbedParams{Size: 4}
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], nil, 2, &bad, &out[0], 512, &n), "size too small")
	nulls := []*byte{ptrs[0], nil}
	requireStatus(t, l, InvalidArg, f.embed(m, &nulls[0], nil, 2, nil, &out[0], 512, &n), "a NULL text")
	huge := []uintptr{5, 1 << 40}
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], &huge[0], 2, nil, &out[0], 512, &n), "a text length beyond 64 MiB")
	requireStatus(t, l, InvalidArg, f.embed(m, &ptrs[0], nil, 1<<40, nil, &out[0], 512, &n), "absurd n_texts")
	requireStatus(t, l, InvalidArg, f.embed(0, &ptrs[0], nil, 2, nil, &out[0], 512, &n), "no model")

	tok := []int32{101, 99999, 102}
	tp := []*int32{&tok[0]}
	tl := []uintptr{3}
	requireStatus(t, l, InvalidArg, f.embedTokens(m, &tp[0], &tl[0], 1, nil, &out[0], 512, &n), "a token outside the vocabulary")
	tl[0] = 0
	requireStatus(t, l, InvalidArg, f.embedTokens(m, &tp[0], &tl[0], 1, nil, &out[0], 512, &n), "an empty token list")
	long := make([]int32, 513)
	tp[0], tl[0] = &long[0], 513
	requireStatus(t, l, ContextFull, f.embedTokens(m, &tp[0], &tl[0], 1, nil, &out[0], 512, &n), "beyond the 512 learned positions")

	requireStatus(t, l, InvalidArg, f.rerank(m, nil, &ptrs[0], 2, &out[0], 2, &n), "query NULL")
	requireStatus(t, l, BufferTooSmall, f.rerank(m, cstr("q"), &ptrs[0], 2, &out[0], 1, &n), "one score short")
	assert.Equal(t, uintptr(2), n)

	// A decoder has no classifier head.
	dm := openModel(t, l, stories)
	requireStatus(t, l, Unsupported, f.rerank(dm, cstr("q"), &ptrs[0], 2, &out[0], 2, &n), "rerank with a decoder")
	var size uintptr
	requireStatus(t, l, Unsupported, f.size(dm, PoolingRank, &size), "rank size of a decoder")
	requireStatus(t, l, OK, f.size(dm, PoolingLast, &size), "a decoder embeds")
	assert.Equal(t, uintptr(64), size)
}
