package main

/*
#include <stdlib.h>
#include <string.h>
#include "moonlm.h"
int moonlmc_call_piece(uintptr_t cb, const char *piece, size_t len, int32_t token, uintptr_t user_data);
int moonlmc_call_progress(uintptr_t cb, float fraction, uintptr_t user_data);
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// The Go halves of the moonlm_* functions (see moonlm.c, which has already
// checked for fork() and copied versioned structs). Every one defers guard
// so that a panic becomes MOONLM_INTERNAL instead of unwinding into C.

// ---- helpers ----------------------------------------------------------------

// writeText stores s NUL-terminated in buf under the (buf, cap, n_out)
// protocol.
func writeText[T string | []byte](fn string, s T, buf *C.char, cap C.size_t, nOut *C.size_t) C.int {
	if buf == nil && cap != 0 {
		return fail(stInvalid, fn, "buf is NULL but cap is %d", cap)
	}
	if nOut != nil {
		*nOut = C.size_t(len(s))
	}
	if uint64(cap) < uint64(len(s))+1 {
		return fail(stBufferTooSmall, fn, "text is %d bytes; cap must be at least %d (text plus NUL), got %d", len(s), len(s)+1, cap)
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(s)+1)
	copy(dst, s)
	dst[len(s)] = 0
	return stOK
}

// cTokens views n C int32s; nil for n == 0.
func cTokens(p *C.int32_t, n C.size_t) []int32 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(p)), int(n))
}

// maxCount bounds element counts from C: a larger one is a caller's bug
// (such as a negative value cast to size_t), reported instead of trusted.
const maxCount = math.MaxInt32

// maxTextBytes bounds the text one call takes (moonlm_tokenize, the
// messages of moonlm_chat_apply_template together): 64 MiB is millions of
// tokens, more than any context, and keeps the work's memory (about 15
// bytes per byte of text) bounded.
const maxTextBytes = 64 << 20

// maxDetokenize bounds the tokens of one moonlm_detokenize call (2^24,
// more than any context), and so the text it builds.
const maxDetokenize = 1 << 24

// maxMessages bounds the messages of one moonlm_chat_apply_template call.
const maxMessages = 1 << 20

// checkCount reports an implausibly large count.
func checkCount(fn, what string, n C.size_t) C.int {
	if uint64(n) > maxCount {
		return fail(stInvalid, fn, "%s is %d, more than %d: a negative or uninitialised value?", what, uint64(n), maxCount)
	}
	return stOK
}

// checkTokens reports the first token outside [0, nVocab).
func checkTokens(fn string, toks []int32, nVocab int) C.int {
	for i, t := range toks {
		if t < 0 || int(t) >= nVocab {
			return fail(stInvalid, fn, "token %d (at index %d) is outside the vocabulary [0, %d)", t, i, nVocab)
		}
	}
	return stOK
}

// ---- models -----------------------------------------------------------------

//export moonlmgo_model_open
func moonlmgo_model_open(path *C.char, p *C.moonlm_model_params, out *C.uintptr_t) (st C.int) {
	const fn = "moonlm_model_open"
	defer guard(fn, &st)
	enter(fn)
	if p.flags != 0 {
		return fail(stInvalid, fn, "moonlm_model_params.flags is %#x; no flags are defined", uint32(p.flags))
	}
	if p.n_threads < 0 || p.n_threads > maxThreads {
		return fail(stInvalid, fn, "moonlm_model_params.n_threads is %d; want 0 (all cores) to %d", int32(p.n_threads), maxThreads)
	}
	mp := modelParams{Threads: int(p.n_threads)}
	if st := modelParamsPacking(fn, p, &mp); st != stOK {
		return st
	}
	if p.numerics < C.MOONLM_NUMERICS_DEFAULT || p.numerics > C.MOONLM_NUMERICS_IK {
		return fail(stInvalid, fn, "moonlm_model_params.numerics is %d; want a moonlm_numerics (0 default, 1 llamacpp, 2 llamacpp-norepack, 3 ik)", int32(p.numerics))
	}
	mp.Numerics = numerics(p.numerics)
	if p.progress != nil {
		cb, ud := C.uintptr_t(uintptr(unsafe.Pointer(p.progress))), C.uintptr_t(uintptr(p.progress_user_data))
		mp.Progress = func(f float32) bool { return C.moonlmc_call_progress(cb, C.float(f), ud) == 0 }
	}
	name := C.GoString(path)
	m, err := openModel(name, mp)
	if err != nil {
		return failErr(fn, err)
	}
	o := &cModel{m: m, info: m.Info()}
	o.n.Store(1)
	*out = C.uintptr_t(models.add(o))
	return stOK
}

// modelParamsPacking validates the packing members of p (zero, their
// default, for a caller built before they existed: moonlm.c copied the
// caller's struct over the defaults) and stores them in mp.
func modelParamsPacking(fn string, p *C.moonlm_model_params, mp *modelParams) C.int {
	if p.pack < C.MOONLM_PACK_DEFAULT || p.pack > C.MOONLM_PACK_OFF {
		return fail(stInvalid, fn, "moonlm_model_params.pack is %d; want a moonlm_pack_mode (0 default, 1 on, 2 off)", int32(p.pack))
	}
	if p.packed_cache < C.MOONLM_PACKED_CACHE_DEFAULT || p.packed_cache > C.MOONLM_PACKED_CACHE_OFF {
		return fail(stInvalid, fn, "moonlm_model_params.packed_cache is %d; want a moonlm_packed_cache_mode (0 default, 1 on, 2 off)", int32(p.packed_cache))
	}
	if uint64(p.packed_cache_bytes) > math.MaxInt64 {
		return fail(stInvalid, fn, "moonlm_model_params.packed_cache_bytes is %d; want at most %d (INT64_MAX)", uint64(p.packed_cache_bytes), int64(math.MaxInt64))
	}
	mp.Pack = toggle(p.pack)
	mp.PackedCache = toggle(p.packed_cache)
	mp.CacheBytes = int64(p.packed_cache_bytes)
	if p.packed_cache_dir != nil {
		mp.CacheDir = C.GoString(p.packed_cache_dir)
	}
	return stOK
}

//export moonlmgo_model_free
func moonlmgo_model_free(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_model_free"
	defer guard(fn, &st)
	enter(fn)
	return models.free(fn, h)
}

//export moonlmgo_model_get_info
func moonlmgo_model_get_info(h C.uintptr_t, info *C.moonlm_model_info) C.int {
	const fn = "moonlm_model_get_info"
	return withModel(fn, h, func(o *cModel) C.int {
		in := &o.info
		info.n_vocab = C.int32_t(in.NVocab)
		info.n_ctx_train = C.int32_t(in.NCtxTrain)
		info.n_embd = C.int32_t(in.NEmbd)
		info.n_layer = C.int32_t(in.NLayer)
		info.n_head = C.int32_t(in.NHead)
		info.n_head_kv = C.int32_t(in.NHeadKV)
		info.token_bos = C.int32_t(in.BOS)
		info.token_eos = C.int32_t(in.EOS)
		info.token_eot = C.int32_t(in.EOT)
		return stOK
	})
}

//export moonlmgo_model_open_stats
func moonlmgo_model_open_stats(h C.uintptr_t, out *C.moonlm_open_stats) C.int {
	const fn = "moonlm_model_open_stats"
	return withModel(fn, h, func(o *cModel) C.int {
		s, err := o.m.OpenStats()
		if err != nil {
			return failErr(fn, err)
		}
		out.pack_source = C.int32_t(s.PackSource)
		out.packed_matrices = C.int32_t(s.PackedMatrices)
		out.packed_bytes = C.int64_t(s.PackedBytes)
		out.map_ms = C.double(s.MapMs)
		out.parse_ms = C.double(s.ParseMs)
		out.tensors_ms = C.double(s.TensorsMs)
		out.pack_ms = C.double(s.PackMs)
		return stOK
	})
}

//export moonlmgo_model_string
func moonlmgo_model_string(h C.uintptr_t, which C.int, buf *C.char, cap C.size_t, nOut *C.size_t) C.int {
	fn := "moonlm_model_architecture"
	if which == 1 {
		fn = "moonlm_model_chat_template"
	}
	return withModel(fn, h, func(o *cModel) C.int {
		s := o.info.Architecture
		if which == 1 {
			s = o.info.ChatTemplate
		}
		return writeText(fn, s, buf, cap, nOut)
	})
}

//export moonlmgo_model_is_eog
func moonlmgo_model_is_eog(h C.uintptr_t, tok C.int32_t) (r C.int) {
	const fn = "moonlm_model_is_eog"
	var st C.int
	defer func() {
		if st != stOK {
			r = 0
		}
	}()
	defer guard(fn, &st)
	enter(fn)
	o, st := getModel(fn, h)
	if o == nil {
		return 0
	}
	defer o.release()
	if tok < 0 || int(tok) >= o.info.NVocab {
		fail(stInvalid, fn, "token %d is outside the vocabulary [0, %d)", tok, o.info.NVocab)
		return 0
	}
	if o.m.IsEOG(int32(tok)) {
		return 1
	}
	return 0
}

// ---- tokens -----------------------------------------------------------------

const tokenizeKnownFlags = C.MOONLM_TOKENIZE_ADD_SPECIAL | C.MOONLM_TOKENIZE_PARSE_SPECIAL

//export moonlmgo_tokenize
func moonlmgo_tokenize(h C.uintptr_t, text *C.char, n C.size_t, flags C.uint32_t, out *C.int32_t, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_tokenize"
	return withModel(fn, h, func(o *cModel) C.int {
		if text == nil && n != 0 {
			return fail(stInvalid, fn, "text is NULL but len is %d", n)
		}
		if uint64(n) > maxTextBytes {
			return fail(stInvalid, fn, "len is %d bytes, more than %d (64 MiB): tokenize a text this long in parts", uint64(n), maxTextBytes)
		}
		if out == nil && cap != 0 {
			return fail(stInvalid, fn, "out is NULL but cap is %d", cap)
		}
		if flags&^tokenizeKnownFlags != 0 {
			return fail(stInvalid, fn, "unknown flags %#x", uint32(flags&^tokenizeKnownFlags))
		}
		var s string
		if n != 0 {
			s = string(unsafe.Slice((*byte)(unsafe.Pointer(text)), int(n)))
		}
		toks, err := o.m.Tokenize(s, flags&C.MOONLM_TOKENIZE_ADD_SPECIAL != 0, flags&C.MOONLM_TOKENIZE_PARSE_SPECIAL != 0)
		if err != nil {
			return failErr(fn, fmt.Errorf("tokenizing %d bytes: %w", n, err))
		}
		if nOut != nil {
			*nOut = C.size_t(len(toks))
		}
		if uint64(cap) < uint64(len(toks)) {
			return fail(stBufferTooSmall, fn, "text is %d tokens; cap is %d", len(toks), cap)
		}
		copy(cTokens(out, C.size_t(len(toks))), toks)
		return stOK
	})
}

//export moonlmgo_token_to_piece
func moonlmgo_token_to_piece(h C.uintptr_t, tok C.int32_t, buf *C.char, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_token_to_piece"
	return withModel(fn, h, func(o *cModel) C.int {
		if tok < 0 || int(tok) >= o.info.NVocab {
			return fail(stInvalid, fn, "token %d is outside the vocabulary [0, %d)", tok, o.info.NVocab)
		}
		return writeText(fn, o.m.Piece(int32(tok)), buf, cap, nOut)
	})
}

//export moonlmgo_detokenize
func moonlmgo_detokenize(h C.uintptr_t, toks *C.int32_t, n C.size_t, buf *C.char, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_detokenize"
	return withModel(fn, h, func(o *cModel) C.int {
		if toks == nil && n != 0 {
			return fail(stInvalid, fn, "tokens is NULL but n is %d", n)
		}
		if uint64(n) > maxDetokenize {
			return fail(stInvalid, fn, "n is %d tokens, more than %d: detokenize a text this long in parts", uint64(n), maxDetokenize)
		}
		ids := append([]int32(nil), cTokens(toks, n)...)
		if st := checkTokens(fn, ids, o.info.NVocab); st != stOK {
			return st
		}
		return writeText(fn, o.m.Detokenize(ids), buf, cap, nOut)
	})
}

//export moonlmgo_chat_apply_template
func moonlmgo_chat_apply_template(h C.uintptr_t, name *C.char, named C.int, msgs *C.moonlm_message, n C.size_t, addAssistant C.int, out *C.char, cap C.size_t, nOut *C.size_t) C.int {
	fn := "moonlm_chat_apply_template"
	if named != 0 {
		fn = "moonlm_chat_apply_template_named"
	}
	return withModel(fn, h, func(o *cModel) C.int {
		if msgs == nil && n != 0 {
			return fail(stInvalid, fn, "msgs is NULL but n is %d", n)
		}
		if uint64(n) > maxMessages {
			return fail(stInvalid, fn, "n is %d messages, more than %d", uint64(n), maxMessages)
		}
		var cm []C.moonlm_message
		if n != 0 {
			cm = unsafe.Slice(msgs, int(n))
		}
		// Measure before copying: the messages together are bounded like a
		// text to tokenize.
		total := uint64(0)
		for i, m := range cm {
			if m.role == nil || m.content == nil {
				return fail(stInvalid, fn, "msgs[%d] has a NULL role or content", i)
			}
			total += uint64(C.strlen(m.role)) + uint64(C.strlen(m.content))
			if total > maxTextBytes {
				return fail(stInvalid, fn, "the messages up to msgs[%d] hold more than %d bytes (64 MiB)", i, maxTextBytes)
			}
		}
		gm := make([]message, len(cm))
		for i, m := range cm {
			gm[i] = message{Role: C.GoString(m.role), Content: C.GoString(m.content)}
		}
		var tmpl string
		if name != nil {
			tmpl = C.GoString(name)
		}
		text, err := o.m.ApplyChatTemplate(tmpl, gm, addAssistant != 0)
		if err != nil {
			if named == 0 && statusOf(err) == stUnsupported {
				// Say which call takes the name.
				return fail(stUnsupported, fn, "%v (moonlm_chat_apply_template_named takes one)", err)
			}
			return failErr(fn, err)
		}
		return writeText(fn, text, out, cap, nOut)
	})
}

//export moonlmgo_chat_builtin_templates
func moonlmgo_chat_builtin_templates(buf *C.char, cap C.size_t, nOut *C.size_t) (st C.int) {
	const fn = "moonlm_chat_builtin_templates"
	defer guard(fn, &st)
	enter(fn)
	return writeText(fn, strings.Join(builtinChatTemplates(), ","), buf, cap, nOut)
}

// ---- sessions ---------------------------------------------------------------

//export moonlmgo_session_new
func moonlmgo_session_new(h C.uintptr_t, p *C.moonlm_session_params, out *C.uintptr_t) (st C.int) {
	const fn = "moonlm_session_new"
	defer guard(fn, &st)
	enter(fn)
	m, st := getModel(fn, h)
	if m == nil {
		return st
	}
	// The call's model reference becomes the session's.
	keep := false
	defer func() {
		if !keep {
			m.release()
		}
	}()
	if p.flags != 0 {
		return fail(stInvalid, fn, "moonlm_session_params.flags is %#x; no flags are defined", uint32(p.flags))
	}
	if p.n_ctx < 0 {
		return fail(stInvalid, fn, "moonlm_session_params.n_ctx is %d; want >= 0", int32(p.n_ctx))
	}
	if p.n_threads < 0 || p.n_threads > maxThreads {
		return fail(stInvalid, fn, "moonlm_session_params.n_threads is %d; want 0 (the model's pool) to %d", int32(p.n_threads), maxThreads)
	}
	if p.kv_type != C.MOONLM_KV_F16 && p.kv_type != C.MOONLM_KV_F32 && p.kv_type != C.MOONLM_KV_Q8_0 {
		return fail(stInvalid, fn, "moonlm_session_params.kv_type %d is not a moonlm_kv_type", int32(p.kv_type))
	}
	sp := sessionParams{NCtx: int(p.n_ctx), Threads: int(p.n_threads), KVF32: p.kv_type == C.MOONLM_KV_F32, KVQ8: p.kv_type == C.MOONLM_KV_Q8_0}
	if st := checkpointParams(fn, p, &sp); st != stOK {
		return st
	}
	s, err := m.m.NewSession(sp)
	if err != nil {
		return failErr(fn, err)
	}
	o := &cSession{s: s, model: m, nVocab: m.info.NVocab}
	o.n.Store(1)
	keep = true
	*out = C.uintptr_t(sessions.add(o))
	return stOK
}

//export moonlmgo_session_free
func moonlmgo_session_free(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_session_free"
	defer guard(fn, &st)
	enter(fn)
	o := sessions.remove(uintptr(h))
	if o == nil {
		return badHandle(fn, sessions.name, uintptr(h))
	}
	if o.busy.Load() {
		// A call is running in another thread: stop it; it holds its own
		// reference, so the session is closed when it returns.
		o.s.Cancel()
	}
	o.release()
	return stOK
}

// lockSession returns the session for h marked busy, or a status.
func lockSession(fn string, h C.uintptr_t) (*cSession, C.int) {
	o, st := getSession(fn, h)
	if o == nil {
		return nil, st
	}
	if st := hold(fn, "session", h, &o.busy, o.release); st != stOK {
		return nil, st
	}
	return o, stOK
}

func (o *cSession) unlock() {
	o.busy.Store(false)
	o.release()
}

// noError is the session message after a success (shared: no allocation).
var noError = new(string)

// finish ends a call that holds the session busy; deferred right after
// lockSession. It turns a panic into MOONLM_INTERNAL as guard does (guard,
// deferred earlier, runs too late for the message to be recorded), stores
// the call's outcome as the session's last error and unlocks the session.
// The message is the one fail/failErr just put in the thread's last error.
func (o *cSession) finish(fn string, st *C.int) {
	if r := recover(); r != nil {
		panicked(fn, st, r)
	}
	if *st == stOK {
		o.lastErr.Store(noError)
	} else {
		msg := C.GoString(C.moonlm_last_error())
		o.lastErr.Store(&msg)
	}
	o.unlock()
}

// prefill runs toks through the session, leaving the position unchanged on
// failure, and honours a pending cancellation request.
func (o *cSession) prefill(fn string, toks []int32, logits []float32) C.int {
	if st := checkTokens(fn, toks, o.nVocab); st != stOK {
		return st
	}
	pos, nCtx := o.s.Pos(), o.s.NCtx()
	if pos+len(toks) > nCtx {
		return fail(stContextFull, fn, "%d tokens at position %d do not fit in the context of %d", len(toks), pos, nCtx)
	}
	// A pending moonlm_session_cancel is the engine session's to consume
	// (one flag, one owner): the engine returns ErrCancelled at its first
	// check, before any position is filled.
	err := o.s.Prefill(toks, logits)
	if err == nil {
		return stOK
	}
	if o.s.Pos() != pos {
		if rerr := o.s.Rewind(pos); rerr != nil {
			return failErr(fn, fmt.Errorf("%w; restoring position %d also failed: %v", err, pos, rerr))
		}
	}
	if statusOf(err) == stCancelled {
		return fail(stCancelled, fn, "cancelled by moonlm_session_cancel (%v)", err)
	}
	return failErr(fn, err)
}

//export moonlmgo_prefill
func moonlmgo_prefill(h C.uintptr_t, toks *C.int32_t, n C.size_t, logits *C.float, lcap C.size_t, decode C.int) (st C.int) {
	fn := "moonlm_prefill"
	if decode != 0 {
		fn = "moonlm_decode"
	}
	defer guard(fn, &st)
	o, st := lockSession(fn, h)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn) // after finish is armed: a debug panic exercises it
	out, st := o.prefillArgs(fn, toks, n, logits, lcap)
	if st != stOK {
		return st
	}
	return o.prefill(fn, o.toks, out)
}

// prefillArgs checks a prefill's caller arguments (at least one token, a
// logits buffer of the vocabulary, or none) and copies the tokens into
// o.toks: they are the caller's memory, and the engine may keep the slice
// beyond the call. It returns the logits buffer as a slice (nil: none).
func (o *cSession) prefillArgs(fn string, toks *C.int32_t, n C.size_t, logits *C.float, lcap C.size_t) ([]float32, C.int) {
	if n == 0 || toks == nil {
		return nil, fail(stInvalid, fn, "no tokens (tokens %p, n %d)", toks, n)
	}
	if st := checkCount(fn, "n", n); st != stOK {
		return nil, st
	}
	var out []float32
	if logits != nil {
		if uint64(lcap) < uint64(o.nVocab) {
			return nil, fail(stBufferTooSmall, fn, "logits_cap is %d floats; the vocabulary needs %d", lcap, o.nVocab)
		}
		out = unsafe.Slice((*float32)(unsafe.Pointer(logits)), o.nVocab)
	}
	o.toks = append(o.toks[:0], cTokens(toks, n)...)
	return out, stOK
}

//export moonlmgo_session_rewind
func moonlmgo_session_rewind(h C.uintptr_t, nKeep C.size_t) (st C.int) {
	const fn = "moonlm_session_rewind"
	defer guard(fn, &st)
	o, st := lockSession(fn, h)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn) // after finish is armed: a debug panic exercises it
	if pos := o.s.Pos(); uint64(nKeep) > uint64(pos) {
		return fail(stInvalid, fn, "n_keep %d is beyond the position %d", nKeep, pos)
	}
	if err := o.s.Rewind(int(nKeep)); err != nil {
		return failErr(fn, err)
	}
	return stOK
}

//export moonlmgo_session_position
func moonlmgo_session_position(h C.uintptr_t, pos *C.size_t) (st C.int) {
	const fn = "moonlm_session_position"
	defer guard(fn, &st)
	o, st := lockSession(fn, h)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn) // after finish is armed: a debug panic exercises it
	if pos == nil {
		return fail(stInvalid, fn, "pos is NULL")
	}
	*pos = C.size_t(o.s.Pos())
	return stOK
}

//export moonlmgo_session_last_error
func moonlmgo_session_last_error(h C.uintptr_t, buf *C.char, cap C.size_t, nOut *C.size_t) (st C.int) {
	const fn = "moonlm_session_last_error"
	defer guard(fn, &st)
	enter(fn)
	// Not lockSession: the message is readable while another thread runs a
	// call, and reading it must not replace it.
	o, st := getSession(fn, h)
	if o == nil {
		return st
	}
	defer o.release()
	msg := ""
	if p := o.lastErr.Load(); p != nil {
		msg = *p
	}
	return writeText(fn, msg, buf, cap, nOut)
}

//export moonlmgo_session_cancel
func moonlmgo_session_cancel(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_session_cancel"
	defer guard(fn, &st)
	enter(fn)
	o, st := getSession(fn, h)
	if o == nil {
		return st
	}
	defer o.release()
	o.s.Cancel()
	return stOK
}

// ---- sampler ----------------------------------------------------------------

//export moonlmgo_sampler_new
func moonlmgo_sampler_new(p *C.moonlm_sampler_params, out *C.uintptr_t) (st C.int) {
	const fn = "moonlm_sampler_new"
	defer guard(fn, &st)
	enter(fn)
	sp := samplerParams{
		Temperature:      float32(p.temperature),
		TopK:             int(p.top_k),
		TopP:             float32(p.top_p),
		MinP:             float32(p.min_p),
		RepeatPenalty:    float32(p.repeat_penalty),
		PresencePenalty:  float32(p.presence_penalty),
		FrequencyPenalty: float32(p.frequency_penalty),
		PenaltyLastN:     int(p.penalty_last_n),
		Seed:             uint64(p.seed),
	}
	if st := samplerParamsExt(fn, p, &sp); st != stOK {
		return st
	}
	if sp.PenaltyLastN < -1 || sp.PenaltyLastN > maxPenaltyLastN {
		return fail(stInvalid, fn, "moonlm_sampler_params.penalty_last_n is %d; want -1 (all tokens) to %d", sp.PenaltyLastN, maxPenaltyLastN)
	}
	for _, f := range [...]struct {
		name string
		v    float32
	}{{"temperature", sp.Temperature}, {"top_p", sp.TopP}, {"min_p", sp.MinP}, {"repeat_penalty", sp.RepeatPenalty}, {"presence_penalty", sp.PresencePenalty}, {"frequency_penalty", sp.FrequencyPenalty}} {
		if f.v != f.v || f.v > math.MaxFloat32 || f.v < -math.MaxFloat32 {
			return fail(stInvalid, fn, "moonlm_sampler_params.%s is %v; want a finite number", f.name, f.v)
		}
	}
	s, err := newSampler(sp)
	if err != nil {
		return failErr(fn, err)
	}
	o := &cSampler{s: s}
	o.n.Store(1)
	*out = C.uintptr_t(samplers.add(o))
	return stOK
}

//export moonlmgo_sampler_free
func moonlmgo_sampler_free(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_sampler_free"
	defer guard(fn, &st)
	enter(fn)
	return samplers.free(fn, h)
}

func lockSampler(fn string, h C.uintptr_t) (*cSampler, C.int) {
	o, st := getSampler(fn, h)
	if o == nil {
		return nil, st
	}
	if st := hold(fn, "sampler", h, &o.busy, o.release); st != stOK {
		return nil, st
	}
	return o, stOK
}

func (o *cSampler) unlock() {
	o.busy.Store(false)
	o.release()
}

//export moonlmgo_sampler_accept
func moonlmgo_sampler_accept(h C.uintptr_t, tok C.int32_t) (st C.int) {
	const fn = "moonlm_sampler_accept"
	defer guard(fn, &st)
	enter(fn)
	o, st := lockSampler(fn, h)
	if o == nil {
		return st
	}
	defer o.unlock()
	if tok < 0 {
		return fail(stInvalid, fn, "token %d is negative", tok)
	}
	o.s.Accept(int32(tok))
	return stOK
}

//export moonlmgo_sampler_reset
func moonlmgo_sampler_reset(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_sampler_reset"
	defer guard(fn, &st)
	enter(fn)
	o, st := lockSampler(fn, h)
	if o == nil {
		return st
	}
	defer o.unlock()
	o.s.Reset()
	return stOK
}

//export moonlmgo_sample
func moonlmgo_sample(h C.uintptr_t, logits *C.float, n C.size_t, tok *C.int32_t) (st C.int) {
	const fn = "moonlm_sample"
	defer guard(fn, &st)
	enter(fn)
	o, st := lockSampler(fn, h)
	if o == nil {
		return st
	}
	defer o.unlock()
	if logits == nil || n == 0 || tok == nil {
		return fail(stInvalid, fn, "logits (%p), n (%d) and token (%p) must be non-NULL/non-zero", logits, n, tok)
	}
	if st := checkCount(fn, "n", n); st != stOK {
		return st
	}
	if st := checkSamplerReady(fn, o); st != stOK {
		return st
	}
	*tok = C.int32_t(o.s.Sample(unsafe.Slice((*float32)(unsafe.Pointer(logits)), int(n))))
	return stOK
}

// ---- generate ---------------------------------------------------------------

// Bounds of moonlm_generate_params' stop strings (MOONLM_MAX_STOP_STRINGS,
// MOONLM_MAX_STOP_BYTES).
const (
	maxStopStrings = C.MOONLM_MAX_STOP_STRINGS
	maxStopBytes   = C.MOONLM_MAX_STOP_BYTES
)

// genRequest is one generation's validated request.
type genRequest struct {
	maxTokens int // -1: no limit, 0: prefill only
	p         generateParams
	cb, ud    C.uintptr_t
}

// generate runs req on the session with smp (both locked by the caller).
func (o *cSession) generate(fn string, smp *cSampler, prompt *C.int32_t, n C.size_t, req genRequest) (generateResult, C.int) {
	res := generateResult{LastToken: -1}
	if n == 0 || prompt == nil {
		return res, fail(stInvalid, fn, "the prompt is empty (prompt %p, n_prompt %d); at least one token is needed", prompt, n)
	}
	if st := checkCount(fn, "n_prompt", n); st != stOK {
		return res, st
	}
	// Copy: the tokens are the caller's memory.
	o.toks = append(o.toks[:0], cTokens(prompt, n)...)
	if req.maxTokens == 0 {
		if st := o.prefill(fn, o.toks, nil); st != stOK {
			return res, st
		}
		for _, t := range o.toks {
			smp.s.Accept(t)
		}
		res.PromptTokens, res.Finish = len(o.toks), finishLength
		return res, stOK
	}
	if st := checkTokens(fn, o.toks, o.nVocab); st != stOK {
		return res, st
	}
	if pos, nCtx := o.s.Pos(), o.s.NCtx(); pos+len(o.toks) > nCtx {
		return res, fail(stContextFull, fn, "%d prompt tokens at position %d do not fit in the context of %d", len(o.toks), pos, nCtx)
	}
	var onPiece func([]byte, int32) bool
	if req.cb != 0 {
		onPiece = func(text []byte, tok int32) bool {
			return o.emit(req.cb, req.ud, tok, text) == 0
		}
	}
	res, err := o.s.Generate(o.toks, smp.s, req.p, onPiece)
	if err != nil {
		if statusOf(err) == stCancelled {
			return res, fail(stCancelled, fn, "cancelled by moonlm_session_cancel (%v)", err)
		}
		return res, failErr(fn, err)
	}
	return res, stOK
}

//export moonlmgo_generate
func moonlmgo_generate(sh, smh C.uintptr_t, prompt *C.int32_t, n C.size_t, maxTokens C.size_t, cb, ud C.uintptr_t, nGen *C.size_t) (st C.int) {
	const fn = "moonlm_generate"
	defer guard(fn, &st)
	o, st := lockSession(fn, sh)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn) // after finish is armed: a debug panic exercises it
	smp, st := lockSampler(fn, smh)
	if smp == nil {
		return st
	}
	defer smp.unlock()
	// The documented behaviour of moonlm_generate: every token passed to the
	// callback is decoded, and a full context is MOONLM_CONTEXT_FULL.
	req := genRequest{maxTokens: -1, p: generateParams{DecodeLast: true}, cb: cb, ud: ud}
	if uint64(maxTokens) <= maxCount {
		req.maxTokens = int(maxTokens)
		req.p.MaxTokens = int(maxTokens)
	}
	res, st := o.generate(fn, smp, prompt, n, req)
	if nGen != nil {
		*nGen = C.size_t(res.Evalled)
	}
	if st == stOK && res.Finish == finishContext {
		return fail(stContextFull, fn, "the context of %d tokens is full after %d generated tokens", o.s.NCtx(), res.Generated)
	}
	return st
}

//export moonlmgo_generate_ex
func moonlmgo_generate_ex(sh, smh C.uintptr_t, prompt *C.int32_t, n C.size_t, p *C.moonlm_generate_params, r *C.moonlm_generate_result) (st C.int) {
	const fn = "moonlm_generate_ex"
	defer guard(fn, &st)
	o, st := lockSession(fn, sh)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn) // after finish is armed: a debug panic exercises it
	smp, st := lockSampler(fn, smh)
	if smp == nil {
		return st
	}
	defer smp.unlock()
	req, st := generateRequest(fn, p)
	if st != stOK {
		return st
	}
	gr, st := lockRequestGrammar(fn, p, &req, o)
	if st != stOK {
		return st
	}
	defer gr.unlock()
	ds, st := lockDraftSession(fn, p, &req, sh)
	if st != stOK {
		return st
	}
	if ds != nil {
		defer ds.unlock()
	}
	res, st := o.generate(fn, smp, prompt, n, req)
	r.finish_reason = C.int32_t(res.Finish)
	r.last_token = C.int32_t(res.LastToken)
	r.n_prompt = C.size_t(res.PromptTokens)
	r.n_generated = C.size_t(res.Generated)
	r.n_evaluated = C.size_t(res.Evalled)
	r.n_drafted = C.size_t(res.Drafted)
	r.n_draft_accepted = C.size_t(res.DraftAccepted)
	return st
}

// generateRequest validates moonlm_generate_params (moonlm.c has checked
// its size and copied it over the defaults).
func generateRequest(fn string, p *C.moonlm_generate_params) (genRequest, C.int) {
	req := genRequest{maxTokens: int(p.max_tokens), cb: C.uintptr_t(uintptr(unsafe.Pointer(p.callback))), ud: C.uintptr_t(uintptr(p.user_data))}
	if p.max_tokens < -1 {
		return req, fail(stInvalid, fn, "moonlm_generate_params.max_tokens is %d; want -1 (no limit), 0 (prefill only) or more", int32(p.max_tokens))
	}
	if req.maxTokens > 0 {
		req.p.MaxTokens = req.maxTokens
	}
	if unknown := uint32(p.flags) &^ (C.MOONLM_GENERATE_DECODE_LAST | C.MOONLM_GENERATE_KEEP_SPECIAL); unknown != 0 {
		return req, fail(stInvalid, fn, "moonlm_generate_params.flags has unknown bits %#x", unknown)
	}
	req.p.DecodeLast = p.flags&C.MOONLM_GENERATE_DECODE_LAST != 0
	req.p.KeepSpecial = p.flags&C.MOONLM_GENERATE_KEEP_SPECIAL != 0
	if st := generateRequestExt(fn, p, &req); st != stOK {
		return req, st
	}
	if p.n_stop == 0 {
		return req, stOK
	}
	if uint64(p.n_stop) > maxStopStrings {
		return req, fail(stInvalid, fn, "moonlm_generate_params.n_stop is %d; at most %d stop strings", uint64(p.n_stop), maxStopStrings)
	}
	if p.stop == nil {
		return req, fail(stInvalid, fn, "moonlm_generate_params.stop is NULL but n_stop is %d", uint64(p.n_stop))
	}
	ptrs := unsafe.Slice(p.stop, int(p.n_stop))
	var lens []C.size_t
	if p.stop_len != nil {
		lens = unsafe.Slice(p.stop_len, int(p.n_stop))
	}
	total := uint64(0)
	req.p.Stop = make([]string, len(ptrs))
	for i, sp := range ptrs {
		if sp == nil {
			return req, fail(stInvalid, fn, "moonlm_generate_params.stop[%d] is NULL", i)
		}
		var n uint64
		if lens != nil {
			n = uint64(lens[i])
		} else {
			n = uint64(C.strnlen(sp, maxStopBytes+1))
		}
		total += min(n, maxStopBytes+1)
		if total > maxStopBytes {
			return req, fail(stInvalid, fn, "the stop strings up to stop[%d] hold more than %d bytes", i, maxStopBytes)
		}
		req.p.Stop[i] = C.GoStringN(sp, C.int(n))
	}
	return req, stOK
}

// emit passes text released by the engine to the callback as a
// NUL-terminated C string in a buffer the session reuses.
func (o *cSession) emit(cb, ud C.uintptr_t, tok int32, text []byte) C.int {
	if len(text)+1 > o.pieceCap {
		if o.piece != nil {
			C.free(o.piece)
		}
		o.pieceCap = max(2*len(text)+1, 64)
		o.piece = C.malloc(C.size_t(o.pieceCap))
		if o.piece == nil {
			panic("out of memory for a generated piece")
		}
	}
	dst := unsafe.Slice((*byte)(o.piece), o.pieceCap)
	copy(dst, text)
	dst[len(text)] = 0
	return C.moonlmc_call_piece(cb, (*C.char)(o.piece), C.size_t(len(text)), C.int32_t(tok), ud)
}
