/*
 * The exported batched-decoding functions: thin wrappers as in moonlm.c,
 * which check for a fork()ed child and call the Go implementations in
 * exports_batch.go.
 */
#include <stddef.h>
#include <string.h>

#include "moonlm.h"
#include "_cgo_export.h"

int moonlmc_enter(const char *fn);
void moonlmc_set_error(const char *msg, size_t n);

static moonlm_status moonlm__batch_fail(const char *msg) {
    moonlmc_set_error(msg, strlen(msg));
    return MOONLM_INVALID_ARGUMENT;
}

moonlm_status moonlm_batch_decode(moonlm_model *model, moonlm_batch_entry *entries, size_t n_entries) {
    if (moonlmc_enter("moonlm_batch_decode")) {
        return MOONLM_FORKED;
    }
    if (n_entries == 0) {
        return (moonlm_status)moonlmgo_batch_decode((uintptr_t)model, NULL, 0, 0);
    }
    if (entries == NULL) {
        return moonlm__batch_fail("moonlm_batch_decode: entries is NULL");
    }
    size_t stride = entries[0].size;
    if (stride < sizeof(moonlm_batch_entry)) {
        return moonlm__batch_fail("moonlm_batch_decode: entries[0].size is smaller than "
                                  "sizeof(moonlm_batch_entry) (set it to that)");
    }
    return (moonlm_status)moonlmgo_batch_decode((uintptr_t)model, (void *)entries, n_entries, stride);
}

moonlm_status moonlm_batch_max_tokens(const moonlm_model *model, size_t *n) {
    if (moonlmc_enter("moonlm_batch_max_tokens")) {
        return MOONLM_FORKED;
    }
    if (n == NULL) {
        return moonlm__batch_fail("moonlm_batch_max_tokens: n is NULL");
    }
    return (moonlm_status)moonlmgo_batch_max_tokens((uintptr_t)model, n);
}
