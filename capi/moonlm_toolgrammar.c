/*
 * moonlm_grammar_for_tool_calls(_ex): thin wrappers as in moonlm.c, which
 * checks for a fork()ed child and calls the Go implementation in
 * exports_toolgrammar.go.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "moonlm.h"
#include "_cgo_export.h"

int moonlmc_enter(const char *fn);
void moonlmc_set_error(const char *msg, size_t n);

static moonlm_status moonlm__tool_grammar(const char *fn, const moonlm_model *model, const char *template_name,
                                          const char *tools_json, const char *tool_name, uint32_t flags,
                                          moonlm_grammar **out) {
    if (moonlmc_enter(fn)) {
        return MOONLM_FORKED;
    }
    if (out == NULL) {
        char msg[96];
        size_t n = (size_t)snprintf(msg, sizeof msg, "%s: out is NULL", fn);
        moonlmc_set_error(msg, n < sizeof msg ? n : sizeof msg - 1);
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_grammar_for_tool_calls((char *)fn, (uintptr_t)model,
                                                                      (char *)template_name, (char *)tools_json,
                                                                      (char *)tool_name, flags, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_grammar *)h;
    }
    return st;
}

moonlm_status moonlm_grammar_for_tool_calls(const moonlm_model *model, const char *template_name,
                                            const char *tools_json, const char *tool_name, moonlm_grammar **out) {
    return moonlm__tool_grammar("moonlm_grammar_for_tool_calls", model, template_name, tools_json, tool_name, 0,
                                out);
}

moonlm_status moonlm_grammar_for_tool_calls_ex(const moonlm_model *model, const char *template_name,
                                               const char *tools_json, const char *tool_name, uint32_t flags,
                                               moonlm_grammar **out) {
    return moonlm__tool_grammar("moonlm_grammar_for_tool_calls_ex", model, template_name, tools_json, tool_name,
                                flags, out);
}
