package main

/*
#include <stdlib.h>
#include "moonlm.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The Go halves of the session-state functions: prefix reuse, stats,
// tokens, fork, and saving and loading a state (moonlm_state.c holds the
// C wrappers).

// maxStateBytes bounds a state buffer's size from C (64 TiB): a larger
// one is a caller's bug, not a state.
const maxStateBytes = 1 << 46

// stateLacks is the refusal of a session whose backend is no stateSession.
const stateLacks = "this session's backend cannot reuse, fork or save its state"

//export moonlmgo_prefill_reuse
func moonlmgo_prefill_reuse(h C.uintptr_t, toks *C.int32_t, n C.size_t, logits *C.float, lcap C.size_t, nEval *C.size_t) C.int {
	const fn = "moonlm_prefill_reuse"
	if nEval != nil {
		*nEval = 0 // also when the handle is refused
	}
	return onSession(fn, h, stateLacks, func(o *cSession, ss stateSession) C.int {
		out, st := o.prefillArgs(fn, toks, n, logits, lcap)
		if st != stOK {
			return st
		}
		if st := checkTokens(fn, o.toks, o.nVocab); st != stOK {
			return st
		}
		if nCtx := o.s.NCtx(); len(o.toks) > nCtx {
			return fail(stContextFull, fn, "%d tokens do not fit in the context of %d", len(o.toks), nCtx)
		}
		evalled, err := ss.PrefillReuse(o.toks, out)
		if err != nil {
			if statusOf(err) == stCancelled {
				return fail(stCancelled, fn, "cancelled by moonlm_session_cancel (%v)", err)
			}
			return failErr(fn, err)
		}
		if nEval != nil {
			*nEval = C.size_t(evalled)
		}
		return stOK
	})
}

//export moonlmgo_session_stats
func moonlmgo_session_stats(h C.uintptr_t, out *C.moonlm_session_stats) C.int {
	const fn = "moonlm_session_stats_get"
	return onSession(fn, h, stateLacks, func(o *cSession, ss stateSession) C.int {
		s := ss.Stats()
		out.n_pos = C.uint64_t(o.s.Pos())
		out.n_ctx = C.uint64_t(o.s.NCtx())
		out.n_evaluated = C.uint64_t(s.Evaluated)
		out.n_reused = C.uint64_t(s.Reused)
		return stOK
	})
}

//export moonlmgo_session_tokens
func moonlmgo_session_tokens(h C.uintptr_t, buf *C.int32_t, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_session_tokens"
	return onSession(fn, h, stateLacks, func(_ *cSession, ss stateSession) C.int {
		if buf == nil && cap != 0 {
			return fail(stInvalid, fn, "tokens is NULL but cap is %d", cap)
		}
		toks, err := ss.Tokens()
		if err != nil {
			return failErr(fn, err)
		}
		if nOut != nil {
			*nOut = C.size_t(len(toks))
		}
		if uint64(cap) < uint64(len(toks)) {
			return fail(stBufferTooSmall, fn, "the session holds %d tokens; cap is %d", len(toks), cap)
		}
		if len(toks) > 0 {
			copy(unsafe.Slice((*int32)(unsafe.Pointer(buf)), len(toks)), toks)
		}
		return stOK
	})
}

//export moonlmgo_session_fork
func moonlmgo_session_fork(h C.uintptr_t, out *C.uintptr_t) C.int {
	const fn = "moonlm_session_fork"
	return onSession(fn, h, stateLacks, func(o *cSession, ss stateSession) C.int {
		f, err := ss.Fork()
		if err != nil {
			return failErr(fn, err)
		}
		// The fork holds its own reference to the model, as a new session does.
		o.model.n.Add(1)
		fo := &cSession{s: f, model: o.model, nVocab: o.nVocab}
		fo.n.Store(1)
		*out = C.uintptr_t(sessions.add(fo))
		return stOK
	})
}

//export moonlmgo_session_state_size
func moonlmgo_session_state_size(h C.uintptr_t, size *C.size_t) C.int {
	const fn = "moonlm_session_state_size"
	return onSession(fn, h, stateLacks, func(_ *cSession, ss stateSession) C.int {
		n, err := ss.StateSize()
		if err != nil {
			return failErr(fn, err)
		}
		*size = C.size_t(n)
		return stOK
	})
}

// cBuffer is an io.Writer over caller memory that must not be overrun.
type cBuffer struct {
	b []byte
	n int
}

func (w *cBuffer) Write(p []byte) (int, error) {
	if len(p) > len(w.b)-w.n {
		return 0, fmt.Errorf("the state grew past the %d bytes measured", len(w.b))
	}
	w.n += copy(w.b[w.n:], p)
	return len(p), nil
}

//export moonlmgo_session_state_save
func moonlmgo_session_state_save(h C.uintptr_t, buf unsafe.Pointer, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_session_state_save"
	return onSession(fn, h, stateLacks, func(_ *cSession, ss stateSession) C.int {
		if buf == nil && cap != 0 {
			return fail(stInvalid, fn, "buf is NULL but cap is %d", cap)
		}
		size, err := ss.StateSize()
		if err != nil {
			return failErr(fn, err)
		}
		if nOut != nil {
			*nOut = C.size_t(size)
		}
		if uint64(cap) < uint64(size) {
			return fail(stBufferTooSmall, fn, "the state is %d bytes; cap is %d", size, cap)
		}
		w := &cBuffer{b: unsafe.Slice((*byte)(buf), int(size))}
		if _, err := ss.WriteState(w); err != nil {
			return failErr(fn, err)
		}
		return stOK
	})
}

//export moonlmgo_session_state_load
func moonlmgo_session_state_load(h C.uintptr_t, buf unsafe.Pointer, n C.size_t) C.int {
	const fn = "moonlm_session_state_load"
	return onSession(fn, h, stateLacks, func(_ *cSession, ss stateSession) C.int {
		if buf == nil && n != 0 {
			return fail(stInvalid, fn, "buf is NULL but n is %d", n)
		}
		if uint64(n) > maxStateBytes {
			return fail(stInvalid, fn, "n is %d, more than any state (%d): a negative or uninitialised value?", uint64(n), uint64(maxStateBytes))
		}
		var data []byte
		if n > 0 {
			data = unsafe.Slice((*byte)(buf), int(n))
		}
		if err := ss.LoadState(data); err != nil {
			return failErr(fn, err)
		}
		return stOK
	})
}

//export moonlmgo_session_state_file
func moonlmgo_session_state_file(h C.uintptr_t, path *C.char, save C.int) C.int {
	fn := "moonlm_session_state_load_file"
	if save != 0 {
		fn = "moonlm_session_state_save_file"
	}
	return onSession(fn, h, stateLacks, func(_ *cSession, ss stateSession) C.int {
		if path == nil {
			return fail(stInvalid, fn, "path is NULL")
		}
		p := C.GoString(path)
		if p == "" {
			return fail(stInvalid, fn, "path is empty")
		}
		var err error
		if save != 0 {
			err = ss.SaveStateFile(p)
		} else {
			err = ss.LoadStateFile(p)
		}
		if err != nil {
			return failErr(fn, err)
		}
		return stOK
	})
}
