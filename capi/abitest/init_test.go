package abitest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParamsInit checks the sized initializers a program calls through the
// *_default macros: they write exactly the caller's size (a program built
// against an older, smaller header keeps the bytes after its struct), zero
// what this library does not know when the caller's struct is larger (a
// newer header), set size to the caller's, and the library accepts both
// structs; the *_default functions kept for earlier binaries still fill
// the library's own size.
func TestParamsInit(t *testing.T) {
	l := lib(t)
	model := shareddata.Path(t, stories)
	src := `#include <stdio.h>
#include <string.h>
#include "moonlm.h"

#define GUARD 64

/* Fills a buffer through init with size n and reports whether anything
   past n changed, the size member, and the status of using it. */
static int check(const char *what, void (*init)(void *, size_t), size_t n, size_t full) {
    unsigned char buf[256 + GUARD];
    memset(buf, 0xA5, sizeof buf);
    init(buf, n);
    int overran = 0;
    for (size_t i = n; i < sizeof buf; i++) {
        if (buf[i] != 0xA5) overran = 1;
    }
    size_t sz;
    memcpy(&sz, buf, sizeof sz);
    int zeroed = 1;
    for (size_t i = full; i < n; i++) {
        if (buf[i] != 0) zeroed = 0;
    }
    printf("%s %zu overran=%d size=%zu zeroed=%d\n", what, n, overran, sz, zeroed);
    return 0;
}

static void model_init(void *p, size_t n) { moonlm_model_params_init(p, n); }
static void session_init(void *p, size_t n) { moonlm_session_params_init(p, n); }
static void sampler_init(void *p, size_t n) { moonlm_sampler_params_init(p, n); }

int main(int argc, char **argv) {
    (void)argc;
    /* The first published model params ended before pack (size, n_threads, flags). */
    check("model", model_init, 16, sizeof(moonlm_model_params));
    check("model", model_init, sizeof(moonlm_model_params), sizeof(moonlm_model_params));
    check("model", model_init, sizeof(moonlm_model_params) + 24, sizeof(moonlm_model_params));
    check("session", session_init, sizeof(moonlm_session_params) + 8, sizeof(moonlm_session_params));
    check("sampler", sampler_init, sizeof(moonlm_sampler_params) + 8, sizeof(moonlm_sampler_params));
    check("sampler-short", sampler_init, 4, sizeof(moonlm_sampler_params));

    /* A struct from a newer header (larger, zero beyond) and one from the
       oldest (16 bytes) both open a model. */
    unsigned char big[sizeof(moonlm_model_params) + 24];
    moonlm_model_params_init((moonlm_model_params *)big, sizeof big);
    ((moonlm_model_params *)big)->n_threads = 1;
    moonlm_model *m = NULL;
    printf("open-big %d\n", (int)moonlm_model_open(argv[1], (moonlm_model_params *)big, &m));
    moonlm_model_free(m);
    unsigned char small[16 + GUARD];
    moonlm_model_params_init((moonlm_model_params *)small, 16);
    m = NULL;
    printf("open-small %d\n", (int)moonlm_model_open(argv[1], (moonlm_model_params *)small, &m));
    moonlm_model_free(m);

    /* The macro and the kept function agree with each other. */
    moonlm_sampler_params a, b;
    memset(&a, 0x5A, sizeof a);
    memset(&b, 0x5A, sizeof b);
    moonlm_sampler_params_default(&a);
    (moonlm_sampler_params_default)(&b);
    printf("same %d top_k %d\n", memcmp(&a, &b, sizeof a) == 0, (int)a.top_k);
    return 0;
}
`
	out, err := exec.Command(compileC(t, l, src), model).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	got := map[string]string{}
	for _, ln := range lines {
		k, v, _ := strings.Cut(ln, " ")
		if k == "model" || k == "session" || k == "sampler" || k == "sampler-short" {
			n, rest, _ := strings.Cut(v, " ")
			k += " " + n
			v = rest
		}
		got[k] = v
	}
	t.Logf("%s", out)
	assert.Equal(t, "overran=0 size=16 zeroed=1", got["model 16"], "an old 16-byte struct: nothing written past it")
	for k, v := range got {
		if strings.HasPrefix(k, "model ") || strings.HasPrefix(k, "session ") || strings.HasPrefix(k, "sampler ") {
			n := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(k, "model "), "session "), "sampler ")
			assert.Equal(t, "overran=0 size="+n+" zeroed=1", v, k)
		}
	}
	assert.Equal(t, fmt.Sprintf("overran=0 size=%d zeroed=1", uint64(0xA5A5A5A5A5A5A5A5)), got["sampler-short 4"],
		"a size too small for the size member: nothing written")
	assert.Equal(t, "0", got["open-big"], "a newer, larger struct (zeros beyond) is accepted")
	assert.Equal(t, "0", got["open-small"], "the first 16-byte struct is accepted")
	assert.Equal(t, "1 top_k 40", got["same"])
}
