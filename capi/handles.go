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
	kind uintptr
	mu   sync.RWMutex
	m    map[uintptr]*T
}

func newRegistry[T any](kind uintptr) *registry[T] {
	return &registry[T]{kind: kind, m: make(map[uintptr]*T)}
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

// get returns the object for h with one more reference, which the caller
// must release; nil if h is not a live handle of this kind.
func (r *registry[T]) get(h uintptr, ref func(*T) *refs) *T {
	r.mu.RLock()
	obj := r.m[h]
	if obj != nil {
		ref(obj).n.Add(1)
	}
	r.mu.RUnlock()
	return obj
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
	models   = newRegistry[cModel](kindModel)
	sessions = newRegistry[cSession](kindSession)
	samplers = newRegistry[cSampler](kindSampler)
)

func getModel(fn string, h C.uintptr_t) (*cModel, C.int) {
	o := models.get(uintptr(h), (*cModel).ref)
	if o == nil {
		return nil, badHandle(fn, "model", uintptr(h))
	}
	return o, stOK
}

func getSession(fn string, h C.uintptr_t) (*cSession, C.int) {
	o := sessions.get(uintptr(h), (*cSession).ref)
	if o == nil {
		return nil, badHandle(fn, "session", uintptr(h))
	}
	return o, stOK
}

func getSampler(fn string, h C.uintptr_t) (*cSampler, C.int) {
	o := samplers.get(uintptr(h), (*cSampler).ref)
	if o == nil {
		return nil, badHandle(fn, "sampler", uintptr(h))
	}
	return o, stOK
}
