package main

/*
#include "moonlm.h"
*/
import "C"

import "unsafe"

// The Go halves of the checkpoint calls of a hybrid model's session
// (moonlm_checkpoint.c holds the C wrappers), and the checkpoint members
// of moonlm_session_params.

// checkpointLacks is the refusal of a session whose backend keeps no
// checkpoints.
const checkpointLacks = "this session's backend does not report checkpoints"

// checkpointParams checks p's checkpoint members and sets them on sp. Any
// value is a setting (0 the default, negative none); the reserved member
// must be 0.
func checkpointParams(fn string, p *C.moonlm_session_params, sp *sessionParams) C.int {
	if p.reserved != 0 {
		return fail(stInvalid, fn, "moonlm_session_params.reserved is %#x; must be 0", uint32(p.reserved))
	}
	sp.CheckpointEvery, sp.CheckpointBytes = int(p.checkpoint_every), int64(p.checkpoint_bytes)
	return stOK
}

//export moonlmgo_session_checkpoints
func moonlmgo_session_checkpoints(h C.uintptr_t, out *C.moonlm_checkpoint_info) C.int {
	const fn = "moonlm_session_checkpoints"
	return onSession(fn, h, checkpointLacks, func(_ *cSession, cs checkpointSession) C.int {
		info, err := cs.Checkpoints()
		if err != nil {
			return failErr(fn, err)
		}
		out.every = C.int32_t(info.Every)
		out.max_count = C.int32_t(info.Most)
		out.n_held = C.int32_t(info.Held)
		out.bytes_held = C.uint64_t(info.Bytes)
		return stOK
	})
}

//export moonlmgo_session_checkpoint_positions
func moonlmgo_session_checkpoint_positions(h C.uintptr_t, buf *C.size_t, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_session_checkpoint_positions"
	if nOut != nil {
		*nOut = 0 // also when the handle is refused
	}
	return onSession(fn, h, checkpointLacks, func(_ *cSession, cs checkpointSession) C.int {
		if buf == nil && cap != 0 {
			return fail(stInvalid, fn, "buf is NULL but cap is %d", cap)
		}
		info, err := cs.Checkpoints()
		if err != nil {
			return failErr(fn, err)
		}
		n := len(info.Positions)
		if nOut != nil {
			*nOut = C.size_t(n)
		}
		if uint64(cap) < uint64(n) {
			return fail(stBufferTooSmall, fn, "%d checkpoints for a buffer of %d", n, cap)
		}
		if n > 0 {
			dst := unsafe.Slice(buf, n)
			for i, p := range info.Positions {
				dst[i] = C.size_t(p)
			}
		}
		return stOK
	})
}
