package abitest

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// declaredFunctions parses include/moonlm.h for its MOONLM_API functions.
func declaredFunctions(t testing.TB) []string {
	h := headerText(t)
	// Drop comments so prose cannot look like a declaration.
	h = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(h, "")
	re := regexp.MustCompile(`(?s)MOONLM_API\s+[^;()]*?\b(moonlm_\w+)\s*\(`)
	var names []string
	for _, m := range re.FindAllStringSubmatch(h, -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	require.NotEmpty(t, names, "no MOONLM_API declarations found in moonlm.h")
	return names
}

// The header and the library agree: every declared function is exported,
// every exported function is declared, and nothing else is exported.
func TestHeaderMatchesExports(t *testing.T) {
	l := lib(t)
	declared := declaredFunctions(t)
	f, err := elf.Open(l.Path)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	exported := map[string]bool{}
	var strays []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			continue // imported from libc and friends
		}
		if s.Section == elf.SHN_ABS && elf.ST_TYPE(s.Info) == elf.STT_OBJECT && s.Value == 0 {
			continue // the version node's own symbol (MOONLM_0)
		}
		if strings.HasPrefix(s.Name, "moonlm_") && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			exported[s.Name] = true
			continue
		}
		strays = append(strays, s.Name)
	}
	assert.Empty(t, strays, "symbols exported beyond the moonlm_* ABI")
	for _, name := range declared {
		assert.True(t, exported[name], "%s is declared in moonlm.h but not exported", name)
		delete(exported, name)
	}
	for name := range exported {
		t.Errorf("%s is exported but not declared in moonlm.h", name)
	}
	sonames, err := f.DynString(elf.DT_SONAME)
	require.NoError(t, err)
	assert.Equal(t, []string{"libmoonlm.so.0"}, sonames)
}

// cc returns the C compiler or skips.
func cc(t testing.TB) string {
	for _, c := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Skip("no C compiler (cc, gcc, clang) on PATH")
	return ""
}

// compileC builds a C program against include/moonlm.h and the library
// (through a libmoonlm.so.0 link named after its soname) and returns it.
func compileC(t *testing.T, l *Lib, src string, extra ...string) string {
	t.Helper()
	compiler := cc(t)
	root, err := repoRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(l.Path, filepath.Join(dir, "libmoonlm.so.0")))
	c := filepath.Join(dir, "prog.c")
	require.NoError(t, os.WriteFile(c, []byte(src), 0o644))
	exe := filepath.Join(dir, "prog")
	args := []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-I", filepath.Join(root, "include"), "-o", exe, c,
		"-L", dir, "-l:libmoonlm.so.0", "-Wl,-rpath," + dir}
	args = append(args, extra...)
	out, err := exec.Command(compiler, args...).CombinedOutput()
	require.NoError(t, err, "compiling:\n%s", out)
	return exe
}

// The Go mirrors used by these tests (and by bindings that copy them) match
// the C compiler's layout of the header's structs.
func TestStructLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
#define F(s, m) printf(#s "." #m " %zu\n", offsetof(s, m))
#define S(s) printf(#s " %zu\n", sizeof(s))
int main(void) {
	S(moonlm_model_params); F(moonlm_model_params, n_threads); F(moonlm_model_params, flags);
	F(moonlm_model_params, pack); F(moonlm_model_params, packed_cache);
	F(moonlm_model_params, packed_cache_dir); F(moonlm_model_params, packed_cache_bytes);
	F(moonlm_model_params, numerics); F(moonlm_model_params, progress);
	F(moonlm_model_params, progress_user_data);
	printf("numerics %d %d %d %d\n", MOONLM_NUMERICS_DEFAULT, MOONLM_NUMERICS_LLAMACPP,
	       MOONLM_NUMERICS_LLAMACPP_NOREPACK, MOONLM_NUMERICS_IK);
	S(moonlm_model_info); F(moonlm_model_info, n_vocab); F(moonlm_model_info, token_eot);
	S(moonlm_open_stats); F(moonlm_open_stats, pack_source); F(moonlm_open_stats, packed_matrices);
	F(moonlm_open_stats, packed_bytes); F(moonlm_open_stats, map_ms); F(moonlm_open_stats, pack_ms);
	printf("pack sources %d %d %d %d %d\n", MOONLM_PACK_SOURCE_OFF, MOONLM_PACK_SOURCE_NONE, MOONLM_PACK_SOURCE_PACKED,
	       MOONLM_PACK_SOURCE_CACHE_WRITE, MOONLM_PACK_SOURCE_CACHE_HIT);
	S(moonlm_session_params); F(moonlm_session_params, n_ctx); F(moonlm_session_params, kv_type); F(moonlm_session_params, flags);
	F(moonlm_session_params, checkpoint_every); F(moonlm_session_params, checkpoint_bytes);
	S(moonlm_checkpoint_info); F(moonlm_checkpoint_info, n_held); F(moonlm_checkpoint_info, bytes_held);
	S(moonlm_sampler_params); F(moonlm_sampler_params, temperature); F(moonlm_sampler_params, min_p);
	F(moonlm_sampler_params, penalty_last_n); F(moonlm_sampler_params, seed);
	S(moonlm_message); F(moonlm_message, content);
	S(moonlm_status);
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var (
		mp  ModelParams
		mi  ModelInfo
		ost OpenStats
		sp  SessionParams
		ci  CheckpointInfo
		smp SamplerParams
		msg Message
		st  int32
	)
	want := fmt.Sprintf(`moonlm_model_params %d
moonlm_model_params.n_threads %d
moonlm_model_params.flags %d
moonlm_model_params.pack %d
moonlm_model_params.packed_cache %d
moonlm_model_params.packed_cache_dir %d
moonlm_model_params.packed_cache_bytes %d
moonlm_model_params.numerics %d
moonlm_model_params.progress %d
moonlm_model_params.progress_user_data %d
numerics 0 1 2 3
moonlm_model_info %d
moonlm_model_info.n_vocab %d
moonlm_model_info.token_eot %d
moonlm_open_stats %d
moonlm_open_stats.pack_source %d
moonlm_open_stats.packed_matrices %d
moonlm_open_stats.packed_bytes %d
moonlm_open_stats.map_ms %d
moonlm_open_stats.pack_ms %d
pack sources %d %d %d %d %d
moonlm_session_params %d
moonlm_session_params.n_ctx %d
moonlm_session_params.kv_type %d
moonlm_session_params.flags %d
moonlm_session_params.checkpoint_every %d
moonlm_session_params.checkpoint_bytes %d
moonlm_checkpoint_info %d
moonlm_checkpoint_info.n_held %d
moonlm_checkpoint_info.bytes_held %d
moonlm_sampler_params %d
moonlm_sampler_params.temperature %d
moonlm_sampler_params.min_p %d
moonlm_sampler_params.penalty_last_n %d
moonlm_sampler_params.seed %d
moonlm_message %d
moonlm_message.content %d
moonlm_status %d
`, unsafe.Sizeof(mp), unsafe.Offsetof(mp.NThreads), unsafe.Offsetof(mp.Flags),
		unsafe.Offsetof(mp.Pack), unsafe.Offsetof(mp.PackedCache),
		unsafe.Offsetof(mp.PackedCacheDir), unsafe.Offsetof(mp.PackedCacheBytes), unsafe.Offsetof(mp.Numerics),
		unsafe.Offsetof(mp.Progress), unsafe.Offsetof(mp.ProgressUserData),
		unsafe.Sizeof(mi), unsafe.Offsetof(mi.NVocab), unsafe.Offsetof(mi.EOT),
		unsafe.Sizeof(ost), unsafe.Offsetof(ost.PackSource), unsafe.Offsetof(ost.PackedMatrices),
		unsafe.Offsetof(ost.PackedBytes), unsafe.Offsetof(ost.MapMs), unsafe.Offsetof(ost.PackMs),
		PackSourceOff, PackSourceNone, PackSourcePacked, PackSourceCacheWrite, PackSourceCacheHit,
		unsafe.Sizeof(sp), unsafe.Offsetof(sp.NCtx), unsafe.Offsetof(sp.KVType), unsafe.Offsetof(sp.Flags),
		unsafe.Offsetof(sp.CheckpointEvery), unsafe.Offsetof(sp.CheckpointBytes),
		unsafe.Sizeof(ci), unsafe.Offsetof(ci.NHeld), unsafe.Offsetof(ci.BytesHeld),
		unsafe.Sizeof(smp), unsafe.Offsetof(smp.Temperature), unsafe.Offsetof(smp.MinP),
		unsafe.Offsetof(smp.PenaltyLastN), unsafe.Offsetof(smp.Seed),
		unsafe.Sizeof(msg), unsafe.Offsetof(msg.Content), unsafe.Sizeof(st))
	assert.Equal(t, want, string(out))
}

// In a fork()ed child every call returns MOONLM_FORKED at once (an alarm
// kills the child if a call hangs), and the parent keeps working.
func TestForkedChild(t *testing.T) {
	l := lib(t)
	src := `#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include "moonlm.h"

static int check(const char *what, moonlm_status got, moonlm_status want) {
	if (got != want) {
		fprintf(stderr, "%s: status %d (%s), want %d; last error: %s\n", what, (int)got,
		        moonlm_status_string(got), (int)want, moonlm_last_error());
		return 1;
	}
	return 0;
}

int main(void) {
	moonlm_model *m = NULL;
	moonlm_sampler *smp = NULL;
	size_t pos = 0;
	/* Enter the Go runtime in the parent first, so its threads exist. */
	if (check("parent free", moonlm_model_free((moonlm_model *)0x1234), MOONLM_INVALID_ARGUMENT))
		return 1;
	pid_t pid = fork();
	if (pid < 0) { perror("fork"); return 1; }
	if (pid == 0) {
		alarm(20);
		int bad = 0;
		bad |= check("child open", moonlm_model_open("/nonexistent/model.gguf", NULL, &m), MOONLM_FORKED);
		if (strstr(moonlm_last_error(), "fork") == NULL) { fprintf(stderr, "message: %s\n", moonlm_last_error()); bad = 1; }
		bad |= check("child sampler_new", moonlm_sampler_new(NULL, &smp), MOONLM_FORKED);
		bad |= check("child chat_builtin_templates", moonlm_chat_builtin_templates(NULL, 0, &pos), MOONLM_FORKED);
		bad |= check("child session_position", moonlm_session_position((moonlm_session *)0x1234, &pos), MOONLM_FORKED);
		bad |= check("child model_free", moonlm_model_free((moonlm_model *)0x1234), MOONLM_FORKED);
		bad |= moonlm_model_is_eog((moonlm_model *)0x1234, 0) != 0;
		bad |= strcmp(moonlm_version(), MOONLM_VERSION_STRING) != 0;
		_exit(bad ? 3 : 0);
	}
	int ws = 0;
	if (waitpid(pid, &ws, 0) != pid) { perror("waitpid"); return 1; }
	if (!WIFEXITED(ws)) { fprintf(stderr, "child died with signal %d (hung?)\n", WTERMSIG(ws)); return 1; }
	if (WEXITSTATUS(ws) != 0) { fprintf(stderr, "child failed\n"); return 1; }
	if (check("parent after fork", moonlm_model_free((moonlm_model *)0x1234), MOONLM_INVALID_ARGUMENT)) return 1;
	puts("fork ok");
	return 0;
}
`
	exe := compileC(t, l, src)
	out, err := exec.Command(exe).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "fork ok")
}
