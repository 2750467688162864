package main

/*
#include <stdint.h>
*/
import "C"

// The prologue the exports share: guard against panics, take the handle
// (a session held busy for the call, or a model reference), check the
// debug-panic hook, and see the backend as the interface the call needs.

// onSession runs body on the session h names, held busy for the call, with
// its backend as I (MOONLM_UNSUPPORTED saying lacks when it is not one).
func onSession[I any](fn string, h C.uintptr_t, lacks string, body func(o *cSession, s I) C.int) (st C.int) {
	defer guard(fn, &st)
	o, st := lockSession(fn, h)
	if o == nil {
		return st
	}
	defer o.finish(fn, &st)
	enter(fn)
	s, ok := o.s.(I)
	if !ok {
		return fail(stUnsupported, fn, "%s", lacks)
	}
	return body(o, s)
}

// withModel runs body on the model h names, referenced for the call.
func withModel(fn string, h C.uintptr_t, body func(o *cModel) C.int) (st C.int) {
	defer guard(fn, &st)
	enter(fn)
	o, st := getModel(fn, h)
	if o == nil {
		return st
	}
	defer o.release()
	return body(o)
}

// onModel runs body on the backend of the model h names, referenced for the
// call, as I (MOONLM_UNSUPPORTED saying lacks when it is not one).
func onModel[I any](fn string, h C.uintptr_t, lacks string, body func(m I) C.int) C.int {
	return withModel(fn, h, func(o *cModel) C.int {
		m, ok := o.m.(I)
		if !ok {
			return fail(stUnsupported, fn, "%s", lacks)
		}
		return body(m)
	})
}
