/*
 * generate: continue a prompt with a GGUF model through libmoonlm, writing
 * the generated text to stdout as it is produced.
 *
 *   generate -m model.gguf [-p prompt] [-n tokens] [-t temperature] [-s seed]
 *
 * With -t 0 (the default) sampling is greedy, so the output is
 * deterministic. This is the explicit loop: tokenize, prefill, then
 * sample/decode one token at a time, each step's logits landing in a
 * buffer this program owns. (chat.c shows moonlm_generate, which runs the
 * same loop inside the library.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonlm.h"

/* Reports a failed call with the library's message and exits. */
static void check(moonlm_status st, const char *what) {
    if (st != MOONLM_OK) {
        fprintf(stderr, "generate: %s: %s (%s)\n", what, moonlm_status_string(st), moonlm_last_error());
        exit(1);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: generate -m model.gguf [-p prompt] [-n tokens] [-t temperature] [-s seed]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    const char *prompt = "";
    long n_predict = 128;
    float temperature = 0.0f;
    unsigned long long seed = 42;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            usage();
        }
        if (strcmp(argv[i], "-m") == 0) {
            model_path = argv[++i];
        } else if (strcmp(argv[i], "-p") == 0) {
            prompt = argv[++i];
        } else if (strcmp(argv[i], "-n") == 0) {
            n_predict = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-t") == 0) {
            temperature = strtof(argv[++i], NULL);
        } else if (strcmp(argv[i], "-s") == 0) {
            seed = strtoull(argv[++i], NULL, 10);
        } else {
            usage();
        }
    }
    if (model_path == NULL || n_predict < 0) {
        usage();
    }
    if (moonlm_abi_version() != MOONLM_ABI_VERSION) {
        fprintf(stderr, "generate: built for ABI %d but the library is ABI %d\n", MOONLM_ABI_VERSION,
                moonlm_abi_version());
        return 1;
    }

    moonlm_model *model = NULL;
    check(moonlm_model_open(model_path, NULL, &model), "opening the model");

    moonlm_model_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    check(moonlm_model_get_info(model, &info), "reading model info");

    /* Tokenize: ask for the size first, then fill a buffer of that size. */
    size_t n_tokens = 0;
    moonlm_status st = moonlm_tokenize(model, prompt, strlen(prompt), MOONLM_TOKENIZE_ADD_SPECIAL, NULL, 0, &n_tokens);
    if (st != MOONLM_BUFFER_TOO_SMALL && st != MOONLM_OK) {
        check(st, "tokenizing the prompt");
    }
    int32_t *tokens = malloc((n_tokens + 1) * sizeof *tokens);
    if (tokens == NULL) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }
    check(moonlm_tokenize(model, prompt, strlen(prompt), MOONLM_TOKENIZE_ADD_SPECIAL, tokens, n_tokens, &n_tokens),
          "tokenizing the prompt");
    if (n_tokens == 0) {
        if (info.token_bos < 0) {
            fprintf(stderr, "generate: empty prompt and the model has no BOS token\n");
            return 1;
        }
        tokens[n_tokens++] = info.token_bos;
    }

    moonlm_session_params sp;
    moonlm_session_params_default(&sp);
    moonlm_session *session = NULL;
    check(moonlm_session_new(model, &sp, &session), "creating a session");

    moonlm_sampler_params smp;
    moonlm_sampler_params_default(&smp);
    smp.temperature = temperature;
    smp.seed = seed;
    moonlm_sampler *sampler = NULL;
    check(moonlm_sampler_new(&smp, &sampler), "creating a sampler");

    size_t n_vocab = (size_t)info.n_vocab;
    float *logits = malloc(n_vocab * sizeof *logits);
    char *piece = malloc(64);
    size_t piece_cap = 64;
    if (logits == NULL || piece == NULL) {
        fprintf(stderr, "generate: out of memory\n");
        return 1;
    }

    for (size_t i = 0; i < n_tokens; i++) {
        check(moonlm_sampler_accept(sampler, tokens[i]), "recording the prompt");
    }
    check(moonlm_prefill(session, tokens, n_tokens, logits, n_vocab), "evaluating the prompt");

    for (long i = 0; i < n_predict; i++) {
        int32_t tok = 0;
        check(moonlm_sample(sampler, logits, n_vocab, &tok), "sampling");
        if (moonlm_model_is_eog(model, tok)) {
            break;
        }
        check(moonlm_sampler_accept(sampler, tok), "recording a token");

        /* A piece may be longer than the buffer: grow it and ask again. */
        size_t len = 0;
        st = moonlm_token_to_piece(model, tok, piece, piece_cap, &len);
        if (st == MOONLM_BUFFER_TOO_SMALL) {
            char *bigger = realloc(piece, len + 1);
            if (bigger == NULL) {
                fprintf(stderr, "generate: out of memory\n");
                return 1;
            }
            piece = bigger;
            piece_cap = len + 1;
            st = moonlm_token_to_piece(model, tok, piece, piece_cap, &len);
        }
        check(st, "rendering a token");
        /* Raw bytes: a character split across tokens is whole once both are out. */
        fwrite(piece, 1, len, stdout);
        fflush(stdout);

        st = moonlm_decode(session, tok, logits, n_vocab);
        if (st == MOONLM_CONTEXT_FULL) {
            fprintf(stderr, "\ngenerate: context full after %ld tokens\n", i + 1);
            break;
        }
        check(st, "evaluating a token");
    }
    putchar('\n');

    free(piece);
    free(logits);
    free(tokens);
    moonlm_sampler_free(sampler);
    moonlm_session_free(session);
    moonlm_model_free(model);
    return 0;
}
