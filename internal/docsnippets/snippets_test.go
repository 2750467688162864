// Package docsnippets runs the examples of README.md and of the bindings'
// READMEs as a new user would: every example must work as written.
//
// Which blocks are examples: a fenced block whose info string is exactly
// `c`, `python` or `js` is a complete program and is run; blocks tagged `sh`
// (commands) or anything else are not, except the README's `moonlm serve`
// example, which TestServeSnippet runs with bash. A block whose info string starts with
// one of those words and goes on (```python fragment) or another spelling of
// them (py, javascript, C) fails the test, so no example escapes by its tag.
// In every example the file name `model.gguf` stands for the model and is
// replaced by the default model's path (SmolLM2-135M-Instruct Q4_1), and
// `embedder.gguf` by the committed synthetic BERT (engine/testdata/synth).
//
// How each is run, following the install commands the READMEs give (the
// test checks that the READMEs still say them):
//   - c: `make install PREFIX=<tmp>`, then compiled with
//     `cc prog.c $(pkg-config --cflags --libs moonlm)` and run with no
//     LD_LIBRARY_PATH (moonlm.pc's rpath finds the library);
//   - python: in a fresh virtual environment after
//     `pip install ./bindings/python` (which builds the library with Go);
//   - js: as an ES module (.mjs) in a fresh folder outside the repository
//     after `npm install "$(npm pack --silent <repo>/bindings/node)"`.
//
// The programs run without MOONLM_LIBRARY, so each uses the library its
// install put in place. It runs only under `make test-snippets` (part of
// `make test`), since it installs packages and fetches koffi and Python's
// build tools from their registries.
package docsnippets

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// The documented commands, with <repo> for the checkout's path.
const (
	cCompile   = "cc prog.c $(pkg-config --cflags --libs moonlm)"
	pyInstall  = "pip install ./bindings/python"
	npmInstall = `npm install "$(npm pack --silent <repo>/bindings/node)"`
	npmShown   = `npm install "$(npm pack --silent /path/to/moonlm/bindings/node)"`
)

// readmes are the files whose examples run, relative to the repository.
var readmes = []string{"README.md", "bindings/python/README.md", "bindings/node/README.md"}

// snippet is one example block.
type snippet struct {
	file string // relative to the repository
	line int    // of the opening fence
	lang string
	code string
}

func (s snippet) name() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// checkOutput fails for an example of the top-level README (each of which
// prints generated text) that printed nothing.
func (s snippet) checkOutput(t *testing.T, out string) {
	t.Helper()
	t.Logf("%s printed:\n%s", s.name(), out)
	if s.file == "README.md" {
		require.NotEmpty(t, strings.TrimSpace(out), "%s printed nothing", s.name())
	}
}

// fence opens or closes a fenced block: its backticks and info string.
var fence = regexp.MustCompile("^(```+)\\s*(.*)$")

// exampleLangs are the info strings of examples; suspicious are words that
// would be an example under another spelling or with more words.
var (
	exampleLangs = map[string]bool{"c": true, "python": true, "js": true}
	suspicious   = map[string]bool{"c": true, "python": true, "js": true, "py": true, "javascript": true,
		"mjs": true, "cjs": true, "node": true, "python3": true, "h": true}
)

// parse returns the examples of a Markdown file, failing on blocks that
// look like examples but are not tagged as one.
func parse(t *testing.T, root, rel string) []snippet {
	f, err := os.Open(filepath.Join(root, rel))
	require.NoError(t, err)
	defer f.Close()
	var out []snippet
	var cur *snippet
	var ticks string
	var body strings.Builder
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			ticks = m[1]
			info := strings.TrimSpace(m[2])
			word, _, _ := strings.Cut(info, " ")
			cur = &snippet{file: rel, line: n, lang: info}
			if !exampleLangs[info] && suspicious[strings.ToLower(word)] {
				t.Errorf("%s:%d: block tagged %q: an example is tagged exactly c, python or js (see the package comment)", rel, n, info)
			}
			body.Reset()
		case cur != nil && m != nil && m[1] == ticks && m[2] == "":
			if exampleLangs[cur.lang] {
				cur.code = body.String()
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			body.WriteString(line)
			body.WriteByte('\n')
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a fenced block is not closed", rel)
	return out
}

// repoRoot is the folder holding go.mod, two levels up from this package.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// env is the environment for the installed programs: no MOONLM_LIBRARY,
// so each finds the library its install put in place, plus extra.
func env(extra ...string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "MOONLM_LIBRARY" || k == "LD_LIBRARY_PATH" || k == "PYTHONPATH" || k == "NODE_PATH" {
			continue
		}
		e = append(e, kv)
	}
	return append(e, extra...)
}

// run runs a command in dir, failing the test with its output on an error.
func run(t *testing.T, dir string, environ []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = environ
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s (in %s):\n%s", name, strings.Join(args, " "), dir, out)
	return string(out)
}

func TestSnippets(t *testing.T) {
	if os.Getenv("MOONLM_SNIPPETS") != "1" {
		t.Skip("installs the package and fetches from registries: run by `make test-snippets` (MOONLM_SNIPPETS=1)")
	}
	root := repoRoot(t)
	model := shareddata.Model(t, shareddata.SmolLM2)
	// The embedding examples run on the committed synthetic BERT (a
	// WordPiece vocabulary and a reranker's classifier head).
	embedder := filepath.Join(root, "engine", "testdata", "synth", "synth-bert-Q8_0.gguf")
	require.FileExists(t, embedder)

	byLang := map[string][]snippet{}
	docs := map[string]string{}
	for _, rel := range readmes {
		b, err := os.ReadFile(filepath.Join(root, rel))
		require.NoError(t, err)
		docs[rel] = string(b)
		for _, s := range parse(t, root, rel) {
			require.True(t, strings.Contains(s.code, "model.gguf") || strings.Contains(s.code, "embedder.gguf"),
				"%s: an example opens the model as model.gguf (or an embedding model as embedder.gguf)", s.name())
			s.code = strings.ReplaceAll(s.code, "model.gguf", model)
			s.code = strings.ReplaceAll(s.code, "embedder.gguf", embedder)
			byLang[s.lang] = append(byLang[s.lang], s)
		}
	}
	for _, lang := range []string{"c", "python", "js"} {
		require.NotEmpty(t, byLang[lang], "no %s example found", lang)
	}
	require.Contains(t, docs["README.md"], cCompile)
	require.Contains(t, docs["README.md"], pyInstall)
	require.Contains(t, docs["bindings/python/README.md"], pyInstall)
	require.Contains(t, docs["README.md"], npmShown)
	require.Contains(t, docs["bindings/node/README.md"], npmShown)

	t.Run("c", func(t *testing.T) { runC(t, root, byLang["c"]) })
	t.Run("python", func(t *testing.T) { runPython(t, root, byLang["python"]) })
	t.Run("js", func(t *testing.T) { runJS(t, root, byLang["js"]) })
}

func runC(t *testing.T, root string, snippets []snippet) {
	for _, tool := range []string{"make", "cc", "pkg-config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH (the README's C instructions need it)", tool)
		}
	}
	prefix := t.TempDir()
	run(t, root, os.Environ(), 5*time.Minute, "make", "--no-print-directory", "install", "PREFIX="+prefix)
	for _, s := range snippets {
		t.Run(s.name(), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "prog.c"), []byte(s.code), 0o644))
			e := env("PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib", "pkgconfig"))
			out := run(t, dir, e, 2*time.Minute, "sh", "-c", cCompile)
			require.Empty(t, out, "compiling %s printed warnings", s.name())
			out = run(t, dir, e, 5*time.Minute, filepath.Join(dir, "a.out"))
			s.checkOutput(t, out)
		})
	}
}

func runPython(t *testing.T, root string, snippets []snippet) {
	py, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is not on PATH")
	venv := filepath.Join(t.TempDir(), "venv")
	run(t, root, env(), 2*time.Minute, py, "-m", "venv", venv)
	bin := filepath.Join(venv, "bin")
	// As after `. venv/bin/activate`: its pip and python first on PATH.
	e := env("VIRTUAL_ENV="+venv, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	args := strings.Fields(pyInstall)
	run(t, root, e, 10*time.Minute, filepath.Join(bin, args[0]), append(args[1:], "--quiet", "--disable-pip-version-check")...)
	for _, s := range snippets {
		t.Run(s.name(), func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "example.py"), []byte(s.code), 0o644))
			out := run(t, dir, e, 5*time.Minute, filepath.Join(bin, "python"), "example.py")
			s.checkOutput(t, out)
		})
	}
}

func runJS(t *testing.T, root string, snippets []snippet) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH", tool)
		}
	}
	app := filepath.Join(t.TempDir(), "my-app")
	require.NoError(t, os.Mkdir(app, 0o755))
	run(t, app, env(), 10*time.Minute, "sh", "-c", strings.ReplaceAll(npmInstall, "<repo>", root))
	// The package must be a real install, not a link back into the repository.
	pkg := filepath.Join(app, "node_modules", "moonlm")
	st, err := os.Lstat(pkg)
	require.NoError(t, err)
	require.True(t, st.Mode().IsDir(), "%s is not a folder (a link?)", pkg)
	checkBundledLibraries(t, root, pkg)
	for _, s := range snippets {
		t.Run(s.name(), func(t *testing.T) {
			f := filepath.Join(app, fmt.Sprintf("example-%d.mjs", s.line))
			require.NoError(t, os.WriteFile(f, []byte(s.code), 0o644))
			out := run(t, app, env(), 5*time.Minute, "node", f)
			s.checkOutput(t, out)
		})
	}
}

// checkBundledLibraries checks that the installed package carries the
// prebuilt library of each platform the release tarball is for: always this
// machine's (linux-x64), and linux-arm64 when `make lib-arm64` has built it
// (`make test-snippets` tries to), each for its own CPU.
func checkBundledLibraries(t *testing.T, root, pkg string) {
	t.Helper()
	// ELF e_machine by platform.
	machines := map[string]uint16{"linux-x64": 62, "linux-arm64": 183}
	for _, plat := range []string{"linux-x64", "linux-arm64"} {
		t.Run("bundles "+plat, func(t *testing.T) {
			if plat == "linux-arm64" {
				if _, err := os.Stat(filepath.Join(root, "build", "linux-arm64", "libmoonlm.so")); err != nil {
					t.Skip("build/linux-arm64/libmoonlm.so was not built (`make lib-arm64` needs gcc-aarch64-linux-gnu)")
				}
			}
			f, err := os.Open(filepath.Join(pkg, "lib", plat, "libmoonlm.so"))
			require.NoError(t, err, "the installed package has no %s library", plat)
			defer f.Close()
			head := make([]byte, 20)
			_, err = io.ReadFull(f, head)
			require.NoError(t, err)
			require.Equal(t, "\x7fELF", string(head[:4]))
			require.Equal(t, machines[plat], uint16(head[18])|uint16(head[19])<<8, "%s library built for another CPU", plat)
		})
	}
}

// TestServeSnippet runs the README's `moonlm serve` example as written
// (bash, from the repository root, model.gguf replaced): the server starts,
// answers the chat request and drains on the kill. It needs port 8080 free.
func TestServeSnippet(t *testing.T) {
	if os.Getenv("MOONLM_SNIPPETS") != "1" {
		t.Skip("runs the built CLI: run by `make test-snippets` (MOONLM_SNIPPETS=1)")
	}
	root := repoRoot(t)
	model := shareddata.Model(t, shareddata.SmolLM2)
	require.FileExists(t, filepath.Join(root, "build", "moonlm"), "make cli first")
	if l, err := net.Listen("tcp", "127.0.0.1:8080"); err != nil {
		t.Skipf("the example listens on 127.0.0.1:8080, which is taken here: %v", err)
	} else {
		l.Close()
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	var code string
	for _, blk := range strings.Split(string(b), "```sh\n")[1:] {
		body, _, _ := strings.Cut(blk, "```")
		if strings.Contains(body, "build/moonlm serve") {
			code = body
		}
	}
	require.NotEmpty(t, code, "README.md has no sh block running build/moonlm serve")
	require.Contains(t, code, "model.gguf")
	code = strings.ReplaceAll(code, "model.gguf", model)
	out := run(t, root, env("MOONLM_PACKED_CACHE=off"), 2*time.Minute, "bash", "-e", "-c", code+"\nwait\n")
	t.Logf("README.md serve example printed:\n%s", out)
	require.Contains(t, out, `"choices"`, "the chat request got no completion")
	require.Contains(t, out, `"finish_reason"`)
}
