/*
 * moonlm.h - the C interface of moonlm, a CPU inference engine for GGUF
 * language models.
 *
 * This header is the whole contract: every symbol the library exports is
 * declared here, and nothing else is part of the ABI. It needs only a C99
 * (or C++) compiler and <stddef.h>/<stdint.h>.
 *
 * Conventions (see docs/C-API.md for the long form):
 *
 *  - Status codes. Almost every function returns a moonlm_status; MOONLM_OK
 *    (0) is success. After any call that returns a moonlm_status,
 *    moonlm_last_error() describes the outcome on the calling thread.
 *
 *  - Handles. moonlm_model, moonlm_session and moonlm_sampler are opaque
 *    handles. Never dereference them. Passing NULL, a freed handle or a
 *    handle of the wrong kind returns MOONLM_INVALID_ARGUMENT; it never
 *    crashes. Freeing a handle twice is harmless. Handle values are never
 *    reused while the library is loaded.
 *
 *  - Caller-owned buffers. Every output lands in memory the caller owns.
 *    Functions that produce variable-length output take (buf, cap, n_out):
 *    on MOONLM_OK *n_out is the number of elements written; if cap is too
 *    small the function returns MOONLM_BUFFER_TOO_SMALL, writes nothing to
 *    buf, and stores in *n_out the size needed, so a caller may ask for the
 *    size first with buf = NULL, cap = 0. Text outputs are NUL-terminated:
 *    *n_out counts bytes without the terminator, and cap must be at least
 *    *n_out + 1 (exactly like snprintf).
 *
 *  - Versioned structs. Parameter and info structs start with a size_t
 *    `size` member that the caller sets to sizeof(the struct). Fill them with
 *    the matching *_default() macro, then change what you need: it calls
 *    *_init(params, sizeof *params), which writes exactly the caller's
 *    sizeof bytes (defaults where this library knows the member, zeros
 *    beyond), so a program built against an older, smaller header can run
 *    with a newer library without it writing past the struct. A size
 *    smaller than the library's first version of the struct is rejected with
 *    MOONLM_INVALID_ARGUMENT; a larger size (a caller built against a newer
 *    header) is accepted only if every byte beyond what this library knows is
 *    zero, so a newer option is never silently ignored.
 *
 *  - Threads. All functions may be called from any thread. Models are
 *    shared freely between threads. A session or sampler is used by one
 *    thread at a time: a second concurrent call on the same session (or
 *    sampler) returns MOONLM_BUSY instead of waiting. Different sessions,
 *    even over one model, run in parallel. moonlm_session_cancel() may be
 *    called from any thread at any time.
 *
 *  - fork(). The library's runtime does not survive fork(). In a child
 *    process every function that returns a moonlm_status returns
 *    MOONLM_FORKED immediately (it never hangs); load the library afresh in
 *    a process you exec() instead.
 *
 *  - Tokens are int32_t ids in [0, n_vocab).
 */
#ifndef MOONLM_H
#define MOONLM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(MOONLM_BUILDING_DLL)
#define MOONLM_API __declspec(dllexport)
#elif defined(_WIN32)
#define MOONLM_API
#elif defined(__GNUC__)
#define MOONLM_API __attribute__((visibility("default")))
#else
#define MOONLM_API
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

#define MOONLM_VERSION_MAJOR 0
#define MOONLM_VERSION_MINOR 1
#define MOONLM_VERSION_PATCH 0
#define MOONLM_VERSION_STRING "0.1.0"

/*
 * MOONLM_ABI_VERSION is bumped on every incompatible change to this header
 * (a removed or changed function, a changed struct layout, a renumbered
 * constant). Additions (new functions, new trailing struct members, new
 * status codes) do not bump it. Compare it with moonlm_abi_version() at run
 * time to detect a header/library mismatch.
 */
#define MOONLM_ABI_VERSION 1

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. */
MOONLM_API const char *moonlm_version(void);

/* The library's ABI version (see MOONLM_ABI_VERSION). */
MOONLM_API int moonlm_abi_version(void);

/* ------------------------------------------------------------------------ */
/* Status codes and errors                                                   */
/* ------------------------------------------------------------------------ */

typedef enum moonlm_status {
    MOONLM_OK = 0,
    MOONLM_INVALID_ARGUMENT = 1, /* NULL/freed/foreign handle, bad value, bad struct size */
    MOONLM_IO = 2,               /* the OS failed a read (missing file, truncated mapping) */
    MOONLM_BAD_FILE = 3,         /* not a valid GGUF model (corrupt or inconsistent) */
    MOONLM_UNSUPPORTED = 4,      /* valid, but an architecture/type/feature we lack */
    MOONLM_BUFFER_TOO_SMALL = 5, /* output buffer short; *n_out holds the size needed */
    MOONLM_CONTEXT_FULL = 6,     /* the session has no room for more tokens */
    MOONLM_CANCELLED = 7,        /* moonlm_session_cancel() stopped the call */
    MOONLM_BUSY = 8,             /* the session/sampler is in use by another thread */
    MOONLM_OUT_OF_MEMORY = 9,    /* an allocation failed */
    MOONLM_INTERNAL = 10,        /* a bug in moonlm (a recovered panic); please report it */
    MOONLM_FORKED = 11           /* called in a fork()ed child; the library is unusable there */
} moonlm_status;

/*
 * A short static English name for a status, e.g. "buffer too small".
 * Unknown values give "unknown status". Never NULL.
 */
MOONLM_API const char *moonlm_status_string(moonlm_status status);

/*
 * The message of the last call on the calling thread that returned a
 * moonlm_status: "" after MOONLM_OK, otherwise one line saying what failed
 * and where, e.g. "moonlm_model_open: open model.gguf: no such file or
 * directory". Never NULL. The string belongs to the library; it stays valid
 * and unchanged until the next moonlm_* call on the same thread (other
 * threads never touch it). Messages longer than 4095 bytes are truncated.
 */
MOONLM_API const char *moonlm_last_error(void);

/* ------------------------------------------------------------------------ */
/* Models                                                                    */
/* ------------------------------------------------------------------------ */

/* A loaded model: weights (memory-mapped, read-only), vocabulary, template. */
typedef struct moonlm_model moonlm_model;

/*
 * Weight packing at open (moonlm_model_params.pack). Where the CPU's kernels
 * are faster on a repacked weight layout (interleaved rows of K-quant and
 * Q8_0 matrices), the model's matrices are repacked when it is opened; the
 * logits are the same either way. DEFAULT follows the environment
 * (MOONLM_PACK=0 turns packing off) and is on otherwise.
 */
typedef enum moonlm_pack_mode {
    MOONLM_PACK_DEFAULT = 0,
    MOONLM_PACK_ON = 1,
    MOONLM_PACK_OFF = 2
} moonlm_pack_mode;

/*
 * The on-disk cache of packed weights (moonlm_model_params.packed_cache), so
 * that a second open maps the packed layout instead of rebuilding it.
 * DEFAULT follows the environment (MOONLM_PACKED_CACHE=0 turns it off) and
 * is on otherwise. Any cache failure (read-only folder, full disk, corrupt
 * entry) falls back to packing in memory: the model still opens.
 */
typedef enum moonlm_packed_cache_mode {
    MOONLM_PACKED_CACHE_DEFAULT = 0,
    MOONLM_PACKED_CACHE_ON = 1,
    MOONLM_PACKED_CACHE_OFF = 2
} moonlm_packed_cache_mode;

/*
 * A verification feature, not a speed or quality setting: applications
 * leave it at DEFAULT; the other modes exist to check moonlm against a
 * reference engine.
 *
 * The arithmetic a model computes with (moonlm_model_params.numerics). Every
 * mode computes the same model; they differ only in the order of float
 * additions and in how activations are rounded, so the logits differ in
 * their last digits (more on random-weight test models, which amplify such
 * noise).
 *
 * DEFAULT follows the environment variable MOONLM_NUMERICS as it was when
 * the library was loaded ("fast", "llamacpp", "llamacpp-norepack" or "ik";
 * an unknown value makes moonlm_model_open fail with
 * MOONLM_INVALID_ARGUMENT) and uses the CPU's fastest kernels otherwise.
 *
 * The other modes reproduce a reference implementation's logits bit for
 * bit, for checking against it: LLAMACPP is llama.cpp's x86 CPU backend
 * with its defaults (q4_K weights repacked), LLAMACPP_NOREPACK the same
 * without repacked layouts, IK is ik_llama.cpp (its q8_2 activations, fused
 * ops and flash attention). They run pure-Go kernels that read the covered
 * weights in place in the file mapping: several times slower. They ignore
 * MOONLM_NUMERICS, always pack (pack is ignored) and never use the
 * packed-weight cache. The llama.cpp modes cover q8_0, q4_1, q5_0, q4_K
 * and q6_K weights, IK covers q8_0, q4_K and q6_K; float weight matrices
 * keep the fast kernels and are not bit-exact. What a mode cannot follow
 * is MOONLM_UNSUPPORTED naming it: at open, a quantized weight type it does
 * not cover and, for IK, a head size that is not a multiple of 16, layer
 * norms, soft-capped attention and encoders (embedding models); for IK, an
 * f32 KV cache at moonlm_session_new, a prefill or decode past 128
 * positions (one key block of ik's flash attention) and a prefill of 32
 * tokens or more at once (from there ik multiplies q8_0 and q4_K weights
 * another way; prefill a longer prompt in calls of up to 31 tokens).
 */
typedef enum moonlm_numerics {
    MOONLM_NUMERICS_DEFAULT = 0,
    MOONLM_NUMERICS_LLAMACPP = 1,
    MOONLM_NUMERICS_LLAMACPP_NOREPACK = 2,
    MOONLM_NUMERICS_IK = 3
} moonlm_numerics;

/* ------------------------------------------------------------------------ */
/* Load progress                                                              */
/*
 * moonlm_model_params.progress, when not NULL, is called by
 * moonlm_model_open on the calling thread, before it returns, with the
 * fraction of the open done: mapping the file, parsing it, reading the
 * tensors, and repacking the weights (most of the time of a large model's
 * open, reported in proportion to the bytes packed). The fractions are in
 * [0, 1], never decrease, rise in steps of at least 0.01 (so at most about
 * a hundred calls per open) and end with 1.0 when the open succeeds.
 * Returning non-zero cancels the open: moonlm_model_open then returns
 * MOONLM_CANCELLED with *out NULL, having released everything it took, and
 * calls progress no more. The callback must not call back into the
 * library for the model being opened (it has no handle yet).
 */
typedef int (*moonlm_progress_callback)(float fraction, void *user_data);

typedef struct moonlm_model_params {
    size_t size;       /* sizeof(moonlm_model_params) */
    int32_t n_threads; /* size of the worker pool sessions share; 0 = one per CPU core */
    uint32_t flags;    /* reserved for future use; must be 0 */
    /* Added without an ABI bump; a caller whose size ends before these gets the defaults. */
    int32_t pack;         /* a moonlm_pack_mode; default MOONLM_PACK_DEFAULT */
    int32_t packed_cache; /* a moonlm_packed_cache_mode; default MOONLM_PACKED_CACHE_DEFAULT */
    /*
     * The cache folder (NUL-terminated, read during moonlm_model_open only);
     * NULL or "" = $MOONLM_PACKED_CACHE_DIR, else $XDG_CACHE_HOME/moonlm/packed
     * or ~/.cache/moonlm/packed. Eviction only ever deletes moonlm's own
     * entries there.
     */
    const char *packed_cache_dir;
    /*
     * The cache's size budget in bytes: after adding an entry, the least
     * recently used ones are evicted down to it (the newest stays even if
     * alone larger). 0 = $MOONLM_PACKED_CACHE_BYTES, else 8 GiB. At most
     * INT64_MAX.
     */
    uint64_t packed_cache_bytes;
    /* Added without an ABI bump; a caller whose size ends before it gets the default. */
    int32_t numerics; /* a moonlm_numerics; default MOONLM_NUMERICS_DEFAULT */
    /*
     * Added without an ABI bump; a caller whose size ends before these gets
     * no progress calls. See "Load progress" below.
     */
    moonlm_progress_callback progress; /* NULL = none (the default) */
    void *progress_user_data;          /* passed to progress as is */
} moonlm_model_params;

/*
 * Fills the size bytes at params (the caller's sizeof(moonlm_model_params))
 * with the defaults, and params->size with size: members this library does
 * not know are zeroed. Nothing is written if params is NULL or size is
 * smaller than the size member.
 */
MOONLM_API void moonlm_model_params_init(moonlm_model_params *params, size_t size);

/*
 * Fills *params with the defaults, including params->size: a macro over
 * moonlm_model_params_init with the caller's sizeof. (The function of this
 * name, kept for programs built against earlier headers, writes this
 * library's sizeof(moonlm_model_params) bytes.)
 */
MOONLM_API void moonlm_model_params_default(moonlm_model_params *params);
#define moonlm_model_params_default(params) moonlm_model_params_init((params), sizeof *(params))

/*
 * Opens the GGUF model at path (a NUL-terminated file name). params may be
 * NULL for the defaults. On MOONLM_OK *out is a new handle; on failure *out
 * is set to NULL. Fails with MOONLM_IO (cannot read), MOONLM_BAD_FILE (not a
 * valid GGUF model) or MOONLM_UNSUPPORTED (architecture or tensor type not
 * supported), or MOONLM_CANCELLED when params->progress asked to stop.
 *
 * The file is memory-mapped: do not modify or truncate it while the model is
 * open. If it is truncated anyway, calls that touch the lost pages return
 * MOONLM_IO instead of killing the process with SIGBUS.
 */
MOONLM_API moonlm_status moonlm_model_open(const char *path, const moonlm_model_params *params,
                                           moonlm_model **out);

/*
 * Releases the handle. NULL is a no-op returning MOONLM_OK; a freed or
 * foreign handle returns MOONLM_INVALID_ARGUMENT and does nothing.
 * The handle is invalid from this call on, but sessions created from the
 * model stay fully usable: the model's memory is released when the last of
 * its sessions is freed.
 */
MOONLM_API moonlm_status moonlm_model_free(moonlm_model *model);

/* Facts about a model; see moonlm_model_get_info(). -1 means unknown/none. */
typedef struct moonlm_model_info {
    size_t size;         /* caller sets sizeof(moonlm_model_info) */
    int32_t n_vocab;     /* vocabulary size */
    int32_t n_ctx_train; /* context length the model was trained with */
    int32_t n_embd;      /* embedding (hidden) size */
    int32_t n_layer;     /* transformer blocks */
    int32_t n_head;      /* attention heads */
    int32_t n_head_kv;   /* key/value heads */
    int32_t token_bos;   /* beginning of sequence, -1 if none */
    int32_t token_eos;   /* end of sequence, -1 if none */
    int32_t token_eot;   /* end of turn, -1 if none */
    int32_t reserved;    /* 0 */
} moonlm_model_info;

/*
 * Fills *info (whose size member the caller has set) with the model's facts.
 * Members the library does not know (from a newer header) are left as given.
 */
MOONLM_API moonlm_status moonlm_model_get_info(const moonlm_model *model, moonlm_model_info *info);

/* Where an open model's packed weights came from (moonlm_open_stats.pack_source). */
typedef enum moonlm_pack_source {
    MOONLM_PACK_SOURCE_OFF = 0,         /* packing off, or it failed: the model runs unpacked */
    MOONLM_PACK_SOURCE_NONE = 1,        /* no matrix has a packed layout with this CPU's kernels */
    MOONLM_PACK_SOURCE_PACKED = 2,      /* packed in memory at open (cache off or unusable) */
    MOONLM_PACK_SOURCE_CACHE_WRITE = 3, /* packed in memory; written to the cache in the background */
    MOONLM_PACK_SOURCE_CACHE_HIT = 4    /* mapped from the cache */
} moonlm_pack_source;

/* How a model was opened; see moonlm_model_open_stats(). Times in milliseconds. */
typedef struct moonlm_open_stats {
    size_t size;             /* caller sets sizeof(moonlm_open_stats) */
    int32_t pack_source;     /* a moonlm_pack_source */
    int32_t packed_matrices; /* matrices that have a packed form */
    int64_t packed_bytes;    /* size of the packed weights */
    double map_ms;           /* opening and mapping the model file */
    double parse_ms;         /* GGUF header, metadata and tensor table */
    double tensors_ms;       /* configuration, tokenizer, tensor checks, worker pool */
    double pack_ms;          /* packing the weights, or mapping them from the cache */
} moonlm_open_stats;

/*
 * Fills *stats (whose size member the caller has set) with how the model was
 * opened: the time of each phase and what packing did, e.g. to check that a
 * packed-weight cache is hit. A cache entry is written while the model is in
 * use; freeing the model (and its last session) waits for the write. Members
 * the library does not know (from a newer header) are left as given. A
 * compatible addition (MOONLM_ABI_VERSION unchanged): look it up with
 * dlsym() if you must run with older libraries.
 */
MOONLM_API moonlm_status moonlm_model_open_stats(const moonlm_model *model, moonlm_open_stats *stats);

/*
 * The architecture name from the GGUF metadata ("llama", "qwen3", ...) as
 * NUL-terminated text, with the (buf, cap, n_out) protocol.
 */
MOONLM_API moonlm_status moonlm_model_architecture(const moonlm_model *model, char *buf, size_t cap,
                                                   size_t *n_out);

/*
 * The model's Jinja chat template (tokenizer.chat_template) as NUL-terminated
 * text, with the (buf, cap, n_out) protocol. A model without a template gives
 * MOONLM_OK and "" (*n_out = 0).
 */
MOONLM_API moonlm_status moonlm_model_chat_template(const moonlm_model *model, char *buf, size_t cap,
                                                    size_t *n_out);

/*
 * 1 if token ends generation for this model (EOS, EOT and the like), 0 if
 * not, or if the model handle or token is invalid (then moonlm_last_error()
 * says so).
 */
MOONLM_API int moonlm_model_is_eog(const moonlm_model *model, int32_t token);

/* ------------------------------------------------------------------------ */
/* Tokens and text                                                           */
/* ------------------------------------------------------------------------ */

/* moonlm_tokenize flags. */
#define MOONLM_TOKENIZE_ADD_SPECIAL 1u   /* add BOS/EOS as the model's metadata asks */
#define MOONLM_TOKENIZE_PARSE_SPECIAL 2u /* turn special-token text ("<|im_end|>") into their ids */

/*
 * Tokenizes len bytes of UTF-8 text (it need not be NUL-terminated; text may
 * be NULL if len is 0) into out[0..cap). On MOONLM_OK *n_out is the number
 * of tokens; on MOONLM_BUFFER_TOO_SMALL *n_out is the number needed and out
 * is untouched. Unknown flag bits give MOONLM_INVALID_ARGUMENT.
 */
MOONLM_API moonlm_status moonlm_tokenize(const moonlm_model *model, const char *text, size_t len,
                                         uint32_t flags, int32_t *out, size_t cap, size_t *n_out);

/*
 * The text of one token, as it appears inside a longer text (for
 * SentencePiece vocabularies a word-initial piece keeps its leading space),
 * NUL-terminated, with the (buf, cap, n_out) protocol. A piece may be part of
 * a multi-byte UTF-8 character; to stream text, prefer moonlm_detokenize over
 * everything generated so far or moonlm_generate().
 */
MOONLM_API moonlm_status moonlm_token_to_piece(const moonlm_model *model, int32_t token, char *buf,
                                               size_t cap, size_t *n_out);

/*
 * The text of n tokens, NUL-terminated, with the (buf, cap, n_out) protocol.
 * Special tokens such as BOS/EOS render as nothing.
 */
MOONLM_API moonlm_status moonlm_detokenize(const moonlm_model *model, const int32_t *tokens, size_t n,
                                           char *buf, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Chat templates                                                            */
/* ------------------------------------------------------------------------ */

/* One chat message; both strings NUL-terminated UTF-8. */
typedef struct moonlm_message {
    const char *role;    /* "system", "user", "assistant", ... */
    const char *content; /* the message text */
} moonlm_message;

/*
 * Renders n messages with the model's chat template into NUL-terminated
 * text, with the (buf, cap, n_out) protocol. If add_assistant is nonzero the
 * text ends with the prompt for the assistant's reply. Tokenize the result
 * with MOONLM_TOKENIZE_PARSE_SPECIAL (and without ADD_SPECIAL if the template
 * already writes BOS). A model without a template (a base model) is
 * MOONLM_UNSUPPORTED, with a message naming the built-in templates: nothing
 * is guessed; use moonlm_chat_apply_template_named to choose one. A template
 * using Jinja features moonlm lacks is rendered in the built-in format of
 * the family its marker strings name (<|im_start|> is "chatml", and so on),
 * and is MOONLM_UNSUPPORTED, with the reason, if they name none. An error
 * the template raises itself (raise_exception) is MOONLM_INVALID_ARGUMENT.
 */
MOONLM_API moonlm_status moonlm_chat_apply_template(const moonlm_model *model, const moonlm_message *msgs,
                                                    size_t n, int add_assistant, char *out, size_t cap,
                                                    size_t *n_out);

/*
 * moonlm_chat_apply_template with a choice of template: name NULL or "" is
 * the model's own (exactly moonlm_chat_apply_template), otherwise one of the
 * built-in formats listed by moonlm_chat_builtin_templates ("chatml",
 * "gemma", "llama2", "llama3", "mistral", "phi3", "zephyr"), each writing
 * what its family's reference template writes. An unknown name is
 * MOONLM_INVALID_ARGUMENT, with a message listing the names. A compatible
 * addition (MOONLM_ABI_VERSION unchanged): look it up with dlsym() if you
 * must run with older libraries.
 */
MOONLM_API moonlm_status moonlm_chat_apply_template_named(const moonlm_model *model, const char *name,
                                                          const moonlm_message *msgs, size_t n,
                                                          int add_assistant, char *out, size_t cap,
                                                          size_t *n_out);

/*
 * The names moonlm_chat_apply_template_named accepts, comma-separated and
 * sorted ("chatml,gemma,..."), NUL-terminated, with the (buf, cap, n_out)
 * protocol. A compatible addition, like moonlm_chat_apply_template_named.
 */
MOONLM_API moonlm_status moonlm_chat_builtin_templates(char *buf, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */
/* ------------------------------------------------------------------------ */

/* A sequence being evaluated: its KV cache and position. */
typedef struct moonlm_session moonlm_session;

/* KV cache element types. */
typedef enum moonlm_kv_type {
    MOONLM_KV_F16 = 0, /* half the memory; matches llama.cpp's default */
    MOONLM_KV_F32 = 1,
    /* about half of F16's memory: keys and values in Q8_0 blocks, attention as
       llama.cpp's flash attention over them (-ctk q8_0 -ctv q8_0); needs a head
       dimension that is a multiple of 32 (else MOONLM_UNSUPPORTED) */
    MOONLM_KV_Q8_0 = 2
} moonlm_kv_type;

typedef struct moonlm_session_params {
    size_t size;       /* sizeof(moonlm_session_params) */
    int32_t n_ctx;     /* context length in tokens; 0 = the model's n_ctx_train */
    int32_t n_threads; /* 0 = share the model's worker pool; else a pool of its own */
    int32_t kv_type;   /* a moonlm_kv_type; default MOONLM_KV_F16 */
    uint32_t flags;    /* reserved for future use; must be 0 */
    /* Added after the first version (a caller passing that size gets the
       defaults): the checkpoints of a hybrid model's recurrent state, which
       make a rewind cheap (section "Checkpoints" below); other models ignore
       them. */
    int32_t checkpoint_every; /* decoded positions between checkpoints; 0 = 32, negative = none while decoding */
    uint32_t reserved;        /* must be 0 */
    int64_t checkpoint_bytes; /* memory the checkpoints may take; 0 = 128 MiB, negative = no checkpoints */
} moonlm_session_params;

/*
 * Fills the size bytes at params (the caller's sizeof(moonlm_session_params))
 * with the defaults, and params->size with size: members this library does
 * not know are zeroed. Nothing is written if params is NULL or size is
 * smaller than the size member.
 */
MOONLM_API void moonlm_session_params_init(moonlm_session_params *params, size_t size);

/*
 * Fills *params with the defaults, including params->size: a macro over
 * moonlm_session_params_init with the caller's sizeof. (The function of this
 * name, kept for programs built against earlier headers, writes this
 * library's sizeof(moonlm_session_params) bytes.)
 */
MOONLM_API void moonlm_session_params_default(moonlm_session_params *params);
#define moonlm_session_params_default(params) moonlm_session_params_init((params), sizeof *(params))

/*
 * Creates a session over model (params may be NULL for the defaults). The
 * session keeps the model alive; it may outlive the model handle. On failure
 * *out is set to NULL; MOONLM_OUT_OF_MEMORY if the KV cache cannot be
 * allocated.
 */
MOONLM_API moonlm_status moonlm_session_new(const moonlm_model *model, const moonlm_session_params *params,
                                            moonlm_session **out);

/*
 * Releases the session (cancelling a call still running on it in another
 * thread, which then returns MOONLM_CANCELLED). NULL is a no-op returning
 * MOONLM_OK; a freed or foreign handle returns MOONLM_INVALID_ARGUMENT.
 */
MOONLM_API moonlm_status moonlm_session_free(moonlm_session *session);

/*
 * Evaluates n tokens at the session's current position and advances it by
 * n. If logits is not NULL, the logits of the last position (n_vocab floats)
 * are written to it; logits_cap (in floats) must then be at least n_vocab or
 * the call returns MOONLM_BUFFER_TOO_SMALL before doing any work. Returns
 * MOONLM_CONTEXT_FULL, again before any work, if position + n would exceed
 * n_ctx, and MOONLM_INVALID_ARGUMENT for n = 0 or a token out of range.
 * On any failure (including MOONLM_CANCELLED) the position is unchanged.
 */
MOONLM_API moonlm_status moonlm_prefill(moonlm_session *session, const int32_t *tokens, size_t n,
                                        float *logits, size_t logits_cap);

/* moonlm_prefill of one token: the step of a generation loop. */
MOONLM_API moonlm_status moonlm_decode(moonlm_session *session, int32_t token, float *logits,
                                       size_t logits_cap);

/*
 * Keeps the first n_keep positions of the session and forgets the rest, so
 * the next prefill/decode continues at position n_keep (e.g. to reuse a
 * shared prompt prefix). n_keep greater than the position is
 * MOONLM_INVALID_ARGUMENT.
 */
MOONLM_API moonlm_status moonlm_session_rewind(moonlm_session *session, size_t n_keep);

/* The number of tokens evaluated so far (the next token's position). */
MOONLM_API moonlm_status moonlm_session_position(const moonlm_session *session, size_t *pos);

/*
 * Asks the session's running or next moonlm_prefill/moonlm_decode/
 * moonlm_generate/moonlm_generate_ex call to stop; that call returns
 * MOONLM_CANCELLED promptly (within one layer's work) with the position
 * unchanged (a generate call: as its result or *n_generated says). The request is
 * consumed by the call that returns MOONLM_CANCELLED: the call after it runs
 * normally. Callable from any thread (and from a moonlm_generate callback)
 * without blocking; it never returns MOONLM_BUSY.
 */
MOONLM_API moonlm_status moonlm_session_cancel(moonlm_session *session);

/*
 * The message of the last call on this session that ran, from any thread,
 * as NUL-terminated text with the (buf, cap, n_out) protocol: "" after
 * MOONLM_OK, otherwise the same line moonlm_last_error() gave on the thread
 * that made the call (truncated to 4095 bytes like it). Made for callers that
 * cannot read that thread's message, such as bindings that run prefill and
 * decode on worker threads. The calls that set it are moonlm_prefill,
 * moonlm_decode, moonlm_session_rewind, moonlm_session_position,
 * moonlm_generate and moonlm_generate_ex; a call rejected before it could use the session (an
 * invalid handle, MOONLM_BUSY) leaves it unchanged, as do
 * moonlm_session_cancel and this function (whose own failures, such as
 * MOONLM_BUFFER_TOO_SMALL, only go to moonlm_last_error()). Never
 * MOONLM_BUSY: while a call runs it gives the message of the previous one.
 * A compatible addition (MOONLM_ABI_VERSION unchanged): a library built
 * before it lacks the symbol, so look it up with dlsym() if you must run
 * with older libraries.
 */
MOONLM_API moonlm_status moonlm_session_last_error(const moonlm_session *session, char *buf, size_t cap,
                                                   size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Sampling                                                                  */
/* ------------------------------------------------------------------------ */

/* Chooses tokens from logits; keeps the history its penalties need. */
typedef struct moonlm_sampler moonlm_sampler;

/* moonlm_sampler_params.seed value that asks for a seed from the OS. */
#define MOONLM_SEED_RANDOM UINT64_MAX

/* A logit bias: bias is added to token's logit; -INFINITY bans the token. */
typedef struct moonlm_logit_bias {
    int32_t token;
    float bias;
} moonlm_logit_bias;

/* At most this many logit biases and DRY sequence breakers per sampler. */
#define MOONLM_MAX_LOGIT_BIAS (1u << 20)
#define MOONLM_MAX_DRY_BREAKERS 1024

/*
 * Stages apply in this order (llama.cpp's default chain): logit_bias,
 * penalties (repeat, presence, frequency), DRY, top_k, typical_p, top_p,
 * min_p, XTC, temperature, then a draw from a generator whose arithmetic is
 * the same on every platform. With mirostat 1 or 2, mirostat replaces
 * top_k, typical_p, top_p, min_p and XTC and draws after the temperature
 * (logit bias, penalties and DRY still apply, as in llama-cpp-python).
 * temperature <= 0 is greedy: the highest logit (ties to the lowest id)
 * among the tokens the stages keep. Invalid values (NaN, top_p or min_p
 * above 1 other than top_p >= 1 meaning off, penalty_last_n below -1,
 * mirostat other than 0, 1, 2, a negative token in logit_bias, an empty
 * DRY breaker) give MOONLM_INVALID_ARGUMENT.
 *
 * The members from typical_p on were added after the first version; a
 * caller whose struct ends at seed (size = offsetof(moonlm_sampler_params,
 * typical_p)) gets their defaults.
 */
typedef struct moonlm_sampler_params {
    size_t size;             /* sizeof(moonlm_sampler_params) */
    float temperature;       /* default 0.8; <= 0: greedy */
    int32_t top_k;           /* default 40; <= 0: off */
    float top_p;             /* default 0.95; >= 1: off */
    float min_p;             /* default 0.05; <= 0: off */
    float repeat_penalty;    /* default 1 (off, as is 0); llama.cpp's divide-positive/multiply-negative */
    float presence_penalty;  /* default 0 (off); subtracted once per seen token */
    float frequency_penalty; /* default 0 (off); subtracted per occurrence */
    int32_t penalty_last_n;  /* default 64; accepted tokens the penalties look at; 0: off, -1: all */
    uint64_t seed;           /* default MOONLM_SEED_RANDOM; equal seeds give equal draws */

    /* Typical sampling: keep the tokens whose surprise is closest to the
       entropy until their probability exceeds typical_p. */
    float typical_p;         /* default 1; <= 0 or >= 1: off */
    /* XTC: with probability xtc_probability per token, remove every token
       at least xtc_threshold likely except the least likely of them. */
    float xtc_probability;   /* default 0 (off) */
    float xtc_threshold;     /* default 0.1; above 0.5: off */
    /* Mirostat: target a surprise of mirostat_tau bits, learning rate
       mirostat_eta; v1 estimates the distribution from the mirostat_m most
       likely tokens. */
    int32_t mirostat;        /* default 0 (off); 1: v1, 2: v2 */
    float mirostat_tau;      /* default 5 */
    float mirostat_eta;      /* default 0.1 */
    int32_t mirostat_m;      /* default 100; >= 1 */
    /* DRY: a token that would extend a sequence of n >= dry_allowed_length
       tokens repeated from the last dry_penalty_last_n accepted tokens gets
       dry_multiplier * dry_base^(n - dry_allowed_length) subtracted. */
    float dry_multiplier;       /* default 0 (off) */
    float dry_base;             /* default 1.75; below 1: off */
    int32_t dry_allowed_length; /* default 2; >= 0 */
    int32_t dry_penalty_last_n; /* default 64; 0: off, -1: all accepted tokens */
    /*
     * DRY sequence breakers: text that stops a repeat (NUL-terminated, cut
     * to 40 bytes). NULL (the default) means llama.cpp's "\n", ":", "\"", "*";
     * non-NULL with n_dry_sequence_breakers 0 means none (NULL with a
     * nonzero count is MOONLM_INVALID_ARGUMENT). Read during
     * moonlm_sampler_new only. Breakers are matched against a model's
     * vocabulary: moonlm_generate and moonlm_generate_ex use the session's
     * model; moonlm_sample needs moonlm_sampler_set_model first when DRY is
     * on and there are breakers.
     */
    const char *const *dry_sequence_breakers;
    size_t n_dry_sequence_breakers;
    /* n_logit_bias (token, bias) pairs, read during moonlm_sampler_new; a
       token listed twice gets the sum; tokens beyond the vocabulary are
       ignored. Default none. */
    const moonlm_logit_bias *logit_bias;
    size_t n_logit_bias;
} moonlm_sampler_params;

/*
 * Fills the size bytes at params (the caller's sizeof(moonlm_sampler_params))
 * with the defaults, and params->size with size: members this library does
 * not know are zeroed. Nothing is written if params is NULL or size is
 * smaller than the size member.
 */
MOONLM_API void moonlm_sampler_params_init(moonlm_sampler_params *params, size_t size);

/*
 * Fills *params with the defaults, including params->size: a macro over
 * moonlm_sampler_params_init with the caller's sizeof. (The function of this
 * name, kept for programs built against earlier headers, writes this
 * library's sizeof(moonlm_sampler_params) bytes.)
 */
MOONLM_API void moonlm_sampler_params_default(moonlm_sampler_params *params);
#define moonlm_sampler_params_default(params) moonlm_sampler_params_init((params), sizeof *(params))

/* Creates a sampler (params may be NULL for the defaults). */
MOONLM_API moonlm_status moonlm_sampler_new(const moonlm_sampler_params *params, moonlm_sampler **out);

/* Releases the sampler; NULL is a no-op, a freed handle INVALID_ARGUMENT. */
MOONLM_API moonlm_status moonlm_sampler_free(moonlm_sampler *sampler);

/*
 * Resolves the sampler's DRY sequence breakers against model's vocabulary,
 * for moonlm_sample (the generate calls do it with the session's model).
 * Does nothing when DRY is off or has no breakers. The sampler keeps no
 * reference to the model.
 *
 * A compatible addition: look it up with dlsym() to run with older libraries.
 */
MOONLM_API moonlm_status moonlm_sampler_set_model(moonlm_sampler *sampler, const moonlm_model *model);

/*
 * Records token as part of the text (prompt or generated) for the
 * penalties. moonlm_sample does not do it: accept the tokens you keep.
 */
MOONLM_API moonlm_status moonlm_sampler_accept(moonlm_sampler *sampler, int32_t token);

/*
 * Forgets the accepted history and restarts the random generator from the
 * seed, so the sampler behaves as a new one.
 */
MOONLM_API moonlm_status moonlm_sampler_reset(moonlm_sampler *sampler);

/*
 * Chooses a token from n logits (n = n_vocab); logits is not modified. On
 * MOONLM_OK *token is the choice.
 */
MOONLM_API moonlm_status moonlm_sample(moonlm_sampler *sampler, const float *logits, size_t n,
                                       int32_t *token);

/* ------------------------------------------------------------------------ */
/* Grammars                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A grammar bound to a model's vocabulary. Passed in
 * moonlm_generate_params.grammar, it constrains generation: every token
 * keeps the text a valid prefix of the grammar, an end-of-generation token
 * is possible only where the text is complete, and generation ends
 * (MOONLM_FINISH_EOG) once nothing can follow. A grammar follows one
 * generation at a time (another call using it meanwhile gets MOONLM_BUSY)
 * and starts from its beginning at every call (the prompt is not matched).
 *
 * A compatible addition: look these up with dlsym() to run with older
 * libraries.
 */
typedef struct moonlm_grammar moonlm_grammar;

/* At most this many bytes of grammar text. */
#define MOONLM_MAX_GRAMMAR_BYTES (1u << 24)

/*
 * Parses len bytes of GBNF (llama.cpp's grammar format; generation starts
 * at the rule "root"; gbnf need not be NUL-terminated) and prepares it for
 * model's vocabulary. Text that does not parse is MOONLM_INVALID_ARGUMENT
 * with the place in moonlm_last_error() as "line:col" (1-based, the column
 * in characters), as is a token reference (<[id]>, <name>) the vocabulary
 * lacks. The grammar holds a reference to the model: freeing the model
 * handle first is safe. Use it only with sessions of this model.
 */
MOONLM_API moonlm_status moonlm_grammar_new(const moonlm_model *model, const char *gbnf, size_t len,
                                            moonlm_grammar **out);

/*
 * A grammar for the JSON values that validate against a JSON schema (len
 * bytes of JSON text), as llama.cpp's json-schema-to-grammar converts it:
 * types, enum, const, required and optional properties, nested objects and
 * arrays with minItems/maxItems, string patterns and the formats it
 * supports, $ref/$defs, anyOf/oneOf/allOf, additionalProperties. Text that
 * is not JSON, or a schema feature the converter does not support, is
 * MOONLM_INVALID_ARGUMENT with the reason in moonlm_last_error() (never
 * silently ignored). Otherwise as moonlm_grammar_new.
 */
MOONLM_API moonlm_status moonlm_grammar_from_json_schema(const moonlm_model *model, const char *schema,
                                                         size_t len, moonlm_grammar **out);

/* Releases the grammar; NULL is a no-op, a freed handle INVALID_ARGUMENT. */
MOONLM_API moonlm_status moonlm_grammar_free(moonlm_grammar *grammar);

/* ------------------------------------------------------------------------ */
/* Convenience: a whole generation loop                                      */
/* ------------------------------------------------------------------------ */

/*
 * Receives the text of each generated token as it is produced. piece holds
 * len bytes (plus a NUL) valid only during the call; text is released only
 * at UTF-8 character boundaries, so a piece may be empty ("" with len 0)
 * while a character is incomplete (or, with moonlm_generate_ex, while the
 * text may be the start of a stop string). If generation ends with text
 * held back, a last call with token -1 delivers it (the bytes of an
 * unfinished character as they are). Return 0 to continue,
 * nonzero to stop.
 * The callback runs on the thread that called moonlm_generate and may call
 * moonlm functions, except on the same session or sampler (MOONLM_BUSY).
 */
typedef int (*moonlm_piece_callback)(const char *piece, size_t len, int32_t token, void *user_data);

/*
 * Prefills n_prompt >= 1 tokens, then up to max_tokens times samples a
 * token, passes it to callback (which may be NULL) and decodes it. Prompt and
 * generated tokens are passed to moonlm_sampler_accept. Stops early at an
 * end-of-generation token (which is neither passed to the callback nor
 * decoded), after decoding a token for which the callback returned nonzero,
 * or when the context is full (then returns MOONLM_CONTEXT_FULL).
 *
 * *n_generated (if not NULL) receives the number of generated tokens
 * evaluated into the session, also on failure: afterwards the session's
 * position is the old one + n_prompt + *n_generated, so a later call can
 * continue the text with just its new tokens (such as the next user turn).
 * On a failure such as MOONLM_CANCELLED the last token given to the callback
 * may not have been evaluated.
 */
MOONLM_API moonlm_status moonlm_generate(moonlm_session *session, moonlm_sampler *sampler,
                                         const int32_t *prompt, size_t n_prompt, size_t max_tokens,
                                         moonlm_piece_callback callback, void *user_data,
                                         size_t *n_generated);

/* ------------------------------------------------------------------------ */
/* Generation with options and a result                                      */
/* ------------------------------------------------------------------------ */

/* Why moonlm_generate_ex stopped (moonlm_generate_result.finish_reason). */
typedef enum moonlm_finish_reason {
    MOONLM_FINISH_NONE = 0,     /* not finished: the call failed (see its status) */
    MOONLM_FINISH_STOP = 1,     /* a stop string appeared */
    MOONLM_FINISH_LENGTH = 2,   /* max_tokens tokens were generated */
    MOONLM_FINISH_EOG = 3,      /* the model produced an end-of-generation token, or the grammar is complete */
    MOONLM_FINISH_CONTEXT = 4,  /* the context is full */
    MOONLM_FINISH_CANCELLED = 5 /* the callback returned nonzero, or moonlm_session_cancel() */
} moonlm_finish_reason;

/*
 * The name of a finish reason: "none", "stop", "length", "eog", "context" or
 * "cancelled" (static; "unknown" for other values). Never NULL.
 */
MOONLM_API const char *moonlm_finish_reason_string(moonlm_finish_reason reason);

/* moonlm_generate_params.flags. */
/* Also evaluate the last generated token, so that every generated token is in the session. */
#define MOONLM_GENERATE_DECODE_LAST 1u
/* Render control tokens in the text passed to the callback as their text
   (e.g. gpt-oss's <|channel|>analysis<|message|>, so the reasoning can be
   told from the answer; see moonlm_chat_parse_tool_calls' "reasoning");
   by default they render as nothing. An end-of-generation token still
   ends generation unseen. */
#define MOONLM_GENERATE_KEEP_SPECIAL 2u

/* At most this many alternatives per token in moonlm_token_logprob. */
#define MOONLM_MAX_TOP_LOGPROBS 20

/* A token and its log-probability (natural log). */
typedef struct moonlm_top_logprob {
    int32_t token;
    float logprob;
} moonlm_top_logprob;

/*
 * One generated token's log-probabilities, written by moonlm_generate_ex
 * into moonlm_generate_params.logprobs. The log-probabilities are
 * log_softmax of the logits the sampler saw after the grammar's mask, the
 * logit bias, the repetition penalties and DRY, and before top_k,
 * typical_p, top_p, min_p, XTC, mirostat and the temperature (OpenAI's
 * definition: the model's distribution for this token as adjusted, not the
 * truncated or tempered one). A banned token has -INFINITY and is never an
 * alternative.
 */
typedef struct moonlm_token_logprob {
    int32_t token;                               /* the generated token */
    float logprob;                               /* its log-probability */
    int32_t n_top;                               /* entries of top filled */
    moonlm_top_logprob top[MOONLM_MAX_TOP_LOGPROBS]; /* the most likely tokens, best first (ties: lower id) */
} moonlm_token_logprob;

/* At most this many stop strings, of at most this many bytes together. */
#define MOONLM_MAX_STOP_STRINGS 1024
#define MOONLM_MAX_STOP_BYTES (1u << 20)

typedef struct moonlm_generate_params {
    size_t size;        /* sizeof(moonlm_generate_params) */
    int32_t max_tokens; /* default -1: no limit (until eog, a stop string or the context's end);
                           0: prefill the prompt only; else at most this many tokens */
    uint32_t flags;     /* MOONLM_GENERATE_* bits; default 0; unknown bits are refused */
    /*
     * Stop strings: n_stop pointers to UTF-8 (or any) bytes, read during the
     * call only. stop_len[i] is the length of stop[i] in bytes; stop_len NULL
     * means every stop[i] is NUL-terminated. Empty strings are ignored.
     */
    const char *const *stop;
    const size_t *stop_len;
    size_t n_stop;
    moonlm_piece_callback callback; /* may be NULL */
    void *user_data;                /* passed to callback */
    /*
     * The members below were added after the first version; a caller whose
     * struct ends at user_data gets their defaults.
     *
     * Log-probabilities: logprobs (default NULL: none) has room for
     * logprobs_cap entries; entry i is written for the i-th generated token
     * before the callback sees that token (so a streaming caller can read it
     * there), with top_logprobs (0 to MOONLM_MAX_TOP_LOGPROBS) alternatives.
     * Entries [0, result->n_generated) are valid afterwards. With logprobs,
     * max_tokens must be 0 to logprobs_cap (not -1).
     */
    moonlm_token_logprob *logprobs;
    size_t logprobs_cap;
    int32_t top_logprobs;
    /* A grammar of the session's model constraining the generated text
       (see moonlm_grammar_new); default NULL: none. */
    moonlm_grammar *grammar;
    /*
     * Speculative decoding (see "Speculative decoding" below): draft is a
     * MOONLM_DRAFT_* (default MOONLM_DRAFT_NONE); draft_tokens the most
     * tokens guessed per verification pass (default 0: the library's,
     * MOONLM_DEFAULT_DRAFT_TOKENS; at most MOONLM_MAX_DRAFT_TOKENS);
     * draft_session, with MOONLM_DRAFT_MODEL, a session of the draft model
     * (default NULL), which the call uses exclusively.
     */
    int32_t draft;
    int32_t draft_tokens;
    moonlm_session *draft_session;
} moonlm_generate_params;

/*
 * Speculative decoding: a drafter guesses the next tokens, the session
 * evaluates the pending token and the guesses in one batched pass, and
 * the sampler draws each position from those logits in order; guesses are
 * kept while they equal the draws, the rest are dropped from the session.
 * The drafts are deterministic (the draft distribution is a point mass),
 * so the standard acceptance rule reduces to exactly this, and the tokens
 * follow the model's own distribution with any sampler, grammar or
 * penalty. Only the speed changes; a batched pass rounds floats as a
 * prefill does, unlike a one-token decode, so a greedy run can differ
 * from plain decoding where the two best logits are closer than that
 * rounding. moonlm_generate_result's n_drafted and n_draft_accepted count
 * the guesses.
 */
#define MOONLM_DRAFT_NONE 0
/* Guesses the tokens that followed the latest earlier occurrence of the
   text's last 2-4 tokens (prompt lookup; no model evaluation). */
#define MOONLM_DRAFT_LOOKUP 1
/* Guesses greedily with draft_session's model, which must have the same
   vocabulary as the session's (else MOONLM_INVALID_ARGUMENT saying where
   they differ). The draft session keeps the tokens it evaluated and
   re-evaluates only from the first that differs. */
#define MOONLM_DRAFT_MODEL 2
#define MOONLM_DEFAULT_DRAFT_TOKENS 8
#define MOONLM_MAX_DRAFT_TOKENS 64

/*
 * Fills the size bytes at params (the caller's sizeof(moonlm_generate_params))
 * with the defaults, and params->size with size, as moonlm_model_params_init.
 */
MOONLM_API void moonlm_generate_params_init(moonlm_generate_params *params, size_t size);
#define moonlm_generate_params_default(params) moonlm_generate_params_init((params), sizeof *(params))

/*
 * What moonlm_generate_ex did; the caller sets size = sizeof(moonlm_generate_result).
 * The library writes the members it knows that fit in size (a newer
 * caller's others are left as given); a size smaller than this first
 * version is refused.
 */
typedef struct moonlm_generate_result {
    size_t size;
    int32_t finish_reason; /* a moonlm_finish_reason */
    int32_t last_token;    /* the last generated token, -1 if none */
    size_t n_prompt;       /* prompt tokens evaluated (0 if the prefill failed) */
    size_t n_generated;    /* tokens generated (passed to the callback); an eog token is not counted */
    size_t n_evaluated;    /* of those, how many are in the session: n_generated, or one less
                              when the last one was not evaluated */
    /* Added after the first version (a caller whose struct ends at
       n_evaluated gets the members above only): */
    size_t n_drafted;        /* tokens guessed by speculative decoding */
    size_t n_draft_accepted; /* of those, how many were kept */
} moonlm_generate_result;

/*
 * The generation loop, with options. Prefills n_prompt >= 1 tokens (passing
 * them to moonlm_sampler_accept), then repeatedly samples a token and, unless
 * it ends generation, accepts it, passes its text to params->callback and
 * decodes it, until a finish reason:
 *
 *  - EOG: an end-of-generation token (neither counted, nor passed to the
 *    callback, nor decoded), or params->grammar is complete and nothing can
 *    follow;
 *  - STOP: the text contains a stop string; the text before it is passed on,
 *    the stop string and anything after it never are;
 *  - LENGTH: max_tokens tokens were generated;
 *  - CONTEXT: the session is full (the status is MOONLM_OK: this is the end
 *    of the text, not an error);
 *  - CANCELLED: the callback returned nonzero (status MOONLM_OK), or
 *    moonlm_session_cancel() was called (status MOONLM_CANCELLED).
 *
 * The callback is called once per generated token with that token and the
 * text it releases. Text is held back while it may be the start of a stop
 * string or ends inside a UTF-8 character (then piece is "" with len 0),
 * and is released as soon as later text decides; a stop string split across
 * tokens is caught. At the end (EOG, LENGTH, CONTEXT) a last call with token
 * -1 releases what was held back, if anything (the bytes of a character the
 * model never finished as they are; held-back text that completes a stop
 * string ends the call with STOP instead). No call follows CANCELLED or a
 * stop string found by a token's call. The callback runs on the calling
 * thread and may call moonlm functions, except on this session or sampler
 * (MOONLM_BUSY).
 *
 * The last generated token is not decoded (after LENGTH, STOP, CANCELLED or
 * CONTEXT; decoding it would be wasted unless the text continues) unless
 * flags has MOONLM_GENERATE_DECODE_LAST; then every
 * generated token is decoded, and a token sampled when the context is
 * already full ends the call with CONTEXT without being counted. Afterwards
 * the session's position is the old one + result->n_prompt +
 * result->n_evaluated; to continue the text, pass the tokens not evaluated
 * (result->last_token when n_evaluated < n_generated) first.
 *
 * params may be NULL for the defaults; result may be NULL. *result is
 * written on every return after its size was checked, also on failure.
 * A prompt that does not fit in the session is MOONLM_CONTEXT_FULL before
 * any work. Bad params (size, unknown flags, max_tokens below -1, NULL
 * stop strings, more than MOONLM_MAX_STOP_STRINGS or MOONLM_MAX_STOP_BYTES)
 * are MOONLM_INVALID_ARGUMENT before any work.
 */
MOONLM_API moonlm_status moonlm_generate_ex(moonlm_session *session, moonlm_sampler *sampler,
                                            const int32_t *prompt, size_t n_prompt,
                                            const moonlm_generate_params *params,
                                            moonlm_generate_result *result);

/* ------------------------------------------------------------------------ */
/* Tool calling                                                              */
/* ------------------------------------------------------------------------ */

/*
 * Renders a conversation given as JSON, with tools, like
 * moonlm_chat_apply_template_named (name NULL or "" for the model's own
 * template, else a built-in format). messages_json is a NUL-terminated JSON
 * array of OpenAI-style messages: "role" (a string), "content" (a string or
 * null), and optionally "tool_calls" (an array of {"id", "type":
 * "function", "function": {"name", "arguments"}}, arguments a JSON text or
 * an object), "tool_call_id" and "name"; any other key is
 * MOONLM_INVALID_ARGUMENT, as are malformed arguments. tools_json (NULL for
 * none) is a JSON array of {"type": "function", "function": {"name",
 * "description", "parameters"}}. A template with tool syntax receives them
 * as its tools variable and renders calls and results itself; a template
 * without it, and a built-in format, get them the Hermes way: the tools
 * described in the system message, calls as <tool_call>{json}</tool_call>
 * in the assistant's text, results as user turns in <tool_response> tags.
 * Each text is at most 64 MiB. The output uses the (buf, cap, n_out)
 * protocol.
 */
MOONLM_API moonlm_status moonlm_chat_apply_template_json(const moonlm_model *model, const char *name,
                                                         const char *messages_json, const char *tools_json,
                                                         int add_assistant, char *out, size_t cap, size_t *n_out);

/*
 * Reads the tool calls in text (len bytes: a generated reply) as the
 * model's template (name NULL or "") or the built-in format name writes
 * them, and writes the result as NUL-terminated JSON with the (buf, cap,
 * n_out) protocol: {"format": F, "content": "...", "tool_calls": [{"id",
 * "type": "function", "function": {"name", "arguments"}}]}, arguments a
 * JSON text, plus "reasoning" when the reply reasons first (harmony's
 * analysis channel, text generated with MOONLM_GENERATE_KEEP_SPECIAL; a
 * <think>...</think> block; content is then the rest) and "error" when
 * text holds something that looks like a call but cannot be read (then
 * tool_calls is empty and content is the whole text). F, chosen from the template's text, is "hermes" (<tool_call>
 * JSON: Qwen 2.5/3, Hermes, and every template without tool syntax),
 * "llama3" (<|python_tag|> or bare {"name", "parameters"} JSON), "mistral"
 * ([TOOL_CALLS] JSON array or name[ARGS]{...}), "gemma" (```tool_code
 * name(k=v), JSON, or <tool_call>), "phi4" (<|tool_call|>[...]),
 * "harmony" (gpt-oss), "qwen3coder" (<tool_call><function=NAME> with
 * <parameter=P>VALUE</parameter> blocks: Qwen3-Coder, Qwen 3.5; a value
 * that is JSON text is that JSON value, else a string) or "gemma4"
 * (<|tool_call>call:NAME{key:value,...}<tool_call|>, strings between <|"|>
 * markers: Gemma 4). Calls without an id get "call" and five digits.
 * Special-token markers that detokenized text lacks are not required where
 * the rest is unambiguous (a bare JSON call or array).
 */
MOONLM_API moonlm_status moonlm_chat_parse_tool_calls(const moonlm_model *model, const char *name, const char *text,
                                                      size_t len, char *out, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Session state: prefix reuse, fork, save and restore                      */
/* ------------------------------------------------------------------------ */

/*
 * A session remembers the token at each position it holds, so it can find
 * what a new sequence shares with it, and its whole state (those tokens
 * and their KV cache) can be copied into another session or saved.
 */

/*
 * Makes the session hold exactly tokens[0..n), evaluating as few as it
 * can: keeps the longest common prefix of the tokens it holds and these,
 * forgets the positions after it and evaluates the rest. If logits is not
 * NULL the last position's logits are written (logits_cap >= n_vocab, else
 * MOONLM_BUFFER_TOO_SMALL before any work); logits come only from
 * evaluating a position, so then the last token is always evaluated, again
 * if it was already held. *n_evaluated (may be NULL) receives the number
 * of tokens evaluated. A conversation passes its whole history each turn
 * and pays only for the new tokens. n = 0 or a token out of range is
 * MOONLM_INVALID_ARGUMENT and n > n_ctx MOONLM_CONTEXT_FULL, before
 * anything changes; if the evaluation itself fails (MOONLM_CANCELLED, ...)
 * the session holds the common prefix.
 * The logits equal those of a session that evaluated the same tokens in
 * the same calls; they equal one moonlm_prefill of all n tokens bit for
 * bit when the kernels round a token's row the same wherever it sits in a
 * batch (a register-tiled product, such as the avx512 kernels' Q4_1, can
 * differ there by float rounding, as decode and prefill do).
 */
MOONLM_API moonlm_status moonlm_prefill_reuse(moonlm_session *session, const int32_t *tokens, size_t n,
                                              float *logits, size_t logits_cap, size_t *n_evaluated);

/* A session's counters; the caller sets size = sizeof(moonlm_session_stats). */
typedef struct moonlm_session_stats {
    size_t size;
    uint64_t n_pos;       /* positions held (moonlm_session_position) */
    uint64_t n_ctx;       /* the session's context size */
    uint64_t n_evaluated; /* tokens run through the model since the session was made or
                             its state loaded */
    uint64_t n_reused;    /* tokens moonlm_prefill_reuse found held and did not evaluate */
} moonlm_session_stats;

/* Fills *stats (stats->size >= sizeof(moonlm_session_stats), else MOONLM_INVALID_ARGUMENT). */
MOONLM_API moonlm_status moonlm_session_stats_get(const moonlm_session *session, moonlm_session_stats *stats);

/*
 * The tokens the session holds, one per position, with the (buf, cap,
 * n_out) protocol counted in tokens: *n_out is the position;
 * MOONLM_BUFFER_TOO_SMALL if cap is smaller (nothing written).
 */
MOONLM_API moonlm_status moonlm_session_tokens(const moonlm_session *session, int32_t *tokens, size_t cap,
                                               size_t *n_out);

/*
 * Creates *out, a new session of the same model and parameters (n_ctx, KV
 * type, threads) holding the same positions and tokens as session, which
 * is unchanged: the two then continue independently, and either gives the
 * logits the original would have. The KV cache is copied, not shared
 * (neither session pays for sharing on later writes, and freeing one never
 * affects the other); the copy costs the held positions only, and nothing
 * is recomputed. On failure *out is NULL.
 */
MOONLM_API moonlm_status moonlm_session_fork(moonlm_session *session, moonlm_session **out);

/*
 * Saved states. The format (docs/C-API.md) is versioned and ends with a
 * CRC-32C; it names the model file it belongs to by a fingerprint (a
 * 256-bit non-cryptographic hash of the file's metadata and tensor
 * table), its KV type and numerics mode, and holds the tokens and the KV
 * cache of the held positions. A state loads into a session of the same model file (opened
 * in any process), KV type and numerics whose n_ctx holds its positions;
 * the session then continues bit for bit as the saved one would have.
 * Errors, all before the session changes: a truncated, corrupted or
 * malformed state is MOONLM_BAD_FILE (MOONLM_UNSUPPORTED for a newer
 * format version), one for another model, KV type or numerics
 * MOONLM_INVALID_ARGUMENT, one with more positions than n_ctx
 * MOONLM_CONTEXT_FULL, an unreadable file MOONLM_IO.
 */

/* The size in bytes of the session's state now. */
MOONLM_API moonlm_status moonlm_session_state_size(const moonlm_session *session, size_t *size);

/*
 * Writes the session's state into buf with the (buf, cap, n_out) protocol:
 * *n_out (may be NULL) receives the size; a cap below it is
 * MOONLM_BUFFER_TOO_SMALL with nothing written (buf may be NULL with cap 0
 * to ask for the size).
 */
MOONLM_API moonlm_status moonlm_session_state_save(const moonlm_session *session, void *buf, size_t cap,
                                                   size_t *n_out);

/* Replaces the session's positions with the state in buf[0..n). */
MOONLM_API moonlm_status moonlm_session_state_load(moonlm_session *session, const void *buf, size_t n);

/*
 * moonlm_session_state_save into the file path (UTF-8), through a
 * temporary file in the same folder renamed over path at the end.
 */
MOONLM_API moonlm_status moonlm_session_state_save_file(const moonlm_session *session, const char *path);

/* moonlm_session_state_load from a file written by either save call. */
MOONLM_API moonlm_status moonlm_session_state_load_file(moonlm_session *session, const char *path);

/* ------------------------------------------------------------------------ */
/* Embeddings and reranking                                                  */
/* ------------------------------------------------------------------------ */

/*
 * How a text's per-token hidden states become its embedding. The hidden
 * states are an encoder's (BERT: bge, all-MiniLM, e5) last block output or
 * a decoder's after its final norm (Qwen3-Embedding: LAST).
 */
typedef enum moonlm_pooling {
    MOONLM_POOLING_MODEL = 0, /* the file's ARCH.pooling_type; MEAN when it has none */
    MOONLM_POOLING_NONE = 1,  /* every token's hidden state, one row each */
    MOONLM_POOLING_MEAN = 2,  /* the average over the text's tokens */
    MOONLM_POOLING_CLS = 3,   /* the first token's (BERT's [CLS]) */
    MOONLM_POOLING_LAST = 4,  /* the last token's */
    MOONLM_POOLING_RANK = 5   /* a reranker's head (an encoder's on the first token, a decoder's on the last) */
} moonlm_pooling;

/* moonlm_embed_params.flags: scale each vector (each row, with NONE) to unit length. */
#define MOONLM_EMBED_NORMALIZE 1u

/* Options of moonlm_embed and moonlm_embed_tokens. */
typedef struct moonlm_embed_params {
    size_t size;     /* sizeof(moonlm_embed_params) */
    int32_t pooling; /* a moonlm_pooling; default MOONLM_POOLING_MODEL */
    uint32_t flags;  /* MOONLM_EMBED_NORMALIZE; default none */
} moonlm_embed_params;

/* Fills params with the defaults for a struct of size bytes. */
MOONLM_API void moonlm_embed_params_init(moonlm_embed_params *params, size_t size);
#define moonlm_embed_params_default(params) moonlm_embed_params_init((params), sizeof *(params))

/*
 * The length of one vector of pooling (a moonlm_pooling) with this model,
 * into *n_out: the hidden size, or with RANK the classifier's outputs (1
 * for bge-reranker, 2 for Qwen3-Reranker). RANK on a model without a
 * reranker head is MOONLM_UNSUPPORTED.
 */
MOONLM_API moonlm_status moonlm_embed_size(const moonlm_model *model, int32_t pooling, size_t *n_out);

/*
 * Embeds n_texts texts (texts[i] of lens[i] bytes, or NUL-terminated when
 * lens is NULL), each tokenized with the model's special tokens added
 * (BERT: [CLS] text [SEP]; special-token text inside is not parsed) and
 * computed as its own sequence, and writes the vectors one after another
 * into out: n_texts vectors of moonlm_embed_size floats, or with
 * MOONLM_POOLING_NONE one row of the hidden size per token of each text
 * (as many as moonlm_tokenize with MOONLM_TOKENIZE_ADD_SPECIAL gives).
 * params may be NULL for the defaults. The (buf, cap, n_out) protocol in
 * floats: *n_out (when not NULL) receives the floats needed, and a cap
 * below it is MOONLM_BUFFER_TOO_SMALL before anything is computed. An
 * encoder's text longer than its training context is MOONLM_CONTEXT_FULL.
 * The model's worker pool computes it; the call is safe from any thread.
 */
MOONLM_API moonlm_status moonlm_embed(const moonlm_model *model, const char *const *texts, const size_t *lens,
                                      size_t n_texts, const moonlm_embed_params *params, float *out, size_t cap,
                                      size_t *n_out);

/* moonlm_embed of token lists: tokens[i] holds n_tokens[i] (>= 1) ids. */
MOONLM_API moonlm_status moonlm_embed_tokens(const moonlm_model *model, const int32_t *const *tokens,
                                             const size_t *n_tokens, size_t n_texts,
                                             const moonlm_embed_params *params, float *out, size_t cap,
                                             size_t *n_out);

/*
 * Scores each of n_docs documents (NUL-terminated) against query with a
 * reranker (MOONLM_POOLING_RANK): a BERT encoder with a classifier head,
 * the pair tokenized as [CLS] query [SEP] document [SEP], scored by the
 * head's first output (a logit); or a decoder with a cls.output head
 * (Qwen3-Reranker), the pair put in its rerank prompt template
 * (tokenizer.chat_template.rerank), scored by the probability of its
 * first label ("yes"). Higher is more relevant. scores uses the (buf,
 * cap, n_out) protocol: n_docs floats.
 */
MOONLM_API moonlm_status moonlm_rerank(const moonlm_model *model, const char *query, const char *const *docs,
                                       size_t n_docs, float *scores, size_t cap, size_t *n_out);

/* ------------------------------------------------------------------------ */
/* Tool-call grammars (tool_choice)                                         */
/* ------------------------------------------------------------------------ */

/*
 * A grammar (as moonlm_grammar_new) that admits exactly one tool call in
 * the syntax the model's template (template_name NULL or "") or the
 * built-in format template_name writes calls in: one of the functions of
 * tools_json (an OpenAI-style JSON array of {"type": "function",
 * "function": {"name", "parameters"}}; NUL-terminated, at most 64 MiB),
 * with arguments that validate against its parameters schema (the schema
 * features of moonlm_grammar_from_json_schema; a schema's local $refs are
 * its own). tool_name NULL or "" admits any of the functions (OpenAI's
 * tool_choice "required"), else only that one (a named tool_choice; a name
 * tools_json lacks is MOONLM_INVALID_ARGUMENT). Every call format
 * moonlm_chat_parse_tool_calls reads is supported: "hermes"
 * (<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>: Qwen,
 * Hermes, Gemma and every template without tool syntax, and the built-in
 * formats), "llama3" ({"name": ..., "parameters": {...}}), "mistral"
 * ([TOOL_CALLS][{...}]), "phi4" (<|tool_call|>[{...}]<|/tool_call|>),
 * "harmony" (<|channel|>commentary to=functions.NAME <|constrain|>json
 * <|message|>{...}), "qwen3coder" (<tool_call>\n<function=NAME>\n then
 * <parameter=P>\nVALUE\n</parameter>\n per parameter in the schema's order,
 * string values as raw text that does not start like JSON, others as
 * JSON) and "gemma4" (<|tool_call>call:NAME{key:VALUE,...}<tool_call|>,
 * keys sorted; strings between <|"|> without "<", ",", "}" or "]" and not
 * starting like a number; the schemas of object and array parameters are
 * not enforced); a marker the vocabulary has as a token is that token.
 * What the grammar admits parses with moonlm_chat_parse_tool_calls, also
 * when the detokenizer drops the markers. A compatible addition: look it
 * up with dlsym() to run with older libraries.
 */
MOONLM_API moonlm_status moonlm_grammar_for_tool_calls(const moonlm_model *model, const char *template_name,
                                                       const char *tools_json, const char *tool_name,
                                                       moonlm_grammar **out);

/* moonlm_grammar_for_tool_calls_ex flags. */
/* One or more calls (OpenAI's parallel_tool_calls), where the format can
   write several in one reply: hermes blocks one after another, llama3
   objects one per line, mistral and phi4 arrays. A harmony call ends the
   message, so harmony stays at one call. */
#define MOONLM_TOOL_CALLS_PARALLEL 1u

/*
 * moonlm_grammar_for_tool_calls with flags (MOONLM_TOOL_CALLS_*; unknown
 * bits are MOONLM_INVALID_ARGUMENT). With MOONLM_TOOL_CALLS_PARALLEL the
 * reply is one or more calls and ends with an end-of-generation token
 * after any of them. A compatible addition, as above.
 */
MOONLM_API moonlm_status moonlm_grammar_for_tool_calls_ex(const moonlm_model *model, const char *template_name,
                                                          const char *tools_json, const char *tool_name,
                                                          uint32_t flags, moonlm_grammar **out);

/* ------------------------------------------------------------------------ */
/* Batched decoding of several sessions                                     */
/* ------------------------------------------------------------------------ */

/*
 * One session's part of a batched step. The caller sets size =
 * sizeof(moonlm_batch_entry) in every entry (all entries of one call the
 * same size: it is the array's stride, so a newer caller's larger entries
 * still work). The first published struct ended at status: a caller built
 * against it passes that size, offsetof(moonlm_batch_entry, continues),
 * which is still accepted (continues then reads as 0).
 */
typedef struct moonlm_batch_entry {
    size_t size;
    moonlm_session *session; /* a session of the model; at most one entry per session */
    const int32_t *tokens;   /* evaluated at the session's next positions: one to decode,
                                or several (a chunk of a prompt) */
    size_t n_tokens;
    float *logits;           /* NULL, or receives the last token's logits */
    size_t logits_cap;       /* floats in logits (>= the vocabulary size) */
    moonlm_status status;    /* out: MOONLM_OK when the tokens were evaluated (the session
                                holds them), else why not (the session is unchanged; its
                                moonlm_session_last_error says more) */
    size_t continues;        /* nonzero: these tokens are a chunk of a prompt that the
                                session's entry in a later call goes on with, so that a
                                hybrid model's session takes the checkpoints of one
                                prefill of the whole prompt (see moonlm_batch_decode);
                                0: the tokens end the evaluation. A size_t rather than
                                an int so that it starts where the first struct ended,
                                past status's padding, on every ABI. */
} moonlm_batch_entry;

/*
 * Evaluates every entry's tokens in one forward pass over the model: the
 * matrix products take the tokens of all the sessions as one batch, so the
 * weights are read from memory once per step instead of once per session,
 * while attention runs per session over its own KV cache. All sessions of
 * one call must have the same KV type. A session's logits do not depend
 * on what else is in the step: with the default numerics they equal bit
 * for bit what moonlm_decode (or moonlm_prefill of the same chunk) gives
 * it alone. Every decoder-only model batches, gemma4 and the hybrids
 * (qwen35, qwen35moe, qwen3next: each session's recurrent state advanced
 * over its own tokens) included. For its checkpoints a hybrid session
 * counts as one evaluation the entries it had marked continues in earlier
 * calls together with its next entry not marked, and takes the
 * checkpoints of one moonlm_prefill (several tokens) or moonlm_decode
 * (one) of them: a prompt fed in chunks, every chunk but the last marked,
 * is checkpointed as one prefill; unmarked, every chunk is a prefill of
 * its own and leaves a checkpoint (a copy of the recurrent state) behind.
 * Other models ignore continues.
 *
 * An entry that cannot take part (a freed or busy session, one of another
 * model or KV type, a token outside the vocabulary, a short logits
 * buffer, a full context, a pending moonlm_session_cancel, which it
 * consumes, or more tokens than the step has room for after the entries
 * before it: see moonlm_batch_max_tokens) gets its own status, and the
 * others are evaluated. Returns MOONLM_OK when every entry is; else the
 * status of the first entry that is not (the others' statuses say which
 * were evaluated), or an error about the call itself (a bad model handle,
 * entries NULL with n_entries > 0, sizes below the first struct's
 * (offsetof(moonlm_batch_entry, continues)), between it and
 * sizeof(moonlm_batch_entry), or unequal, more than 4096 entries). Concurrent calls on one model run
 * one after the other.
 */
MOONLM_API moonlm_status moonlm_batch_decode(moonlm_model *model, moonlm_batch_entry *entries, size_t n_entries);

/* The most tokens one moonlm_batch_decode evaluates, over all its entries (64 with the
   default numerics). */
MOONLM_API moonlm_status moonlm_batch_max_tokens(const moonlm_model *model, size_t *n);

/* ------------------------------------------------------------------------ */
/* Checkpoints of a hybrid model's recurrent state                           */
/* ------------------------------------------------------------------------ */

/*
 * A hybrid model (recurrent layers beside attention: qwen35, qwen35moe,
 * qwen3next) cannot cut its recurrent state back to a position, so its
 * session keeps checkpoints, copies of that state: at the end of every
 * prefill call and every checkpoint_every decoded positions
 * (moonlm_session_params), within checkpoint_bytes of memory (at least two
 * are kept unless checkpoint_bytes is negative; past the budget the one
 * closest to its predecessor is dropped). moonlm_session_rewind to a
 * position restores the last checkpoint at or before it and evaluates the
 * tokens after it again. These calls report them. A compatible addition
 * (MOONLM_ABI_VERSION unchanged).
 */
typedef struct moonlm_checkpoint_info {
    size_t size;         /* sizeof(moonlm_checkpoint_info) */
    int32_t every;       /* decoded positions between checkpoints in effect; 0 = none while decoding */
    int32_t max_count;   /* the most checkpoints kept at once; 0 = none */
    int32_t n_held;      /* checkpoints held now */
    uint32_t reserved;   /* 0 */
    uint64_t bytes_held; /* the memory they take */
} moonlm_checkpoint_info;

/*
 * Fills *info (info->size >= sizeof(moonlm_checkpoint_info), else
 * MOONLM_INVALID_ARGUMENT). A session of a model without recurrent layers
 * has none: every member 0.
 */
MOONLM_API moonlm_status moonlm_session_checkpoints(const moonlm_session *session, moonlm_checkpoint_info *info);

/*
 * The positions of the checkpoints the session holds, ascending, with the
 * (buf, cap, n_out) protocol: *n_out is their number; MOONLM_BUFFER_TOO_SMALL
 * (nothing written) if cap is less. A rewind to one of them evaluates
 * nothing.
 */
MOONLM_API moonlm_status moonlm_session_checkpoint_positions(const moonlm_session *session, size_t *buf, size_t cap,
                                                             size_t *n_out);

#ifdef __cplusplus
}
#endif

#endif /* MOONLM_H */
