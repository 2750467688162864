package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// Handle values are (sequence << kindShift) | kind. The sequence only grows,
// so a handle value is never reused while the library is loaded: a stale
// handle can never alias a newer object. Values start well above the first
// page so they never look like small integers or NULL.
const (
	kindModel   = 1
	kindSession = 2
	kindSampler = 3
	kindGrammar = 4
	kindShift   = 4
	kindMask    = 1<<kindShift - 1
)

var handleSeq atomic.Uint64

func init() { handleSeq.Store(1 << 12) }

func kindName(k uintptr) string {
	switch k {
	case kindModel:
		return "model"
	case kindSession:
		return "session"
	case kindSampler:
		return "sampler"
	case kindGrammar:
		return "grammar"
	}
	return "unknown"
}

// refs counts an object's owners: 1 for its handle plus 1 per call in
// flight (and, for a model, 1 per live session). The object is closed when
// the count reaches zero, so freeing a handle while another thread is still
// inside a call on it is safe.
type refs struct{ n atomic.Int64 }

// registry maps handles of one kind to live objects.
type registry[T any] struct {
	kind    uintptr
	name    string         // the kind's name in messages ("session")
	ref     func(*T) *refs // the object's reference count
	release func(*T)       // drops one reference
	mu      sync.RWMutex
	m       map[uintptr]*T
}

func newRegistry[T any](kind uintptr, ref func(*T) *refs, release func(*T)) *registry[T] {
	return &registry[T]{kind: kind, name: kindName(kind), ref: ref, release: release, m: make(map[uintptr]*T)}
}

// add registers obj (whose reference count must already be 1) and returns
// its new handle.
func (r *registry[T]) add(obj *T) uintptr {
	h := uintptr(handleSeq.Add(1))<<kindShift | r.kind
	r.mu.Lock()
	r.m[h] = obj
	r.mu.Unlock()
	return h
}

// lookup returns the object for h with one more reference, which the
// caller must release, or the status fn reports for a handle that is not a
// live one of this kind.
func (r *registry[T]) lookup(fn string, h C.uintptr_t) (*T, C.int) {
	r.mu.RLock()
	obj := r.m[uintptr(h)]
	if obj != nil {
		r.ref(obj).n.Add(1)
	}
	r.mu.RUnlock()
	if obj == nil {
		return nil, badHandle(fn, r.name, uintptr(h))
	}
	return obj, stOK
}

// remove unregisters h and returns its object (still holding the handle's
// reference, which the caller releases), or nil.
func (r *registry[T]) remove(h uintptr) *T {
	r.mu.Lock()
	obj := r.m[h]
	delete(r.m, h)
	r.mu.Unlock()
	return obj
}

// free unregisters h and drops the handle's reference: the object closes
// when the calls still running on it return.
func (r *registry[T]) free(fn string, h C.uintptr_t) C.int {
	obj := r.remove(uintptr(h))
	if obj == nil {
		return badHandle(fn, r.name, uintptr(h))
	}
	r.release(obj)
	return stOK
}

// hold marks an object busy for fn's call: a second call on it meanwhile
// gets BUSY (and drops the reference its lookup took) instead of racing.
func hold(fn, what string, h C.uintptr_t, busy *atomic.Bool, release func()) C.int {
	if busy.CompareAndSwap(false, true) {
		return stOK
	}
	release()
	return fail(stBusy, fn, "%s %#x is in use by another thread", what, uintptr(h))
}

// badHandle explains why h is not a live handle of the wanted kind.
func badHandle(fn, want string, h uintptr) C.int {
	if h == 0 {
		return fail(stInvalid, fn, "%s handle is NULL", want)
	}
	k := h & kindMask
	if h>>kindShift > 1<<12 && uint64(h>>kindShift) <= handleSeq.Load() && k >= kindModel && k <= kindGrammar && kindName(k) != want {
		return fail(stInvalid, fn, "handle %#x is a %s, not a %s", h, kindName(k), want)
	}
	return fail(stInvalid, fn, "%s handle %#x is not live (already freed, or not from moonlm)", want, h)
}

// cModel is a model handle's object.
type cModel struct {
	refs
	m    backendModel
	info modelInfo
	// batch holds moonlm_batch_decode's batchers (exports_batch.go).
	batch modelBatchers
}

func (o *cModel) ref() *refs { return &o.refs }

func (o *cModel) release() {
	if o.n.Add(-1) == 0 {
		o.batch.close()
		_ = o.m.Close()
	}
}

// cSession is a session handle's object.
type cSession struct {
	refs
	s      backendSession
	model  *cModel // holds a model reference until the session is closed
	nVocab int

	busy atomic.Bool // a call is running; concurrent calls get BUSY

	// lastErr is the message of the last call that held busy ("" after a
	// success), for moonlm_session_last_error: callers whose calls run on
	// pool threads (Node's async calls) cannot read the thread's message.
	lastErr atomic.Pointer[string]

	// Scratch owned by the call holding busy.
	toks     []int32
	piece    unsafe.Pointer // C buffer passed to generate callbacks
	pieceCap int
}

func (o *cSession) ref() *refs { return &o.refs }

func (o *cSession) release() {
	if o.n.Add(-1) == 0 {
		o.s.Close()
		if o.piece != nil {
			C.free(o.piece)
			o.piece = nil
		}
		o.model.release()
	}
}

// cSampler is a sampler handle's object.
type cSampler struct {
	refs
	s    backendSampler
	busy atomic.Bool
}

func (o *cSampler) ref() *refs { return &o.refs }

func (o *cSampler) release() { o.n.Add(-1) }

var (
	models   = newRegistry(kindModel, (*cModel).ref, (*cModel).release)
	sessions = newRegistry(kindSession, (*cSession).ref, (*cSession).release)
	samplers = newRegistry(kindSampler, (*cSampler).ref, (*cSampler).release)
)

func getModel(fn string, h C.uintptr_t) (*cModel, C.int)     { return models.lookup(fn, h) }
func getSession(fn string, h C.uintptr_t) (*cSession, C.int) { return sessions.lookup(fn, h) }
func getSampler(fn string, h C.uintptr_t) (*cSampler, C.int) { return samplers.lookup(fn, h) }
