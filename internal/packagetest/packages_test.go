// Package packagetest checks the packages `make wheel` puts in build/dist as
// a user without a toolchain meets them: the x86_64 wheel installed into a
// fresh virtual environment on a PATH with no `go` generates the stories260K
// golden text; the sdist builds its library with Go; the aarch64 library
// runs a C example under qemu-aarch64, and the Windows DLL under Wine.
//
// It runs under `make test-packages` (part of `make test`), which builds the
// packages first and names them in MOONLM_DIST, MOONLM_LIB_ARM64 and
// MOONLM_DLL.
package packagetest

import (
	"archive/zip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// dist is the folder of the built packages, skipping the test without it.
func dist(t *testing.T) string {
	t.Helper()
	d := os.Getenv("MOONLM_DIST")
	if d == "" {
		t.Skip("MOONLM_DIST is not set: run by `make test-packages`, which builds the packages first")
	}
	return d
}

// one returns the single file of dir matching pattern.
func one(t *testing.T, dir, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	require.NoError(t, err)
	require.Len(t, m, 1, "want exactly one %s in %s (did `make wheel` fail?)", pattern, dir)
	return m[0]
}

// run runs a command, failing the test with its output on an error.
func run(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// pathWithoutGo is $PATH less every folder that holds a `go` program.
func pathWithoutGo() string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if st, err := os.Stat(filepath.Join(dir, "go")); err == nil && !st.IsDir() {
			continue
		}
		keep = append(keep, dir)
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// cleanEnv is the environment with none of the variables that would point
// an installed package at another library, and the given ones.
func cleanEnv(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MOONLM_LIBRARY", "MOONLM_PREBUILT_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH", "VIRTUAL_ENV":
			continue
		}
		e = append(e, kv)
	}
	return append(e, extra...)
}

// golden is the stories260K greedy continuation from BOS.
func golden(t *testing.T) string {
	b, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	return strings.TrimRight(string(b), "\n ")
}

const goldenScript = `import sys, moonlm
m = moonlm.Model(sys.argv[1], n_threads=1)
want = open(sys.argv[2], encoding="utf-8").read().rstrip()
n = len(m.tokenize(want, add_special=False)) + 4
text = m.generate("", max_tokens=n, temperature=0).removeprefix(" ")
print(moonlm.library_path())
print(text)
`

func TestWheelInstallsWithoutGo(t *testing.T) {
	d := dist(t)
	whl := one(t, d, "moonlm-*-py3-none-manylinux_*_x86_64.whl")
	model := shareddata.Path(t, "models/stories260K.gguf")
	want := golden(t)

	path := pathWithoutGo()
	_, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is not on PATH")
	venv := filepath.Join(t.TempDir(), "venv")
	env := cleanEnv("PATH=" + path)
	run(t, t.TempDir(), env, 2*time.Minute, "python3", "-m", "venv", venv)
	bin := filepath.Join(venv, "bin")
	env = cleanEnv("VIRTUAL_ENV="+venv, "PATH="+bin+string(os.PathListSeparator)+path)
	// No `go` anywhere the install or the program could find it.
	check := exec.Command("sh", "-c", "command -v go")
	check.Env = env
	out, _ := check.Output()
	require.Empty(t, strings.TrimSpace(string(out)), "go is still on the test's PATH")

	run(t, t.TempDir(), env, 5*time.Minute, filepath.Join(bin, "pip"), "install", "--no-index", "--no-deps",
		"--quiet", "--disable-pip-version-check", whl)
	dir := t.TempDir()
	script := filepath.Join(dir, "golden.py")
	require.NoError(t, os.WriteFile(script, []byte(goldenScript), 0o644))
	out2 := run(t, dir, env, 2*time.Minute, filepath.Join(bin, "python"), script, model,
		shareddata.Path(t, "models/stories260K.golden.txt"))
	libPath, text, _ := strings.Cut(out2, "\n")
	require.True(t, strings.HasPrefix(libPath, venv), "the library came from %s, not the venv's wheel", libPath)
	require.True(t, strings.HasPrefix(text, want), "greedy text:\n%s\nwant a prefix:\n%s", text, want)
}

func TestWheelsHoldOneLibraryOfTheirCPU(t *testing.T) {
	d := dist(t)
	// ELF e_machine by the wheel tag's CPU.
	machines := map[string]uint16{"x86_64": 62, "aarch64": 183}
	for arch, machine := range machines {
		t.Run(arch, func(t *testing.T) {
			if arch == "aarch64" && !arm64Built() {
				t.Skip("no aarch64 wheel: the aarch64 library was not built (gcc-aarch64-linux-gnu could not be installed?)")
			}
			whl := one(t, d, "moonlm-*-py3-none-manylinux_2_*_"+arch+".whl")
			zr, err := zip.OpenReader(whl)
			require.NoError(t, err)
			var found bool
			for _, f := range zr.File {
				if f.Name != "moonlm/libmoonlm.so" {
					continue
				}
				found = true
				r, err := f.Open()
				require.NoError(t, err)
				head := make([]byte, 20)
				_, err = io.ReadFull(r, head)
				require.NoError(t, err)
				r.Close()
				require.Equal(t, "\x7fELF", string(head[:4]), "%s: libmoonlm.so is not ELF", whl)
				require.Equal(t, machine, uint16(head[18])|uint16(head[19])<<8, "%s: library for another CPU", whl)
			}
			zr.Close()
			require.True(t, found, "%s has no moonlm/libmoonlm.so", whl)
		})
	}
}

// arm64Built reports whether `make test-packages` built the aarch64 library
// (and so its wheel).
func arm64Built() bool {
	lib := os.Getenv("MOONLM_LIB_ARM64")
	if lib == "" {
		return false
	}
	_, err := os.Stat(lib)
	return err == nil
}

func TestSdistBuildsLibraryWithGo(t *testing.T) {
	d := dist(t)
	sdist := one(t, d, "moonlm-*.tar.gz")
	py := os.Getenv("PKG_PYTHON")
	if py == "" {
		t.Skip("PKG_PYTHON is not set: run by `make test-packages` (build/pkg-venv has the build tools)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: the sdist builds libmoonlm.so with Go")
	}
	out := t.TempDir()
	env := cleanEnv("PATH=" + os.Getenv("PATH"))
	run(t, out, env, 8*time.Minute, py, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
		"--disable-pip-version-check", "-w", out, sdist)
	whl := one(t, out, "moonlm-*-py3-none-linux_*.whl")
	zr, err := zip.OpenReader(whl)
	require.NoError(t, err)
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	require.Contains(t, names, "moonlm/libmoonlm.so", "the wheel built from the sdist has no library")
}

func TestArm64LibraryRunsCExampleUnderQemu(t *testing.T) {
	lib := os.Getenv("MOONLM_LIB_ARM64")
	if lib == "" {
		t.Skip("MOONLM_LIB_ARM64 is not set: run by `make test-packages`")
	}
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("the aarch64 library was not built (%v): gcc-aarch64-linux-gnu could not be installed?", err)
	}
	for _, tool := range []string{"aarch64-linux-gnu-gcc", "qemu-aarch64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian: gcc-aarch64-linux-gnu, qemu-user)", tool)
		}
	}
	sysroot := "/usr/aarch64-linux-gnu" // Debian's libc6-arm64-cross
	if _, err := os.Stat(filepath.Join(sysroot, "lib", "ld-linux-aarch64.so.1")); err != nil {
		t.Skipf("the aarch64 C library is not installed (Debian: libc6-arm64-cross): %v", err)
	}
	model := shareddata.Path(t, "models/stories260K.gguf")
	want := golden(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)

	dir := t.TempDir()
	// The soname is libmoonlm.so.0: link and run against a file of that name.
	data, err := os.ReadFile(lib)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libmoonlm.so.0"), data, 0o755))
	prog := filepath.Join(dir, "generate")
	run(t, dir, os.Environ(), 2*time.Minute, "aarch64-linux-gnu-gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
		"-I"+filepath.Join(root, "include"), "-o", prog, filepath.Join(root, "examples", "c", "generate.c"),
		filepath.Join(dir, "libmoonlm.so.0"), "-Wl,-rpath,"+dir)
	// The example prints the continuation of BOS, starting with a space.
	out := run(t, dir, os.Environ(), 5*time.Minute, "qemu-aarch64", "-L", sysroot, prog, "-m", model, "-n", "300")
	require.True(t, strings.HasPrefix(strings.TrimPrefix(out, " "), want),
		"aarch64 greedy output:\n%s\nwant a prefix:\n%s", out, want)
}
