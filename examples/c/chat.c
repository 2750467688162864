/*
 * chat: one chat turn with a GGUF model through libmoonlm.
 *
 *   chat -m model.gguf [-s system] [-u user message] [-n tokens] [-t temperature] [-T template]
 *
 * Renders the conversation with the model's chat template (or, with -T, a
 * built-in one such as chatml, llama3 or gemma) and streams the reply
 * through moonlm_generate's callback. A model without a template (such as a
 * base model) is MOONLM_UNSUPPORTED: chat prints the library's message,
 * which names the built-in templates, and exits with status 3.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonlm.h"

static void check(moonlm_status st, const char *what) {
    if (st != MOONLM_OK) {
        fprintf(stderr, "chat: %s: %s (%s)\n", what, moonlm_status_string(st), moonlm_last_error());
        exit(1);
    }
}

static void *xmalloc(size_t n) {
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "chat: out of memory\n");
        exit(1);
    }
    return p;
}

/* Called by moonlm_generate with each piece of the reply, whole characters only. */
static int on_piece(const char *piece, size_t len, int32_t token, void *user_data) {
    size_t *bytes = user_data;
    (void)token;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    *bytes += len;
    return 0; /* keep going */
}

int main(int argc, char **argv) {
    const char *model_path = NULL;
    const char *system = "You are a helpful assistant.";
    const char *user = "Tell me a short story.";
    long n_predict = 128;
    float temperature = 0.0f;
    const char *template_name = NULL; /* NULL: the model's own template */
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) {
            break;
        }
        if (strcmp(argv[i], "-m") == 0) {
            model_path = argv[++i];
        } else if (strcmp(argv[i], "-s") == 0) {
            system = argv[++i];
        } else if (strcmp(argv[i], "-u") == 0) {
            user = argv[++i];
        } else if (strcmp(argv[i], "-n") == 0) {
            n_predict = strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "-t") == 0) {
            temperature = strtof(argv[++i], NULL);
        } else if (strcmp(argv[i], "-T") == 0) {
            template_name = argv[++i];
        }
    }
    if (model_path == NULL || n_predict < 0) {
        fprintf(stderr, "usage: chat -m model.gguf [-s system] [-u user message] [-n tokens] [-t temperature] [-T template]\n");
        return 2;
    }

    moonlm_model *model = NULL;
    check(moonlm_model_open(model_path, NULL, &model), "opening the model");

    moonlm_message msgs[2] = {{"system", system}, {"user", user}};
    size_t n_msgs = 2;

    /* Render with the template: size query, then the real call. */
    char *prompt = NULL;
    uint32_t flags = MOONLM_TOKENIZE_PARSE_SPECIAL;
    size_t len = 0;
    moonlm_status st = moonlm_chat_apply_template_named(model, template_name, msgs, n_msgs, 1, NULL, 0, &len);
    if (st == MOONLM_UNSUPPORTED) {
        /* No template (a base model): the message names the built-in ones. */
        fprintf(stderr, "chat: %s\nchat: pass -T NAME to use a built-in template\n", moonlm_last_error());
        moonlm_model_free(model);
        return 3;
    }
    if (st != MOONLM_BUFFER_TOO_SMALL) {
        check(st, "applying the chat template");
    }
    prompt = xmalloc(len + 1);
    check(moonlm_chat_apply_template_named(model, template_name, msgs, n_msgs, 1, prompt, len + 1, &len),
          "applying the chat template");
    if (strncmp(prompt, "<s>", 3) != 0 && strncmp(prompt, "<bos>", 5) != 0) {
        flags |= MOONLM_TOKENIZE_ADD_SPECIAL; /* the template did not write BOS itself */
    }

    size_t n_tokens = 0;
    st = moonlm_tokenize(model, prompt, strlen(prompt), flags, NULL, 0, &n_tokens);
    if (st != MOONLM_BUFFER_TOO_SMALL && st != MOONLM_OK) {
        check(st, "tokenizing the prompt");
    }
    int32_t *tokens = xmalloc(n_tokens * sizeof *tokens);
    check(moonlm_tokenize(model, prompt, strlen(prompt), flags, tokens, n_tokens, &n_tokens), "tokenizing the prompt");

    moonlm_session *session = NULL;
    check(moonlm_session_new(model, NULL, &session), "creating a session");
    /* The session keeps the model alive: the handle is no longer needed. */
    check(moonlm_model_free(model), "releasing the model handle");

    moonlm_sampler_params sp;
    moonlm_sampler_params_default(&sp);
    sp.temperature = temperature;
    sp.seed = 7;
    moonlm_sampler *sampler = NULL;
    check(moonlm_sampler_new(&sp, &sampler), "creating a sampler");

    size_t bytes = 0, n_generated = 0;
    st = moonlm_generate(session, sampler, tokens, n_tokens, (size_t)n_predict, on_piece, &bytes, &n_generated);
    putchar('\n');
    if (st != MOONLM_CONTEXT_FULL) {
        check(st, "generating");
    }
    fprintf(stderr, "chat: %zu tokens, %zu bytes\n", n_generated, bytes);

    free(tokens);
    free(prompt);
    moonlm_sampler_free(sampler);
    moonlm_session_free(session);
    return 0;
}
