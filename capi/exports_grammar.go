package main

/*
#include <stdlib.h>
#include "moonlm.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// Grammar handles: moonlm_grammar_new, moonlm_grammar_free, and the
// grammar of moonlm_generate_params.

// cGrammar is a grammar handle's object.
type cGrammar struct {
	refs
	g     backendGrammar
	model *cModel // holds a model reference until the grammar is closed
	busy  atomic.Bool
}

func (o *cGrammar) ref() *refs { return &o.refs }

func (o *cGrammar) release() {
	if o.n.Add(-1) == 0 {
		o.model.release()
	}
}

var grammars = newRegistry(kindGrammar, (*cGrammar).ref, (*cGrammar).release)

//export moonlmgo_grammar_new
func moonlmgo_grammar_new(mh C.uintptr_t, text *C.char, n C.size_t, out *C.uintptr_t) (st C.int) {
	const fn = "moonlm_grammar_new"
	defer guard(fn, &st)
	enter(fn)
	return grammarNew(fn, "grammar", mh, text, n, out, newGrammar)
}

//export moonlmgo_grammar_from_json_schema
func moonlmgo_grammar_from_json_schema(mh C.uintptr_t, text *C.char, n C.size_t, out *C.uintptr_t) (st C.int) {
	const fn = "moonlm_grammar_from_json_schema"
	defer guard(fn, &st)
	enter(fn)
	return grammarNew(fn, "schema", mh, text, n, out, newSchemaGrammar)
}

// grammarNew makes a grammar handle from n bytes of text with compile.
func grammarNew(fn, what string, mh C.uintptr_t, text *C.char, n C.size_t, out *C.uintptr_t,
	compile func(backendModel, string) (backendGrammar, error)) C.int {
	m, st := getModel(fn, mh)
	if m == nil {
		return st
	}
	keep := false // the call's model reference becomes the grammar's
	defer func() {
		if !keep {
			m.release()
		}
	}()
	if uint64(n) > C.MOONLM_MAX_GRAMMAR_BYTES {
		return fail(stInvalid, fn, "the %s is %d bytes; at most %d", what, uint64(n), C.MOONLM_MAX_GRAMMAR_BYTES)
	}
	src := ""
	if n > 0 {
		src = C.GoStringN(text, C.int(n))
	}
	g, err := compile(m.m, src)
	if err != nil {
		return failErr(fn, err)
	}
	o := &cGrammar{g: g, model: m}
	o.n.Store(1)
	keep = true
	*out = C.uintptr_t(grammars.add(o))
	return stOK
}

//export moonlmgo_grammar_free
func moonlmgo_grammar_free(h C.uintptr_t) (st C.int) {
	const fn = "moonlm_grammar_free"
	defer guard(fn, &st)
	enter(fn)
	return grammars.free(fn, h)
}

// lockRequestGrammar looks up moonlm_generate_params.grammar (if any),
// checks it belongs to the session's model, marks it busy and puts it in
// the request. The caller unlocks it (nil is fine) after the generation.
func lockRequestGrammar(fn string, p *C.moonlm_generate_params, req *genRequest, sess *cSession) (*cGrammar, C.int) {
	if p.grammar == nil {
		return nil, stOK
	}
	h := C.uintptr_t(uintptr(unsafe.Pointer(p.grammar)))
	o, st := grammars.lookup(fn, h)
	if o == nil {
		return nil, st
	}
	if o.model != sess.model {
		o.release()
		return nil, fail(stInvalid, fn, "moonlm_generate_params.grammar was made for another model than the session's")
	}
	if st := hold(fn, "grammar", h, &o.busy, o.release); st != stOK {
		return nil, st
	}
	req.p.Grammar = o.g
	return o, stOK
}

func (o *cGrammar) unlock() {
	if o == nil {
		return
	}
	o.busy.Store(false)
	o.release()
}
