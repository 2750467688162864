/*
 * The exported checkpoint calls of a hybrid model's session: thin wrappers
 * as in moonlm.c, which check for a fork()ed child and call the Go
 * implementations in exports_checkpoint.go.
 */
#include <stddef.h>
#include <string.h>

#include "moonlm.h"
#include "_cgo_export.h"

int moonlmc_enter(const char *fn);
void moonlmc_set_error(const char *msg, size_t n);

static moonlm_status moonlm__checkpoint_fail(const char *msg) {
    moonlmc_set_error(msg, strlen(msg));
    return MOONLM_INVALID_ARGUMENT;
}

moonlm_status moonlm_session_checkpoints(const moonlm_session *session, moonlm_checkpoint_info *info) {
    if (moonlmc_enter("moonlm_session_checkpoints")) {
        return MOONLM_FORKED;
    }
    if (info == NULL) {
        return moonlm__checkpoint_fail("moonlm_session_checkpoints: info is NULL");
    }
    if (info->size < sizeof(moonlm_checkpoint_info)) {
        return moonlm__checkpoint_fail("moonlm_session_checkpoints: info->size is smaller than "
                                       "sizeof(moonlm_checkpoint_info) (set it to that)");
    }
    moonlm_checkpoint_info local;
    memset(&local, 0, sizeof local);
    local.size = sizeof local;
    moonlm_status st = (moonlm_status)moonlmgo_session_checkpoints((uintptr_t)session, &local);
    if (st == MOONLM_OK) {
        /* Only the members this library knows; a newer caller's others stay as given. */
        size_t keep = info->size;
        memcpy(info, &local, sizeof local);
        info->size = keep;
    }
    return st;
}

moonlm_status moonlm_session_checkpoint_positions(const moonlm_session *session, size_t *buf, size_t cap,
                                                  size_t *n_out) {
    if (moonlmc_enter("moonlm_session_checkpoint_positions")) {
        return MOONLM_FORKED;
    }
    return (moonlm_status)moonlmgo_session_checkpoint_positions((uintptr_t)session, buf, cap, n_out);
}
