/*
 * The exported session-state functions (prefix reuse, stats, tokens, fork,
 * saving and loading states): thin wrappers as in moonlm.c, which check
 * for a fork()ed child and call the Go implementations in exports_state.go.
 */
#include <stddef.h>
#include <string.h>

#include "moonlm.h"
#include "_cgo_export.h"

int moonlmc_enter(const char *fn);
void moonlmc_set_error(const char *msg, size_t n);

#define MOONLM__STATE_ENTER(fn)  \
    do {                         \
        if (moonlmc_enter(fn)) { \
            return MOONLM_FORKED; \
        }                        \
    } while (0)

static moonlm_status moonlm__state_fail(const char *msg) {
    moonlmc_set_error(msg, strlen(msg));
    return MOONLM_INVALID_ARGUMENT;
}

moonlm_status moonlm_prefill_reuse(moonlm_session *session, const int32_t *tokens, size_t n, float *logits,
                                   size_t logits_cap, size_t *n_evaluated) {
    MOONLM__STATE_ENTER("moonlm_prefill_reuse");
    return (moonlm_status)moonlmgo_prefill_reuse((uintptr_t)session, (int32_t *)tokens, n, logits, logits_cap,
                                                 n_evaluated);
}

moonlm_status moonlm_session_stats_get(const moonlm_session *session, moonlm_session_stats *stats) {
    MOONLM__STATE_ENTER("moonlm_session_stats_get");
    if (stats == NULL) {
        return moonlm__state_fail("moonlm_session_stats_get: stats is NULL");
    }
    if (stats->size < sizeof(moonlm_session_stats)) {
        return moonlm__state_fail("moonlm_session_stats_get: stats->size is smaller than "
                                  "sizeof(moonlm_session_stats) (set it to that)");
    }
    moonlm_session_stats local;
    memset(&local, 0, sizeof local);
    local.size = sizeof local;
    moonlm_status st = (moonlm_status)moonlmgo_session_stats((uintptr_t)session, &local);
    if (st == MOONLM_OK) {
        /* Only the members this library knows; a newer caller's others stay as given. */
        size_t keep = stats->size;
        memcpy(stats, &local, sizeof local);
        stats->size = keep;
    }
    return st;
}

moonlm_status moonlm_session_tokens(const moonlm_session *session, int32_t *tokens, size_t cap, size_t *n_out) {
    MOONLM__STATE_ENTER("moonlm_session_tokens");
    return (moonlm_status)moonlmgo_session_tokens((uintptr_t)session, tokens, cap, n_out);
}

moonlm_status moonlm_session_fork(moonlm_session *session, moonlm_session **out) {
    MOONLM__STATE_ENTER("moonlm_session_fork");
    if (out == NULL) {
        return moonlm__state_fail("moonlm_session_fork: out is NULL");
    }
    *out = NULL;
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_session_fork((uintptr_t)session, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_session *)h;
    }
    return st;
}

moonlm_status moonlm_session_state_size(const moonlm_session *session, size_t *size) {
    MOONLM__STATE_ENTER("moonlm_session_state_size");
    if (size == NULL) {
        return moonlm__state_fail("moonlm_session_state_size: size is NULL");
    }
    return (moonlm_status)moonlmgo_session_state_size((uintptr_t)session, size);
}

moonlm_status moonlm_session_state_save(const moonlm_session *session, void *buf, size_t cap, size_t *n_out) {
    MOONLM__STATE_ENTER("moonlm_session_state_save");
    return (moonlm_status)moonlmgo_session_state_save((uintptr_t)session, buf, cap, n_out);
}

moonlm_status moonlm_session_state_load(moonlm_session *session, const void *buf, size_t n) {
    MOONLM__STATE_ENTER("moonlm_session_state_load");
    return (moonlm_status)moonlmgo_session_state_load((uintptr_t)session, (void *)buf, n);
}

moonlm_status moonlm_session_state_save_file(const moonlm_session *session, const char *path) {
    MOONLM__STATE_ENTER("moonlm_session_state_save_file");
    return (moonlm_status)moonlmgo_session_state_file((uintptr_t)session, (char *)path, 1);
}

moonlm_status moonlm_session_state_load_file(moonlm_session *session, const char *path) {
    MOONLM__STATE_ENTER("moonlm_session_state_load_file");
    return (moonlm_status)moonlmgo_session_state_file((uintptr_t)session, (char *)path, 0);
}
