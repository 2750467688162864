/*
 * The exported moonlm_* functions. Each is a thin C wrapper that first
 * checks for a fork()ed child (the Go runtime cannot run there, and entering
 * it could hang on locks held by threads that no longer exist), clears the
 * thread's last error, validates versioned structs, and then calls the Go
 * implementation (moonlmgo_*, hidden from the dynamic symbol table by
 * moonlm.map). Including moonlm.h here makes the compiler check that the
 * definitions match the public declarations exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#endif

#include "moonlm.h"
#include "_cgo_export.h"

/* Internal C functions the Go side calls: kept out of the exports. A DLL
   exports only what is marked dllexport (or listed in Go's .def), so
   Windows needs no attribute. */
#ifdef _WIN32
#define MOONLM__HIDDEN
#else
#define MOONLM__HIDDEN __attribute__((visibility("hidden")))
#endif

/* ---- fork detection ---------------------------------------------------- */

static pid_t moonlm__pid;
static volatile int moonlm__forked_flag;

static void moonlm__atfork_child(void) { moonlm__forked_flag = 1; }

static void moonlm__init_errors(void);

__attribute__((constructor)) static void moonlm__init(void) {
    moonlm__pid = getpid();
#ifndef _WIN32
    pthread_atfork(NULL, NULL, moonlm__atfork_child);
#else
    (void)moonlm__atfork_child; /* Windows has no fork() */
#endif
    moonlm__init_errors();
}

/* ---- per-thread last error -------------------------------------------- */

/*
 * Each thread's message lives in a heap buffer found through a pthread key
 * (freed when the thread exits). Not a _Thread_local array: the Go runtime
 * makes this library use static TLS, whose space dlopen() can barely extend.
 */
#define MOONLM__ERR_CAP 4096
static int moonlm__errkey_ok;
#ifdef _WIN32
/*
 * Windows: a fiber-local slot, whose callback frees the buffer when the
 * thread exits (as the pthread key's destructor does elsewhere).
 */
static DWORD moonlm__errkey;
static void WINAPI moonlm__free_errbuf(void *b) { free(b); }
static void *moonlm__tls_get(void) { return FlsGetValue(moonlm__errkey); }
static int moonlm__tls_set(void *b) { return FlsSetValue(moonlm__errkey, b) ? 0 : -1; }
static int moonlm__tls_create(void) {
    moonlm__errkey = FlsAlloc(moonlm__free_errbuf);
    return moonlm__errkey == FLS_OUT_OF_INDEXES ? -1 : 0;
}
#else
static pthread_key_t moonlm__errkey;
static void *moonlm__tls_get(void) { return pthread_getspecific(moonlm__errkey); }
static int moonlm__tls_set(void *b) { return pthread_setspecific(moonlm__errkey, b); }
static int moonlm__tls_create(void) { return pthread_key_create(&moonlm__errkey, free); }
#endif

/* The calling thread's buffer; allocated only if alloc is set. May be NULL. */
static char *moonlm__errbuf(int alloc) {
    if (!moonlm__errkey_ok) {
        return NULL;
    }
    char *b = moonlm__tls_get();
    if (b == NULL && alloc) {
        b = calloc(1, MOONLM__ERR_CAP);
        if (b != NULL && moonlm__tls_set(b) != 0) {
            free(b);
            b = NULL;
        }
    }
    return b;
}

static void moonlm__clear_error(void) {
    char *b = moonlm__errbuf(0);
    if (b != NULL) {
        b[0] = 0;
    }
}

/* Called from Go (and from C below) to record a failure message. */
MOONLM__HIDDEN void moonlmc_set_error(const char *msg, size_t n) {
    char *b = moonlm__errbuf(1);
    if (b == NULL) {
        return;
    }
    if (n >= MOONLM__ERR_CAP) {
        n = MOONLM__ERR_CAP - 1;
    }
    memcpy(b, msg, n);
    b[n] = 0;
}

#ifdef _WIN32
/* mingw's ANSI stdio (__USE_MINGW_ANSI_STDIO) gives vsnprintf %zu. */
#define MOONLM__PRINTF gnu_printf
#else
#define MOONLM__PRINTF printf
#endif
static void moonlm__errorf(const char *fmt, ...) __attribute__((format(MOONLM__PRINTF, 1, 2)));
static void moonlm__errorf(const char *fmt, ...) {
    char *b = moonlm__errbuf(1);
    if (b == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, MOONLM__ERR_CAP, fmt, ap);
    va_end(ap);
}

static void moonlm__init_errors(void) { moonlm__errkey_ok = moonlm__tls_create() == 0; }

const char *moonlm_last_error(void) {
    char *b = moonlm__errbuf(0);
    if (b == NULL) {
        return "";
    }
    return b;
}

/* Returns nonzero (and records why) when called in a fork()ed child. */
static int moonlm__forked(const char *fn) {
    pid_t now = getpid();
    if (moonlm__forked_flag || now != moonlm__pid) {
        moonlm__errorf("%s: called in a fork()ed child (pid %ld; library loaded in pid %ld): "
                       "the Go runtime does not survive fork(), load the library in a fresh process",
                       fn, (long)now, (long)moonlm__pid);
        return 1;
    }
    return 0;
}

#define MOONLM__ENTER(fn)            \
    do {                             \
        moonlm__clear_error();       \
        if (moonlm__forked(fn)) {    \
            return MOONLM_FORKED;    \
        }                            \
    } while (0)

/*
 * MOONLM__ENTER for the wrappers in other files (moonlm_state.c): clears
 * the thread's last error; nonzero (with the message recorded) in a
 * fork()ed child.
 */
MOONLM__HIDDEN int moonlmc_enter(const char *fn) {
    moonlm__clear_error();
    return moonlm__forked(fn);
}

/* ---- versioned structs -------------------------------------------------- */

/*
 * Copies the caller's struct (whose first member is its size) into dst, a
 * struct of this library's version already holding defaults. Sizes below
 * min_size are rejected; bytes beyond known_size must be zero.
 */
static moonlm_status moonlm__read_struct(const char *fn, const char *what, const void *src, size_t min_size,
                                         size_t known_size, void *dst) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size < min_size) {
        moonlm__errorf("%s: %s.size is %zu, want at least %zu (set it to sizeof(%s))", fn, what, size, min_size,
                       what);
        return MOONLM_INVALID_ARGUMENT;
    }
    if (size > known_size) {
        const unsigned char *extra = (const unsigned char *)src + known_size;
        for (size_t i = 0; i < size - known_size; i++) {
            if (extra[i] != 0) {
                moonlm__errorf("%s: %s has nonzero byte at offset %zu, beyond the %zu bytes this library "
                               "(ABI %d) knows: the caller uses an option this library lacks",
                               fn, what, known_size + i, known_size, MOONLM_ABI_VERSION);
                return MOONLM_INVALID_ARGUMENT;
            }
        }
        size = known_size;
    }
    memcpy(dst, src, size);
    memcpy(dst, &known_size, sizeof known_size);
    return MOONLM_OK;
}

/*
 * The first published sizes of structs that have grown since: a caller built
 * against that header passes this size and gets the defaults of the members
 * added after it.
 */
#define MOONLM__MODEL_PARAMS_V1_SIZE offsetof(moonlm_model_params, pack)
#define MOONLM__SAMPLER_PARAMS_V1_SIZE offsetof(moonlm_sampler_params, typical_p)
#define MOONLM__GENERATE_PARAMS_V1_SIZE offsetof(moonlm_generate_params, logprobs)
#define MOONLM__GENERATE_RESULT_V1_SIZE offsetof(moonlm_generate_result, n_drafted)
#define MOONLM__SESSION_PARAMS_V1_SIZE offsetof(moonlm_session_params, checkpoint_every)

/* ---- versions, status strings, defaults -------------------------------- */

const char *moonlm_version(void) { return MOONLM_VERSION_STRING; }

int moonlm_abi_version(void) { return MOONLM_ABI_VERSION; }

const char *moonlm_status_string(moonlm_status status) {
    switch (status) {
    case MOONLM_OK: return "ok";
    case MOONLM_INVALID_ARGUMENT: return "invalid argument";
    case MOONLM_IO: return "i/o error";
    case MOONLM_BAD_FILE: return "bad model file";
    case MOONLM_UNSUPPORTED: return "unsupported";
    case MOONLM_BUFFER_TOO_SMALL: return "buffer too small";
    case MOONLM_CONTEXT_FULL: return "context full";
    case MOONLM_CANCELLED: return "cancelled";
    case MOONLM_BUSY: return "busy";
    case MOONLM_OUT_OF_MEMORY: return "out of memory";
    case MOONLM_INTERNAL: return "internal error";
    case MOONLM_FORKED: return "used in a forked child";
    }
    return "unknown status";
}

/*
 * Writes the caller's struct of size bytes at dst from the library's
 * defaults src (known bytes): the first min(size, known) bytes copied, the
 * rest zeroed, and the size member set to size, which moonlm__read_struct
 * then accepts (bytes beyond known are zero).
 */
static void moonlm__fill_struct(void *dst, size_t size, const void *src, size_t known) {
    memset(dst, 0, size);
    memcpy(dst, src, size < known ? size : known);
    memcpy(dst, &size, sizeof size);
}

void (moonlm_model_params_default)(moonlm_model_params *params) {
    if (params == NULL) {
        return;
    }
    memset(params, 0, sizeof *params);
    params->size = sizeof *params;
}

void moonlm_model_params_init(moonlm_model_params *params, size_t size) {
    if (params == NULL || size < sizeof(size_t)) {
        return;
    }
    moonlm_model_params d;
    (moonlm_model_params_default)(&d);
    moonlm__fill_struct(params, size, &d, sizeof d);
}

void (moonlm_session_params_default)(moonlm_session_params *params) {
    if (params == NULL) {
        return;
    }
    memset(params, 0, sizeof *params);
    params->size = sizeof *params;
    params->kv_type = MOONLM_KV_F16;
}

void moonlm_session_params_init(moonlm_session_params *params, size_t size) {
    if (params == NULL || size < sizeof(size_t)) {
        return;
    }
    moonlm_session_params d;
    (moonlm_session_params_default)(&d);
    moonlm__fill_struct(params, size, &d, sizeof d);
}

void (moonlm_sampler_params_default)(moonlm_sampler_params *params) {
    if (params == NULL) {
        return;
    }
    memset(params, 0, sizeof *params);
    params->size = sizeof *params;
    params->temperature = 0.8f;
    params->top_k = 40;
    params->top_p = 0.95f;
    params->min_p = 0.05f;
    params->repeat_penalty = 1.0f;
    params->presence_penalty = 0.0f;
    params->frequency_penalty = 0.0f;
    params->penalty_last_n = 64;
    params->seed = MOONLM_SEED_RANDOM;
    params->typical_p = 1.0f;
    params->xtc_probability = 0.0f;
    params->xtc_threshold = 0.1f;
    params->mirostat = 0;
    params->mirostat_tau = 5.0f;
    params->mirostat_eta = 0.1f;
    params->mirostat_m = 100;
    params->dry_multiplier = 0.0f;
    params->dry_base = 1.75f;
    params->dry_allowed_length = 2;
    params->dry_penalty_last_n = 64;
    params->dry_sequence_breakers = NULL;
    params->n_dry_sequence_breakers = 0;
    params->logit_bias = NULL;
    params->n_logit_bias = 0;
}

void moonlm_sampler_params_init(moonlm_sampler_params *params, size_t size) {
    if (params == NULL || size < sizeof(size_t)) {
        return;
    }
    moonlm_sampler_params d;
    (moonlm_sampler_params_default)(&d);
    moonlm__fill_struct(params, size, &d, sizeof d);
}

static void moonlm__generate_params_defaults(moonlm_generate_params *params) {
    memset(params, 0, sizeof *params);
    params->size = sizeof *params;
    params->max_tokens = -1;
}

void moonlm_generate_params_init(moonlm_generate_params *params, size_t size) {
    if (params == NULL || size < sizeof(size_t)) {
        return;
    }
    moonlm_generate_params d;
    moonlm__generate_params_defaults(&d);
    moonlm__fill_struct(params, size, &d, sizeof d);
}

const char *moonlm_finish_reason_string(moonlm_finish_reason reason) {
    switch (reason) {
    case MOONLM_FINISH_NONE: return "none";
    case MOONLM_FINISH_STOP: return "stop";
    case MOONLM_FINISH_LENGTH: return "length";
    case MOONLM_FINISH_EOG: return "eog";
    case MOONLM_FINISH_CONTEXT: return "context";
    case MOONLM_FINISH_CANCELLED: return "cancelled";
    }
    return "unknown";
}

/* ---- models ------------------------------------------------------------- */

moonlm_status moonlm_model_open(const char *path, const moonlm_model_params *params, moonlm_model **out) {
    MOONLM__ENTER("moonlm_model_open");
    if (out == NULL) {
        moonlm__errorf("moonlm_model_open: out is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (path == NULL) {
        moonlm__errorf("moonlm_model_open: path is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    moonlm_model_params p;
    moonlm_model_params_default(&p);
    if (params != NULL) {
        moonlm_status st = moonlm__read_struct("moonlm_model_open", "moonlm_model_params", params,
                                               MOONLM__MODEL_PARAMS_V1_SIZE, sizeof(moonlm_model_params), &p);
        if (st != MOONLM_OK) {
            return st;
        }
    }
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_model_open((char *)path, &p, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_model *)h;
    }
    return st;
}

moonlm_status moonlm_model_free(moonlm_model *model) {
    MOONLM__ENTER("moonlm_model_free");
    if (model == NULL) {
        return MOONLM_OK;
    }
    return (moonlm_status)moonlmgo_model_free((uintptr_t)model);
}

moonlm_status moonlm_model_get_info(const moonlm_model *model, moonlm_model_info *info) {
    MOONLM__ENTER("moonlm_model_get_info");
    if (info == NULL) {
        moonlm__errorf("moonlm_model_get_info: info is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    if (info->size < sizeof(moonlm_model_info)) {
        moonlm__errorf("moonlm_model_get_info: info->size is %zu, want at least %zu (set it to "
                       "sizeof(moonlm_model_info))",
                       info->size, sizeof(moonlm_model_info));
        return MOONLM_INVALID_ARGUMENT;
    }
    moonlm_model_info local;
    memset(&local, 0, sizeof local);
    local.size = sizeof local;
    moonlm_status st = (moonlm_status)moonlmgo_model_get_info((uintptr_t)model, &local);
    if (st == MOONLM_OK) {
        size_t keep = info->size;
        memcpy(info, &local, sizeof local);
        info->size = keep;
    }
    return st;
}

moonlm_status moonlm_model_open_stats(const moonlm_model *model, moonlm_open_stats *stats) {
    MOONLM__ENTER("moonlm_model_open_stats");
    if (stats == NULL) {
        moonlm__errorf("moonlm_model_open_stats: stats is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    if (stats->size < sizeof(moonlm_open_stats)) {
        moonlm__errorf("moonlm_model_open_stats: stats->size is %zu, want at least %zu (set it to "
                       "sizeof(moonlm_open_stats))",
                       stats->size, sizeof(moonlm_open_stats));
        return MOONLM_INVALID_ARGUMENT;
    }
    moonlm_open_stats local;
    memset(&local, 0, sizeof local);
    local.size = sizeof local;
    moonlm_status st = (moonlm_status)moonlmgo_model_open_stats((uintptr_t)model, &local);
    if (st == MOONLM_OK) {
        /* Only the members this library knows; a newer caller's others stay as given. */
        size_t keep = stats->size;
        memcpy(stats, &local, sizeof local);
        stats->size = keep;
    }
    return st;
}

moonlm_status moonlm_model_architecture(const moonlm_model *model, char *buf, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_model_architecture");
    return (moonlm_status)moonlmgo_model_string((uintptr_t)model, 0, buf, cap, n_out);
}

moonlm_status moonlm_model_chat_template(const moonlm_model *model, char *buf, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_model_chat_template");
    return (moonlm_status)moonlmgo_model_string((uintptr_t)model, 1, buf, cap, n_out);
}

int moonlm_model_is_eog(const moonlm_model *model, int32_t token) {
    moonlm__clear_error();
    if (moonlm__forked("moonlm_model_is_eog")) {
        return 0;
    }
    return moonlmgo_model_is_eog((uintptr_t)model, token);
}

/* ---- tokens ------------------------------------------------------------- */

moonlm_status moonlm_tokenize(const moonlm_model *model, const char *text, size_t len, uint32_t flags,
                              int32_t *out, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_tokenize");
    return (moonlm_status)moonlmgo_tokenize((uintptr_t)model, (char *)text, len, flags, out, cap, n_out);
}

moonlm_status moonlm_token_to_piece(const moonlm_model *model, int32_t token, char *buf, size_t cap,
                                    size_t *n_out) {
    MOONLM__ENTER("moonlm_token_to_piece");
    return (moonlm_status)moonlmgo_token_to_piece((uintptr_t)model, token, buf, cap, n_out);
}

moonlm_status moonlm_detokenize(const moonlm_model *model, const int32_t *tokens, size_t n, char *buf,
                                size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_detokenize");
    return (moonlm_status)moonlmgo_detokenize((uintptr_t)model, (int32_t *)tokens, n, buf, cap, n_out);
}

moonlm_status moonlm_chat_apply_template(const moonlm_model *model, const moonlm_message *msgs, size_t n,
                                         int add_assistant, char *out, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_chat_apply_template");
    return (moonlm_status)moonlmgo_chat_apply_template((uintptr_t)model, NULL, 0, (moonlm_message *)msgs, n,
                                                       add_assistant, out, cap, n_out);
}

moonlm_status moonlm_chat_apply_template_named(const moonlm_model *model, const char *name,
                                               const moonlm_message *msgs, size_t n, int add_assistant,
                                               char *out, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_chat_apply_template_named");
    return (moonlm_status)moonlmgo_chat_apply_template((uintptr_t)model, (char *)name, 1, (moonlm_message *)msgs,
                                                       n, add_assistant, out, cap, n_out);
}

moonlm_status moonlm_chat_builtin_templates(char *buf, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_chat_builtin_templates");
    return (moonlm_status)moonlmgo_chat_builtin_templates(buf, cap, n_out);
}

/* ---- sessions ----------------------------------------------------------- */

moonlm_status moonlm_session_new(const moonlm_model *model, const moonlm_session_params *params,
                                 moonlm_session **out) {
    MOONLM__ENTER("moonlm_session_new");
    if (out == NULL) {
        moonlm__errorf("moonlm_session_new: out is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    moonlm_session_params p;
    moonlm_session_params_default(&p);
    if (params != NULL) {
        moonlm_status st = moonlm__read_struct("moonlm_session_new", "moonlm_session_params", params,
                                               MOONLM__SESSION_PARAMS_V1_SIZE, sizeof(moonlm_session_params), &p);
        if (st != MOONLM_OK) {
            return st;
        }
    }
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_session_new((uintptr_t)model, &p, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_session *)h;
    }
    return st;
}

moonlm_status moonlm_session_free(moonlm_session *session) {
    MOONLM__ENTER("moonlm_session_free");
    if (session == NULL) {
        return MOONLM_OK;
    }
    return (moonlm_status)moonlmgo_session_free((uintptr_t)session);
}

moonlm_status moonlm_prefill(moonlm_session *session, const int32_t *tokens, size_t n, float *logits,
                             size_t logits_cap) {
    MOONLM__ENTER("moonlm_prefill");
    return (moonlm_status)moonlmgo_prefill((uintptr_t)session, (int32_t *)tokens, n, logits, logits_cap, 0);
}

moonlm_status moonlm_decode(moonlm_session *session, int32_t token, float *logits, size_t logits_cap) {
    MOONLM__ENTER("moonlm_decode");
    return (moonlm_status)moonlmgo_prefill((uintptr_t)session, &token, 1, logits, logits_cap, 1);
}

moonlm_status moonlm_session_rewind(moonlm_session *session, size_t n_keep) {
    MOONLM__ENTER("moonlm_session_rewind");
    return (moonlm_status)moonlmgo_session_rewind((uintptr_t)session, n_keep);
}

moonlm_status moonlm_session_position(const moonlm_session *session, size_t *pos) {
    MOONLM__ENTER("moonlm_session_position");
    return (moonlm_status)moonlmgo_session_position((uintptr_t)session, pos);
}

moonlm_status moonlm_session_cancel(moonlm_session *session) {
    MOONLM__ENTER("moonlm_session_cancel");
    return (moonlm_status)moonlmgo_session_cancel((uintptr_t)session);
}

moonlm_status moonlm_session_last_error(const moonlm_session *session, char *buf, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_session_last_error");
    return (moonlm_status)moonlmgo_session_last_error((uintptr_t)session, buf, cap, n_out);
}

/* ---- sampler ------------------------------------------------------------ */

moonlm_status moonlm_sampler_new(const moonlm_sampler_params *params, moonlm_sampler **out) {
    MOONLM__ENTER("moonlm_sampler_new");
    if (out == NULL) {
        moonlm__errorf("moonlm_sampler_new: out is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    moonlm_sampler_params p;
    moonlm_sampler_params_default(&p);
    if (params != NULL) {
        moonlm_status st = moonlm__read_struct("moonlm_sampler_new", "moonlm_sampler_params", params,
                                               MOONLM__SAMPLER_PARAMS_V1_SIZE, sizeof(moonlm_sampler_params), &p);
        if (st != MOONLM_OK) {
            return st;
        }
    }
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_sampler_new(&p, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_sampler *)h;
    }
    return st;
}

moonlm_status moonlm_sampler_free(moonlm_sampler *sampler) {
    MOONLM__ENTER("moonlm_sampler_free");
    if (sampler == NULL) {
        return MOONLM_OK;
    }
    return (moonlm_status)moonlmgo_sampler_free((uintptr_t)sampler);
}

moonlm_status moonlm_grammar_new(const moonlm_model *model, const char *gbnf, size_t len, moonlm_grammar **out) {
    MOONLM__ENTER("moonlm_grammar_new");
    if (out == NULL) {
        moonlm__errorf("moonlm_grammar_new: out is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (gbnf == NULL && len > 0) {
        moonlm__errorf("moonlm_grammar_new: gbnf is NULL but len is %zu", len);
        return MOONLM_INVALID_ARGUMENT;
    }
    uintptr_t h = 0;
    moonlm_status st = (moonlm_status)moonlmgo_grammar_new((uintptr_t)model, (char *)gbnf, len, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_grammar *)h;
    }
    return st;
}

moonlm_status moonlm_grammar_from_json_schema(const moonlm_model *model, const char *schema, size_t len,
                                              moonlm_grammar **out) {
    MOONLM__ENTER("moonlm_grammar_from_json_schema");
    if (out == NULL) {
        moonlm__errorf("moonlm_grammar_from_json_schema: out is NULL");
        return MOONLM_INVALID_ARGUMENT;
    }
    *out = NULL;
    if (schema == NULL && len > 0) {
        moonlm__errorf("moonlm_grammar_from_json_schema: schema is NULL but len is %zu", len);
        return MOONLM_INVALID_ARGUMENT;
    }
    uintptr_t h = 0;
    moonlm_status st =
        (moonlm_status)moonlmgo_grammar_from_json_schema((uintptr_t)model, (char *)schema, len, &h);
    if (st == MOONLM_OK) {
        *out = (moonlm_grammar *)h;
    }
    return st;
}

moonlm_status moonlm_grammar_free(moonlm_grammar *grammar) {
    MOONLM__ENTER("moonlm_grammar_free");
    if (grammar == NULL) {
        return MOONLM_OK;
    }
    return (moonlm_status)moonlmgo_grammar_free((uintptr_t)grammar);
}

moonlm_status moonlm_sampler_set_model(moonlm_sampler *sampler, const moonlm_model *model) {
    MOONLM__ENTER("moonlm_sampler_set_model");
    return (moonlm_status)moonlmgo_sampler_set_model((uintptr_t)sampler, (uintptr_t)model);
}

moonlm_status moonlm_sampler_accept(moonlm_sampler *sampler, int32_t token) {
    MOONLM__ENTER("moonlm_sampler_accept");
    return (moonlm_status)moonlmgo_sampler_accept((uintptr_t)sampler, token);
}

moonlm_status moonlm_sampler_reset(moonlm_sampler *sampler) {
    MOONLM__ENTER("moonlm_sampler_reset");
    return (moonlm_status)moonlmgo_sampler_reset((uintptr_t)sampler);
}

moonlm_status moonlm_sample(moonlm_sampler *sampler, const float *logits, size_t n, int32_t *token) {
    MOONLM__ENTER("moonlm_sample");
    return (moonlm_status)moonlmgo_sample((uintptr_t)sampler, (float *)logits, n, token);
}

/* ---- generate ----------------------------------------------------------- */

/* Called from Go: the load-progress callback of moonlm_model_params. */
MOONLM__HIDDEN int moonlmc_call_progress(uintptr_t cb, float fraction, uintptr_t user_data) {
    return ((moonlm_progress_callback)cb)(fraction, (void *)user_data);
}

/* Called from Go: C function pointers cannot be called from Go directly. */
MOONLM__HIDDEN int moonlmc_call_piece(uintptr_t cb, const char *piece, size_t len, int32_t token, uintptr_t user_data) {
    return ((moonlm_piece_callback)cb)(piece, len, token, (void *)user_data);
}

moonlm_status moonlm_generate(moonlm_session *session, moonlm_sampler *sampler, const int32_t *prompt,
                              size_t n_prompt, size_t max_tokens, moonlm_piece_callback callback,
                              void *user_data, size_t *n_generated) {
    if (n_generated != NULL) {
        *n_generated = 0;
    }
    MOONLM__ENTER("moonlm_generate");
    return (moonlm_status)moonlmgo_generate((uintptr_t)session, (uintptr_t)sampler, (int32_t *)prompt, n_prompt,
                                            max_tokens, (uintptr_t)callback, (uintptr_t)user_data, n_generated);
}

moonlm_status moonlm_generate_ex(moonlm_session *session, moonlm_sampler *sampler, const int32_t *prompt,
                                 size_t n_prompt, const moonlm_generate_params *params,
                                 moonlm_generate_result *result) {
    MOONLM__ENTER("moonlm_generate_ex");
    if (result != NULL && result->size < MOONLM__GENERATE_RESULT_V1_SIZE) {
        moonlm__errorf("moonlm_generate_ex: result->size is %zu, want at least %zu (set it to "
                       "sizeof(moonlm_generate_result))",
                       result->size, (size_t)MOONLM__GENERATE_RESULT_V1_SIZE);
        return MOONLM_INVALID_ARGUMENT;
    }
    moonlm_generate_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.finish_reason = MOONLM_FINISH_NONE;
    r.last_token = -1;
    moonlm_generate_params p;
    moonlm__generate_params_defaults(&p);
    moonlm_status st = MOONLM_OK;
    if (params != NULL) {
        st = moonlm__read_struct("moonlm_generate_ex", "moonlm_generate_params", params,
                                 MOONLM__GENERATE_PARAMS_V1_SIZE, sizeof(moonlm_generate_params), &p);
    }
    if (st == MOONLM_OK) {
        st = (moonlm_status)moonlmgo_generate_ex((uintptr_t)session, (uintptr_t)sampler, (int32_t *)prompt,
                                                 n_prompt, &p, &r);
    }
    if (result != NULL) {
        /* Only the members this library knows; a newer caller's others stay as given. */
        size_t keep = result->size;
        memcpy(result, &r, keep < sizeof r ? keep : sizeof r);
        result->size = keep;
    }
    return st;
}

/* ---- tool calling ------------------------------------------------------- */

moonlm_status moonlm_chat_apply_template_json(const moonlm_model *model, const char *name, const char *messages_json,
                                              const char *tools_json, int add_assistant, char *out, size_t cap,
                                              size_t *n_out) {
    MOONLM__ENTER("moonlm_chat_apply_template_json");
    return (moonlm_status)moonlmgo_chat_apply_template_json((uintptr_t)model, (char *)name, (char *)messages_json,
                                                            (char *)tools_json, add_assistant, out, cap, n_out);
}

moonlm_status moonlm_chat_parse_tool_calls(const moonlm_model *model, const char *name, const char *text, size_t len,
                                           char *out, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_chat_parse_tool_calls");
    return (moonlm_status)moonlmgo_chat_parse_tool_calls((uintptr_t)model, (char *)name, (char *)text, len, out, cap,
                                                         n_out);
}

/* ---- embeddings and reranking ------------------------------------------ */

static void moonlm__embed_params_defaults(moonlm_embed_params *params) {
    memset(params, 0, sizeof *params);
    params->size = sizeof *params;
    params->pooling = MOONLM_POOLING_MODEL;
}

void moonlm_embed_params_init(moonlm_embed_params *params, size_t size) {
    if (params == NULL || size < sizeof(size_t)) {
        return;
    }
    moonlm_embed_params d;
    moonlm__embed_params_defaults(&d);
    moonlm__fill_struct(params, size, &d, sizeof d);
}

moonlm_status moonlm_embed_size(const moonlm_model *model, int32_t pooling, size_t *n_out) {
    MOONLM__ENTER("moonlm_embed_size");
    return (moonlm_status)moonlmgo_embed_size((uintptr_t)model, pooling, n_out);
}

/* Reads params (NULL: defaults) into p. */
static moonlm_status moonlm__embed_params(const char *fn, const moonlm_embed_params *params, moonlm_embed_params *p) {
    moonlm__embed_params_defaults(p);
    if (params == NULL) {
        return MOONLM_OK;
    }
    return moonlm__read_struct(fn, "moonlm_embed_params", params, sizeof(moonlm_embed_params),
                               sizeof(moonlm_embed_params), p);
}

moonlm_status moonlm_embed(const moonlm_model *model, const char *const *texts, const size_t *lens, size_t n_texts,
                           const moonlm_embed_params *params, float *out, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_embed");
    moonlm_embed_params p;
    moonlm_status st = moonlm__embed_params("moonlm_embed", params, &p);
    if (st != MOONLM_OK) {
        return st;
    }
    return (moonlm_status)moonlmgo_embed((uintptr_t)model, 0, (char **)texts, (size_t *)lens, n_texts, NULL, NULL,
                                         p.pooling, p.flags, out, cap, n_out);
}

moonlm_status moonlm_embed_tokens(const moonlm_model *model, const int32_t *const *tokens, const size_t *n_tokens,
                                  size_t n_texts, const moonlm_embed_params *params, float *out, size_t cap,
                                  size_t *n_out) {
    MOONLM__ENTER("moonlm_embed_tokens");
    moonlm_embed_params p;
    moonlm_status st = moonlm__embed_params("moonlm_embed_tokens", params, &p);
    if (st != MOONLM_OK) {
        return st;
    }
    return (moonlm_status)moonlmgo_embed((uintptr_t)model, 1, NULL, NULL, n_texts, (int32_t **)tokens,
                                         (size_t *)n_tokens, p.pooling, p.flags, out, cap, n_out);
}

moonlm_status moonlm_rerank(const moonlm_model *model, const char *query, const char *const *docs, size_t n_docs,
                            float *scores, size_t cap, size_t *n_out) {
    MOONLM__ENTER("moonlm_rerank");
    return (moonlm_status)moonlmgo_rerank((uintptr_t)model, (char *)query, (char **)docs, n_docs, scores, cap, n_out);
}
