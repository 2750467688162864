package main

/*
#include <stdlib.h>
#include "moonlm.h"
void moonlmc_set_error(const char *msg, size_t n);
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/moonlm/moonlm/internal/settings"
)

// Status codes, as in include/moonlm.h.
const (
	stOK             C.int = C.MOONLM_OK
	stInvalid        C.int = C.MOONLM_INVALID_ARGUMENT
	stIO             C.int = C.MOONLM_IO
	stBadFile        C.int = C.MOONLM_BAD_FILE
	stUnsupported    C.int = C.MOONLM_UNSUPPORTED
	stBufferTooSmall C.int = C.MOONLM_BUFFER_TOO_SMALL
	stContextFull    C.int = C.MOONLM_CONTEXT_FULL
	stCancelled      C.int = C.MOONLM_CANCELLED
	stBusy           C.int = C.MOONLM_BUSY
	stOutOfMemory    C.int = C.MOONLM_OUT_OF_MEMORY
	stInternal       C.int = C.MOONLM_INTERNAL
)

// errorClass maps an engine sentinel error to its status code.
type errorClass struct {
	err error
	st  C.int
}

// errorClasses is filled by engine_glue.go from the engine's sentinels.
var errorClasses []errorClass

// statusOf classifies err; anything unclassified is INTERNAL, since the
// engine promises to classify every error a caller can cause.
func statusOf(err error) C.int {
	for _, c := range errorClasses {
		if errors.Is(err, c.err) {
			return c.st
		}
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return stIO
	}
	return stInternal
}

// setError records msg as the calling thread's last error. The C side
// copies it into thread-local storage; cgo calls from an exported function
// run on the caller's OS thread, so "thread" is the C caller's thread.
func setError(msg string) {
	if msg == "" {
		return
	}
	cs := C.CString(msg)
	C.moonlmc_set_error(cs, C.size_t(len(msg)))
	C.free(unsafe.Pointer(cs))
}

// fail records "fn: message" and returns st.
func fail(st C.int, fn, format string, args ...any) C.int {
	setError(fn + ": " + fmt.Sprintf(format, args...))
	return st
}

// failErr records "fn: err" and returns err's status.
func failErr(fn string, err error) C.int {
	setError(fn + ": " + err.Error())
	return statusOf(err)
}

// debugPanic names an exported function that panics on entry, so tests can
// check that panics become MOONLM_INTERNAL (MOONLM_DEBUG_PANIC=moonlm_decode).
// It is read when the library loads; a malformed setting elsewhere is
// reported by the first open, not here.
var debugPanic = settings.Read().DebugPanic

// enter is called first by every Go export, inside its recover scope
// (those that lock a session call it once finish is deferred, so a debug
// panic also tests that the session is unlocked and its message kept).
func enter(fn string) {
	if debugPanic != "" && debugPanic == fn {
		panic("MOONLM_DEBUG_PANIC requested a panic in " + fn)
	}
}

// guard turns a panic into MOONLM_INTERNAL with the panic value and the
// place it happened. Deferred by every Go export, so no panic unwinds into C
// (which would kill the host).
func guard(fn string, st *C.int) {
	if r := recover(); r != nil {
		panicked(fn, st, r)
	}
}

// panicked records a recovered panic r as fn's MOONLM_INTERNAL failure.
func panicked(fn string, st *C.int, r any) {
	*st = stInternal
	setError(fmt.Sprintf("%s: internal error: panic: %v%s (please report this bug)", fn, r, panicSite()))
}

// panicSite describes the first non-runtime frame below the panic.
func panicSite() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	sawPanic := false
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "runtime.") {
			if strings.HasPrefix(f.Function, "runtime.gopanic") || strings.HasPrefix(f.Function, "runtime.panic") {
				sawPanic = true
			}
		} else if sawPanic && f.Function != "" {
			return fmt.Sprintf(" at %s (%s:%d)", f.Function, shortFile(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

func shortFile(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		if j := strings.LastIndex(p[:i], "/"); j >= 0 {
			return p[j+1:]
		}
	}
	return p
}
