package engine

import (
	"errors"
	"fmt"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/pool"
)

// Sentinel errors. Every error the engine returns wraps one of them, so
// callers (and the C ABI, which maps each to a status code) classify errors
// with errors.Is while the message still says what failed and where.
var (
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBadFile and ErrUnsupported are engine/arch's, which reads a
	// model's description before the engine loads it.
	ErrBadFile     = arch.ErrBadFile
	ErrUnsupported = arch.ErrUnsupported
	ErrContextFull = errors.New("context full")
	ErrCancelled   = errors.New("cancelled")
	ErrBusy        = errors.New("session busy")
	ErrIO          = errors.New("i/o error")
	ErrOutOfMemory = errors.New("out of memory")
	// ErrInternal is a bug: a panic recovered inside the engine.
	ErrInternal = errors.New("internal error")
)

// panicError classifies a panic recovered from a forward pass: a memory
// fault (a truncated or vanished mapped file) is ErrIO, anything else is a
// bug and ErrInternal.
func panicError(where string, r any) error {
	if pe, ok := r.(*pool.PanicError); ok {
		if pe.Fault {
			return fmt.Errorf("%s: %w: reading the model's mapping: %v", where, ErrIO, pe.Value)
		}
		return fmt.Errorf("%s: %w: %v", where, ErrInternal, pe)
	}
	if re, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Errorf("%s: %w: reading the model's mapping: %v", where, ErrIO, re)
	}
	return fmt.Errorf("%s: %w: panic: %v", where, ErrInternal, r)
}
