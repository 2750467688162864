package main

/*
#include <string.h>
#include "moonlm.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Embeddings and reranking: texts or token lists in, pooled vectors (or
// every token's, or reranker scores) out in one caller buffer of floats.

// embedModel is what a backend model offers for embeddings (the engine's
// does; a backend without it reports MOONLM_UNSUPPORTED).
type embedModel interface {
	// EmbedSize is one vector's length for pooling (moonlm_pooling).
	EmbedSize(pooling int) (int, error)
	// EmbedTokenize tokenizes a text as embedding frames it (special
	// tokens added, special-token text not parsed).
	EmbedTokenize(text string) ([]int32, error)
	// EmbedTokens embeds each token list as its own sequence.
	EmbedTokens(seqs [][]int32, pooling int, normalize bool) ([][]float32, error)
	// RerankTokens is the token list a reranker scores for a pair.
	RerankTokens(query, doc string) ([]int32, error)
}

// maxEmbedTexts bounds how many texts one call embeds (each is a sequence
// of at least one token, computed in turn).
const maxEmbedTexts = 1 << 20

// embedLacks is the refusal of a model whose backend is no embedModel.
const embedLacks = "this library's backend has no embeddings"

//export moonlmgo_embed_size
func moonlmgo_embed_size(h C.uintptr_t, pooling C.int32_t, nOut *C.size_t) C.int {
	const fn = "moonlm_embed_size"
	return onModel(fn, h, embedLacks, func(em embedModel) C.int {
		if nOut == nil {
			return fail(stInvalid, fn, "n_out is NULL")
		}
		if st := checkPooling(fn, pooling); st != stOK {
			return st
		}
		n, err := em.EmbedSize(int(pooling))
		if err != nil {
			return failErr(fn, err)
		}
		*nOut = C.size_t(n)
		return stOK
	})
}

func checkPooling(fn string, pooling C.int32_t) C.int {
	if pooling < C.MOONLM_POOLING_MODEL || pooling > C.MOONLM_POOLING_RANK {
		return fail(stInvalid, fn, "pooling %d is not a moonlm_pooling (0..%d)", pooling, C.MOONLM_POOLING_RANK)
	}
	return stOK
}

// cTexts reads n texts: NUL-terminated, or lens[i] bytes each; together at
// most maxTextBytes.
func cTexts(fn string, texts **C.char, lens *C.size_t, n C.size_t) ([]string, C.int) {
	if n == 0 {
		return nil, stOK
	}
	if texts == nil {
		return nil, fail(stInvalid, fn, "texts is NULL but n_texts is %d", n)
	}
	ptrs := unsafe.Slice(texts, int(n))
	var ls []C.size_t
	if lens != nil {
		ls = unsafe.Slice(lens, int(n))
	}
	out := make([]string, n)
	total := uint64(0)
	for i, p := range ptrs {
		var b []byte
		var st C.int
		what := fmt.Sprintf("texts[%d]", i)
		if ls != nil {
			if p == nil && ls[i] != 0 {
				return nil, fail(stInvalid, fn, "%s is NULL but its length is %d", what, ls[i])
			}
			b, st = cBytes(fn, what, p, ls[i])
		} else {
			if p == nil {
				return nil, fail(stInvalid, fn, "%s is NULL", what)
			}
			b, st = cStringBounded(fn, what, p)
		}
		if st != stOK {
			return nil, st
		}
		if total += uint64(len(b)); total > maxTextBytes {
			return nil, fail(stInvalid, fn, "the texts are more than %d bytes (64 MiB) together", maxTextBytes)
		}
		out[i] = string(b)
	}
	return out, stOK
}

// cTokenLists copies n token lists: tokens[i] of lens[i] ids (at least one
// each); together at most maxTextBytes ids.
func cTokenLists(fn string, tokens **C.int32_t, lens *C.size_t, n C.size_t) ([][]int32, C.int) {
	if tokens == nil || lens == nil {
		return nil, fail(stInvalid, fn, "tokens or n_tokens is NULL but n_texts is %d", n)
	}
	ptrs := unsafe.Slice(tokens, int(n))
	ls := unsafe.Slice(lens, int(n))
	out := make([][]int32, n)
	total := uint64(0)
	for i, p := range ptrs {
		if ls[i] == 0 {
			return nil, fail(stInvalid, fn, "text %d has no tokens", i)
		}
		if p == nil {
			return nil, fail(stInvalid, fn, "tokens[%d] is NULL but n_tokens[%d] is %d", i, i, ls[i])
		}
		if total += uint64(ls[i]); total > maxTextBytes {
			return nil, fail(stInvalid, fn, "the token lists hold more than %d ids together", maxTextBytes)
		}
		out[i] = append([]int32(nil), cTokens(p, ls[i])...)
	}
	return out, stOK
}

//export moonlmgo_embed
func moonlmgo_embed(h C.uintptr_t, byTokens C.int, texts **C.char, lens *C.size_t, n C.size_t, tokens **C.int32_t, nTokens *C.size_t,
	pooling C.int32_t, flags C.uint32_t, out *C.float, cap C.size_t, nOut *C.size_t) C.int {
	fn := "moonlm_embed"
	if byTokens != 0 {
		fn = "moonlm_embed_tokens"
	}
	return onModel(fn, h, embedLacks, func(em embedModel) C.int {
		if st := checkPooling(fn, pooling); st != stOK {
			return st
		}
		if flags&^C.MOONLM_EMBED_NORMALIZE != 0 {
			return fail(stInvalid, fn, "unknown flags %#x", uint32(flags&^C.MOONLM_EMBED_NORMALIZE))
		}
		if out == nil && cap != 0 {
			return fail(stInvalid, fn, "out is NULL but cap is %d", cap)
		}
		if uint64(n) > maxEmbedTexts {
			return fail(stInvalid, fn, "n_texts is %d, more than %d", uint64(n), maxEmbedTexts)
		}
		var seqs [][]int32
		if byTokens != 0 {
			if n > 0 {
				var st C.int
				if seqs, st = cTokenLists(fn, tokens, nTokens, n); st != stOK {
					return st
				}
			}
		} else {
			ts, st := cTexts(fn, texts, lens, n)
			if st != stOK {
				return st
			}
			seqs = make([][]int32, len(ts))
			for i, t := range ts {
				ids, err := em.EmbedTokenize(t)
				if err != nil {
					return failErr(fn, fmt.Errorf("text %d: %w", i, err))
				}
				if len(ids) == 0 {
					return fail(stInvalid, fn, "text %d has no tokens (the model adds no special tokens to an empty text)", i)
				}
				seqs[i] = ids
			}
		}
		return embedInto(fn, em, seqs, int(pooling), flags&C.MOONLM_EMBED_NORMALIZE != 0, out, cap, nOut, false)
	})
}

// embedInto checks the caller's buffer against what seqs need, then embeds
// them into it (with firstOnly, each result's first value: rank scores).
func embedInto(fn string, em embedModel, seqs [][]int32, pooling int, normalize bool, out *C.float, cap C.size_t, nOut *C.size_t, firstOnly bool) C.int {
	size, err := em.EmbedSize(pooling)
	if err != nil {
		return failErr(fn, err)
	}
	need := uint64(len(seqs)) * uint64(size)
	if firstOnly {
		need = uint64(len(seqs))
	} else if pooling == C.MOONLM_POOLING_NONE {
		need = 0
		for _, s := range seqs {
			need += uint64(len(s)) * uint64(size)
		}
	}
	if nOut != nil {
		*nOut = C.size_t(need)
	}
	if uint64(cap) < need {
		return fail(stBufferTooSmall, fn, "the result is %d floats; cap is %d", need, cap)
	}
	if len(seqs) == 0 {
		return stOK
	}
	res, err := em.EmbedTokens(seqs, pooling, normalize)
	if err != nil {
		return failErr(fn, err)
	}
	dst := unsafe.Slice((*float32)(unsafe.Pointer(out)), int(need))
	k := 0
	for _, r := range res {
		if firstOnly {
			dst[k] = r[0]
			k++
			continue
		}
		k += copy(dst[k:], r)
	}
	return stOK
}

//export moonlmgo_rerank
func moonlmgo_rerank(h C.uintptr_t, query *C.char, docs **C.char, n C.size_t, scores *C.float, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_rerank"
	return onModel(fn, h, embedLacks, func(em embedModel) C.int {
		if query == nil {
			return fail(stInvalid, fn, "query is NULL")
		}
		if scores == nil && cap != 0 {
			return fail(stInvalid, fn, "scores is NULL but cap is %d", cap)
		}
		if uint64(n) > maxEmbedTexts {
			return fail(stInvalid, fn, "n_docs is %d, more than %d", uint64(n), maxEmbedTexts)
		}
		q, st := cStringBounded(fn, "query", query)
		if st != stOK {
			return st
		}
		ds, st := cTexts(fn, docs, nil, n)
		if st != stOK {
			return st
		}
		if _, err := em.EmbedSize(C.MOONLM_POOLING_RANK); err != nil {
			return failErr(fn, err)
		}
		seqs := make([][]int32, len(ds))
		for i, d := range ds {
			ids, err := em.RerankTokens(string(q), d)
			if err != nil {
				return failErr(fn, fmt.Errorf("document %d: %w", i, err))
			}
			seqs[i] = ids
		}
		return embedInto(fn, em, seqs, C.MOONLM_POOLING_RANK, false, scores, cap, nOut, true)
	})
}
