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

/* The first published moonlm_batch_entry, which ended at status: callers
   built against it pass its size, which must be where continues starts. */
typedef struct moonlm__batch_entry_v1 {
    size_t size;
    moonlm_session *session;
    const int32_t *tokens;
    size_t n_tokens;
    float *logits;
    size_t logits_cap;
    moonlm_status status;
} moonlm__batch_entry_v1;

_Static_assert(sizeof(moonlm__batch_entry_v1) == offsetof(moonlm_batch_entry, continues),
               "moonlm_batch_entry.continues must start where the first struct ended");

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
    /* The first struct's size (continues then reads as 0), or the whole
       current struct or a newer, larger one. */
    if (stride != sizeof(moonlm__batch_entry_v1) && stride < sizeof(moonlm_batch_entry)) {
        return moonlm__batch_fail("moonlm_batch_decode: entries[0].size is neither sizeof(moonlm_batch_entry) "
                                  "(set it to that), a newer struct's larger size, nor the first struct's size");
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
