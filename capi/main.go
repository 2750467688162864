// Command capi builds libmoonlm.so, the C ABI of moonlm
// (go build -buildmode=c-shared ./capi). include/moonlm.h is the contract;
// moonlm.c holds the exported moonlm_* wrappers, which check for fork(),
// validate versioned structs and call the Go moonlmgo_* functions here.
// Only moonlm_* symbols are exported from the shared object (moonlm.map,
// passed by the Makefile with -Wl,--version-script).
//
// Handles given to C are opaque integers looked up in a table (handles.go),
// so no Go pointer ever reaches C and a stale or foreign handle is an error,
// not a crash.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include -std=gnu11 -Wall -Wextra
#cgo windows CFLAGS: -DMOONLM_BUILDING_DLL -D__USE_MINGW_ANSI_STDIO=1
#include <stdlib.h>
#include "moonlm.h"
void moonlmc_set_error(const char *msg, size_t n);
int moonlmc_call_piece(uintptr_t cb, const char *piece, size_t len, int32_t token, uintptr_t user_data);
*/
import "C"

func main() {}
