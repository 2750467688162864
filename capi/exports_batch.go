package main

/*
#include <stdlib.h>
#include "moonlm.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/moonlm/moonlm/engine"
)

// The Go halves of the batched-decoding functions (moonlm_batch.c holds
// the C wrappers): several sessions of one model advanced in one forward
// pass through an engine.Batcher.

// maxBatchEntries bounds n_entries: more is a caller's bug (a step holds
// at most the batcher's token capacity anyway).
const maxBatchEntries = 4096

// modelBatchers are a model's batchers, one per KV cache type, made on
// first use and kept with the model; mu serializes the steps.
type modelBatchers struct {
	mu   sync.Mutex
	byKV map[engine.SessionParams]*engine.Batcher
	// Per-call scratch, reused so that a steady step allocates nothing.
	entries []engine.BatchEntry
	owners  []*cSession // the locked session of each entry (nil: none)
	statIdx []int       // the C entry of each engine entry
}

// batcherKey is the part of a session's parameters a batcher depends on.
func batcherKey(p engine.SessionParams) engine.SessionParams {
	return engine.SessionParams{KVType: p.KVType, KVF32: p.KVF32}
}

// get returns the batcher for sessions with parameters p.
func (b *modelBatchers) get(m *engine.Model, p engine.SessionParams) (*engine.Batcher, error) {
	k := batcherKey(p)
	if bt := b.byKV[k]; bt != nil {
		return bt, nil
	}
	bt, err := m.NewBatcher(k)
	if err != nil {
		return nil, err
	}
	if b.byKV == nil {
		b.byKV = map[engine.SessionParams]*engine.Batcher{}
	}
	b.byKV[k] = bt
	return bt, nil
}

func (b *modelBatchers) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, bt := range b.byKV {
		bt.Close()
		delete(b.byKV, k)
	}
}

// engineModelOf returns o's engine model, or a status for another backend.
func engineModelOf(fn string, o *cModel) (*engine.Model, C.int) {
	em, ok := o.m.(engineModel)
	if !ok {
		return nil, fail(stUnsupported, fn, "this model's backend has no batched decoding")
	}
	return em.m, stOK
}

//export moonlmgo_batch_max_tokens
func moonlmgo_batch_max_tokens(h C.uintptr_t, out *C.size_t) (st C.int) {
	const fn = "moonlm_batch_max_tokens"
	defer guard(fn, &st)
	o, st := getModel(fn, h)
	if o == nil {
		return st
	}
	defer o.release()
	m, st := engineModelOf(fn, o)
	if m == nil {
		return st
	}
	o.batch.mu.Lock()
	defer o.batch.mu.Unlock()
	bt, err := o.batch.get(m, engine.SessionParams{})
	if err != nil {
		return failErr(fn, err)
	}
	*out = C.size_t(bt.MaxTokens())
	return stOK
}

//export moonlmgo_batch_decode
func moonlmgo_batch_decode(h C.uintptr_t, base unsafe.Pointer, n, stride C.size_t) (st C.int) {
	const fn = "moonlm_batch_decode"
	defer guard(fn, &st)
	o, st := getModel(fn, h)
	if o == nil {
		return st
	}
	defer o.release()
	enter(fn)
	m, st := engineModelOf(fn, o)
	if m == nil {
		return st
	}
	if uint64(n) > maxBatchEntries {
		return fail(stInvalid, fn, "n_entries is %d, more than %d", uint64(n), maxBatchEntries)
	}
	if n == 0 {
		return stOK
	}
	at := func(i int) *C.moonlm_batch_entry {
		return (*C.moonlm_batch_entry)(unsafe.Add(base, uintptr(i)*uintptr(stride)))
	}
	for i := range int(n) {
		if e := at(i); e.size != stride {
			return fail(stInvalid, fn, "entries[%d].size is %d, entries[0].size %d: every entry must have the same size", i, uint64(e.size), uint64(stride))
		}
	}
	b := &o.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries, b.owners, b.statIdx = b.entries[:0], b.owners[:0], b.statIdx[:0]
	first, firstMsg := stOK, ""
	// failAt records entry i's failure: its status, the session's last
	// error (when the entry locked one) and the call's first failure.
	failAt := func(i int, est C.int, so *cSession, msg string) {
		at(i).status = C.moonlm_status(est)
		msg = fmt.Sprintf("%s: entries[%d]: %s", fn, i, msg)
		if so != nil {
			so.lastErr.Store(&msg)
		}
		if first == stOK {
			first, firstMsg = est, msg
		}
	}
	defer func() {
		for _, so := range b.owners {
			so.unlock()
		}
		clear(b.owners)
		clear(b.entries)
	}()
	var bt *engine.Batcher
	for i := range int(n) {
		e := at(i)
		e.status = C.moonlm_status(stOK)
		so, est := lockSession(fn, C.uintptr_t(uintptr(unsafe.Pointer(e.session))))
		if so == nil {
			failAt(i, est, nil, C.GoString(C.moonlm_last_error()))
			continue
		}
		es, ok := so.s.(engineSession)
		msg := ""
		switch {
		case !ok || so.model != o:
			est, msg = stInvalid, "the session belongs to another model"
		case e.n_tokens == 0 || e.tokens == nil:
			est, msg = stInvalid, fmt.Sprintf("no tokens (tokens %p, n_tokens %d)", e.tokens, uint64(e.n_tokens))
		case uint64(e.n_tokens) > maxCount:
			est, msg = stInvalid, fmt.Sprintf("n_tokens is %d, more than %d", uint64(e.n_tokens), maxCount)
		case e.logits != nil && uint64(e.logits_cap) < uint64(so.nVocab):
			est, msg = stBufferTooSmall, fmt.Sprintf("logits_cap is %d floats; the vocabulary needs %d", uint64(e.logits_cap), so.nVocab)
		}
		if est == stOK && bt == nil {
			var err error
			if bt, err = b.get(m, es.s.Params()); err != nil {
				est, msg = statusOf(err), err.Error()
			}
		}
		if est != stOK {
			failAt(i, est, so, msg)
			so.unlock()
			continue
		}
		// Copy: the tokens are the caller's memory.
		so.toks = append(so.toks[:0], cTokens(e.tokens, e.n_tokens)...)
		entry := engine.BatchEntry{Session: es.s, Tokens: so.toks}
		// continues lies past the first struct's end: a caller of that
		// size has none (moonlm_batch.c accepts no size in between).
		if uintptr(stride) >= unsafe.Sizeof(*e) {
			entry.Continues = e.continues != 0
		}
		if e.logits != nil {
			entry.Logits = unsafe.Slice((*float32)(unsafe.Pointer(e.logits)), so.nVocab)
		}
		b.entries = append(b.entries, entry)
		b.owners = append(b.owners, so)
		b.statIdx = append(b.statIdx, i)
	}
	if len(b.entries) > 0 {
		err := bt.Step(b.entries)
		for k, so := range b.owners {
			if ee := b.entries[k].Err; ee != nil {
				failAt(b.statIdx[k], statusOf(ee), so, ee.Error())
			} else {
				so.lastErr.Store(noError)
			}
		}
		if err != nil && first == stOK {
			return failErr(fn, err)
		}
	}
	if first != stOK {
		setError(firstMsg)
	}
	return first
}
