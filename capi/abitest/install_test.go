package abitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// `make install PREFIX=dir` installs a library, header and moonlm.pc that a
// C program can build against with pkg-config alone. It runs make in the
// repository, so it runs only under the Makefile (which has just built
// build/libmoonlm.so and exports MOONLM_LIBRARY pointing at it).
func TestMakeInstallPkgConfig(t *testing.T) {
	l := lib(t)
	root, err := repoRoot()
	require.NoError(t, err)
	if os.Getenv("MOONLM_LIBRARY") != filepath.Join(root, "build", "libmoonlm.so") {
		t.Skip("runs only under `make test` (MOONLM_LIBRARY = build/libmoonlm.so), since it runs `make install`")
	}
	for _, tool := range []string{"make", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
	compiler := cc(t)
	prefix := t.TempDir()
	out, err := exec.Command("make", "-C", root, "install", "PREFIX="+prefix).CombinedOutput()
	require.NoError(t, err, "make install:\n%s", out)
	for _, f := range []string{"lib/libmoonlm.so.0", "lib/libmoonlm.so", "include/moonlm.h", "lib/pkgconfig/moonlm.pc"} {
		require.FileExists(t, filepath.Join(prefix, f))
	}

	pc := exec.Command("pkg-config", "--cflags", "--libs", "moonlm")
	pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(prefix, "lib", "pkgconfig"))
	flags, err := pc.Output()
	require.NoError(t, err, "pkg-config")
	require.Contains(t, string(flags), prefix)

	src := filepath.Join(prefix, "hello.c")
	require.NoError(t, os.WriteFile(src, []byte(`#include <stdio.h>
#include <string.h>
#include <moonlm.h>
int main(void) {
	moonlm_model *m = NULL;
	if (moonlm_abi_version() != MOONLM_ABI_VERSION) return 1;
	if (strcmp(moonlm_version(), MOONLM_VERSION_STRING) != 0) return 2;
	if (moonlm_model_open("/nonexistent.gguf", NULL, &m) == MOONLM_OK) return 3;
	printf("installed moonlm %s works\n", moonlm_version());
	return 0;
}
`), 0o644))
	exe := filepath.Join(prefix, "hello")
	args := append([]string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-o", exe, src}, strings.Fields(string(flags))...)
	out, err = exec.Command(compiler, args...).CombinedOutput()
	require.NoError(t, err, "compiling with pkg-config flags:\n%s", out)
	run := exec.Command(exe)
	run.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(prefix, "lib"))
	out, err = run.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "installed moonlm "+l.Version()+" works")
}
