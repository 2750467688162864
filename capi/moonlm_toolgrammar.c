/*
 * moonlm_grammar_for_tool_calls: a thin wrapper as in moonlm.c, which
 * checks for a fork()ed child and calls the Go implementation in
 * exports_toolgrammar.go.
 */
#include <stddef.h>
#include <string.h>

#include "moonlm.h"
#include "_cgo_export.h"

int moonlmc_enter(const char *fn);
void moonlmc_set_error(const char *msg, size_t n);

moonlm_status moonlm_grammar_for_tool_calls(const moonlm_model *model, const char *template_name,
                                            const char *tools_json, const char *tool_name, moonlm_grammar **out) {
    if (moonlmc_enter("moonlm_grammar_for_tool_calls")) {
        return MOONLM_FORKED;
    }
    if (out == NULL) {
        static const char msg[] = "moonlm_grammar_for_tool_calls: out is NULL";
        moonlmc_set_error(msg, sizeof msg - 1);
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_grammar_for_tool_calls((uintptr_t)model, (char *)template_name,
                                                                      (char *)tools_json, (char *)tool_name, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_grammar *)h;
    }
    return st;
}
