package packagetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// needTool finds name on PATH, installing the Debian packages with
// scripts/need-apt.sh when it is missing, and skips the test (with the
// script's reason) when that cannot be done.
func needTool(t *testing.T, root, name string, pkgs ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "need-apt.sh"), append([]string{name}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("%s is not available (%v): %s", name, err, strings.TrimSpace(string(out)))
	}
}

// TestWindowsDLLRunsCExampleUnderWine builds examples/c/generate.c with
// mingw-w64 against build/windows-amd64/moonlm.dll (`make dll`) and runs it
// under Wine, in a Wine prefix of the test's own, on the stories260K golden
// text.
func TestWindowsDLLRunsCExampleUnderWine(t *testing.T) {
	dll := os.Getenv("MOONLM_DLL")
	if dll == "" {
		t.Skip("MOONLM_DLL is not set: run by `make test-packages`, which builds the DLL first")
	}
	if _, err := os.Stat(dll); err != nil {
		t.Skipf("the Windows DLL was not built (%v): gcc-mingw-w64-x86-64 could not be installed?", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	needTool(t, root, "x86_64-w64-mingw32-gcc", "gcc-mingw-w64-x86-64")
	needTool(t, root, "wine", "wine64", "wine")
	model := shareddata.Path(t, "models/stories260K.gguf")
	want := golden(t)

	dir := t.TempDir()
	data, err := os.ReadFile(dll)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "moonlm.dll"), data, 0o755))
	exe := filepath.Join(dir, "generate.exe")
	run(t, dir, os.Environ(), 2*time.Minute, "x86_64-w64-mingw32-gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
		"-I"+filepath.Join(root, "include"), "-o", exe, filepath.Join(root, "examples", "c", "generate.c"),
		filepath.Join(dir, "moonlm.dll"))

	// Wine keeps everything under the prefix and HOME: both in the test's
	// folder. No Mono or Gecko (the prompts to download them would hang).
	home := t.TempDir()
	prefix := filepath.Join(home, "wine")
	env := append(os.Environ(), "WINEPREFIX="+prefix, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"),
		"WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=", "DISPLAY=")
	run(t, dir, env, 5*time.Minute, "wine", "wineboot", "--init")
	sys32 := filepath.Join(prefix, "drive_c", "windows", "system32")
	if _, err := os.Stat(filepath.Join(sys32, "bcryptprimitives.dll")); err != nil {
		// Wine before 9 lacks the DLL Go's runtime needs at start-up.
		run(t, dir, env, 2*time.Minute, "x86_64-w64-mingw32-gcc", "-shared", "-O2", "-o",
			filepath.Join(sys32, "bcryptprimitives.dll"), filepath.Join(root, "internal", "packagetest", "testdata", "bcryptprimitives.c"),
			"-ladvapi32")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "wine", exe, "-m", model, "-n", "300")
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "wine generate.exe:\n%s", stderr.String())
	// The example prints the continuation of BOS, starting with a space;
	// the C runtime writes text-mode stdout, so lines end in CRLF.
	text := strings.ReplaceAll(strings.TrimPrefix(string(out), " "), "\r\n", "\n")
	require.True(t, strings.HasPrefix(text, want), "Windows greedy output under Wine:\n%s\nwant a prefix:\n%s", text, want)
}
