package main

/*
#include "moonlm.h"
*/
import "C"

import "unsafe"

// Speculative decoding options of moonlm_generate_params (draft,
// draft_tokens, draft_session).

// Draft modes, numbered as MOONLM_DRAFT_*.
const (
	draftNone   = C.MOONLM_DRAFT_NONE
	draftLookup = C.MOONLM_DRAFT_LOOKUP
	draftModel  = C.MOONLM_DRAFT_MODEL
)

const maxDraftTokens = C.MOONLM_MAX_DRAFT_TOKENS

// lockDraftSession validates the draft options into req and, for
// MOONLM_DRAFT_MODEL, locks the draft session (the caller unlocks it);
// target is the generating session's handle.
func lockDraftSession(fn string, p *C.moonlm_generate_params, req *genRequest, target C.uintptr_t) (*cSession, C.int) {
	mode, k := int(p.draft), int(p.draft_tokens)
	if k < 0 || k > maxDraftTokens {
		return nil, fail(stInvalid, fn, "moonlm_generate_params.draft_tokens is %d; want 0 (the default) to %d", k, maxDraftTokens)
	}
	ds := C.uintptr_t(uintptr(unsafe.Pointer(p.draft_session)))
	switch mode {
	case draftNone, draftLookup:
		if ds != 0 {
			return nil, fail(stInvalid, fn, "moonlm_generate_params.draft_session is set but draft is %d, not MOONLM_DRAFT_MODEL", mode)
		}
		req.p.Draft, req.p.DraftTokens = mode, k
		return nil, stOK
	case draftModel:
	default:
		return nil, fail(stInvalid, fn, "moonlm_generate_params.draft is %d; want MOONLM_DRAFT_NONE, _LOOKUP or _MODEL", mode)
	}
	if ds == 0 {
		return nil, fail(stInvalid, fn, "moonlm_generate_params.draft is MOONLM_DRAFT_MODEL but draft_session is NULL")
	}
	if ds == target {
		return nil, fail(stInvalid, fn, "moonlm_generate_params.draft_session is the generating session itself; the draft model needs a session of its own")
	}
	o, st := lockSession(fn, ds)
	if o == nil {
		return nil, st
	}
	req.p.Draft, req.p.DraftTokens, req.p.DraftSession = mode, k, o.s
	return o, stOK
}
