package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/moonlm/moonlm/internal/version"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runCLI runs the command line args with stdin as standard input and
// returns what it wrote to stdout and stderr, and its exit status.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	errR, errW, err := os.Pipe()
	require.NoError(t, err)
	go func() {
		io.WriteString(inW, stdin)
		inW.Close()
	}()
	read := func(r *os.File, into chan<- string) {
		b, _ := io.ReadAll(r)
		r.Close()
		into <- string(b)
	}
	outC, errC := make(chan string), make(chan string)
	go read(outR, outC)
	go read(errR, errC)
	oldIn, oldOut, oldErr := os.Stdin, os.Stdout, os.Stderr
	os.Stdin, os.Stdout, os.Stderr = inR, outW, errW
	status = runMain(args)
	os.Stdin, os.Stdout, os.Stderr = oldIn, oldOut, oldErr
	outW.Close()
	errW.Close()
	inR.Close()
	return <-outC, <-errC, status
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// A long option written with one dash ("-temp"), where the usage lines and
// help write "--temp".
var singleDashLong = regexp.MustCompile(`(?m)(?:^|[\s\[(|,])(-[a-zA-Z][a-zA-Z0-9-]+)`)

// An option as written in a usage line.
var usageOption = regexp.MustCompile(`(?:^|[\s\[(|])(--?[a-zA-Z][a-zA-Z0-9-]*)`)

// "moonlm help CMD", "moonlm CMD --help" and "moonlm CMD -h" print the same
// help to stdout for every command; it spells long options with two dashes,
// as the usage line does, and lists every option the usage line shows.
func TestCommandHelp(t *testing.T) {
	require.Contains(t, commands, "generate")
	for _, name := range commandNames() {
		t.Run(name, func(t *testing.T) {
			help, stderr, st := runCLI(t, "", "help", name)
			require.Equal(t, 0, st, stderr)
			assert.True(t, strings.HasPrefix(help, "usage: moonlm "+name), "%q", help)
			for _, flag := range []string{"--help", "-h"} {
				out, stderr, st := runCLI(t, "", name, flag)
				require.Equal(t, 0, st, stderr)
				assert.Equal(t, help, out, "moonlm %s %s", name, flag)
			}
			for _, m := range singleDashLong.FindAllStringSubmatch(help, -1) {
				t.Errorf("help spells %q with one dash:\n%s", m[1], help)
			}
			usage, options, ok := strings.Cut(help, "\noptions:\n")
			if !ok {
				return // inspect and tokenize list their few options in the usage text
			}
			lines := strings.SplitN(usage, "\n", 3)
			usageLines := lines[0] + "\n" + lines[1]
			for _, m := range usageOption.FindAllStringSubmatch(usageLines, -1) {
				opt := regexp.MustCompile(`(?m)^  (?:-\w, )?` + regexp.QuoteMeta(m[1]) + `(?:[ ,]|$)|, ` + regexp.QuoteMeta(m[1]) + `\b`)
				assert.Regexp(t, opt, options, "usage line of %s shows %s; the options do not list it", name, m[1])
			}
		})
	}
}

func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		out, _, st := runCLI(t, "", args...)
		assert.Equal(t, 0, st, "%v", args)
		for _, name := range commandNames() {
			assert.Contains(t, out, "\n  "+name+" ", "%v lists %s", args, name)
		}
	}
	_, stderr, st := runCLI(t, "")
	assert.Equal(t, 2, st)
	assert.Contains(t, stderr, "usage: moonlm COMMAND")
	_, stderr, st = runCLI(t, "", "help", "nonsense")
	assert.Equal(t, 2, st)
	assert.Contains(t, stderr, `unknown command "nonsense"`)
	_, _, st = runCLI(t, "", "nonsense")
	assert.Equal(t, 2, st)
}

// --version, -version and version print the library and ABI versions, the
// kernel set in use and the toolchain.
func TestVersionCommand(t *testing.T) {
	out, stderr, st := runCLI(t, "", "version")
	require.Equal(t, 0, st, stderr)
	assert.Contains(t, out, "moonlm "+version.Library+" ")
	assert.Regexp(t, `C ABI \d+`, out)
	assert.Contains(t, out, "kernels: "+kernels.Detect().Name()+" ")
	assert.Contains(t, out, runtime.Version())
	assert.Contains(t, out, "revision: ")
	for _, flag := range []string{"--version", "-version"} {
		o, _, st := runCLI(t, "", flag)
		assert.Equal(t, 0, st)
		assert.Equal(t, out, o, flag)
	}
	_, _, st = runCLI(t, "", "version", "extra")
	assert.Equal(t, 1, st)
	// MOONLM_KERNELS names the set the commands would use.
	t.Setenv("MOONLM_KERNELS", "generic")
	out, stderr, st = runCLI(t, "", "version")
	require.Equal(t, 0, st, stderr)
	assert.Contains(t, out, "kernels: generic ")
}

func TestRevision(t *testing.T) {
	assert.Contains(t, revision(nil), "unknown")
	assert.Contains(t, revision(&debug.BuildInfo{}), "unknown")
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "0123abcd (modified), 2026-01-02T03:04:05Z", revision(bi))
	bi.Settings[2].Value = "false"
	assert.Equal(t, "0123abcd, 2026-01-02T03:04:05Z", revision(bi))
}

const storyPrompt = "Once upon a time"

// generate needs a prompt from exactly one of -p, -f and -p - (stdin), and
// -n at least 0; each source gives the same greedy text, which starts with
// the prompt itself unless --no-display-prompt.
func TestGeneratePromptSources(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	base := []string{"generate", "-m", model, "--temp", "0", "-n", "12", "-t", "1"}
	run := func(stdin string, extra ...string) (string, string, int) {
		return runCLI(t, stdin, append(append([]string{}, base...), extra...)...)
	}
	want, stderr, st := run("", "-p", storyPrompt)
	require.Equal(t, 0, st, stderr)
	require.True(t, strings.HasPrefix(want, storyPrompt), "the prompt is echoed first: %q", want)
	cont := strings.TrimPrefix(want, storyPrompt)
	require.NotEmpty(t, strings.TrimSpace(cont))
	assert.Contains(t, stderr, "stop: length")

	got, stderr, st := run(storyPrompt+"\n", "-p", "-")
	require.Equal(t, 0, st, stderr)
	assert.Equal(t, want, got, "-p - reads stdin (its trailing newline dropped)")

	file := filepath.Join(t.TempDir(), "prompt.txt")
	require.NoError(t, os.WriteFile(file, []byte(storyPrompt+"\n"), 0o644))
	got, stderr, st = run("", "-f", file)
	require.Equal(t, 0, st, stderr)
	assert.Equal(t, want, got, "-f FILE")

	got, stderr, st = run("", "-p", storyPrompt, "--no-display-prompt")
	require.Equal(t, 0, st, stderr)
	assert.Equal(t, cont, got)

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "no prompt"},
		{[]string{"-p", "x", "-f", file}, "not both"},
		{[]string{"-f", filepath.Join(t.TempDir(), "missing.txt")}, "missing.txt"},
		{[]string{"-p", "x", "-n", "-5"}, "-n -5"},
		{[]string{"-p", "x", "-n=-1"}, "-n -1"},
	} {
		out, stderr, st := run("", c.args...)
		assert.Equal(t, 1, st, "%v", c.args)
		assert.Contains(t, stderr, c.msg, "%v", c.args)
		assert.Empty(t, out, "%v", c.args)
		assert.NotContains(t, stderr, "moonlm: loaded", "%v is refused before the model is opened", c.args)
	}
}

// A prompt longer than the context fails with the sizes and no timings
// line (which used to say "stop: eog").
func TestGenerateOverlongPrompt(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	long := strings.Repeat(storyPrompt+" ", 20)
	out, stderr, st := runCLI(t, "", "generate", "-m", model, "-c", "16", "-p", long, "-t", "1")
	assert.Equal(t, 1, st)
	assert.Contains(t, stderr, "more than the context's 16")
	assert.NotContains(t, stderr, "stop:")
	assert.Empty(t, out)
}

// timingLine: nothing for a call that failed before its prompt was
// evaluated (here a real over-long prefill), the true reason otherwise.
func TestTimingLine(t *testing.T) {
	m, err := engine.Open(shareddata.Path(t, "models/stories260K.gguf"), engine.ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	s, err := m.NewSession(engine.SessionParams{NCtx: 8})
	require.NoError(t, err)
	defer s.Close()
	toks, err := m.Tokenize(strings.Repeat(storyPrompt+" ", 10), true, false)
	require.NoError(t, err)
	st, err := s.Generate(toks, engine.GenerateParams{MaxTokens: 4}, nil)
	require.ErrorIs(t, err, engine.ErrContextFull)
	assert.Equal(t, "", timingLine(st, err))

	done := engine.GenerateResult{PromptTokens: 5, Tokens: 3, Finish: engine.FinishLength}
	assert.Contains(t, timingLine(done, nil), "prompt 5 tokens")
	assert.Contains(t, timingLine(done, nil), "stop: length\n")
	assert.Contains(t, timingLine(done, engine.ErrCancelled), "stop: cancelled\n")
	assert.Contains(t, timingLine(done, engine.ErrInternal), "stop: error\n")
	assert.Contains(t, timingLine(engine.GenerateResult{PromptTokens: 5, Finish: engine.FinishEOG}, nil), "stop: eog\n")
}

// chat on a model without a template refuses before reading input, naming
// the built-in templates and --template; --template NAME chats with one;
// an unknown name lists the known ones.
func TestChatTemplateFlag(t *testing.T) {
	model := shareddata.Path(t, "models/stories260K.gguf")
	out, stderr, st := runCLI(t, "Hi\n", "chat", "-m", model, "-t", "1")
	assert.Equal(t, 1, st)
	assert.Empty(t, out)
	assert.Contains(t, stderr, "no chat template")
	assert.Contains(t, stderr, "--template NAME")
	for _, n := range chat.Families() {
		assert.Contains(t, stderr, n)
	}
	assert.NotContains(t, stderr, "stop:")

	out, stderr, st = runCLI(t, "Hi\n/exit\n", "chat", "-m", model, "-t", "1", "--template", "chatml", "--temp", "0", "-n", "8")
	require.Equal(t, 0, st, stderr)
	assert.NotEmpty(t, strings.TrimSpace(out))
	assert.Contains(t, stderr, "prompt ")

	_, stderr, st = runCLI(t, "", "chat", "-m", model, "--template", "nope")
	assert.Equal(t, 1, st)
	assert.Contains(t, stderr, `"nope"`)
	assert.Contains(t, stderr, "chatml")
	_, stderr, st = runCLI(t, "", "chat", "-m", model, "--template", "chatml", "-n", "-1")
	assert.Equal(t, 1, st)
	assert.Contains(t, stderr, "-n -1")
}

// Option errors spell options as help does, and end with the usage lines
// (not the whole help).
func TestOptionErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"generate", "--bogus"}, "unknown option --bogus\n"},
		{[]string{"generate", "-bogus"}, "unknown option --bogus\n"},
		{[]string{"generate", "-x"}, "unknown option -x\n"},
		{[]string{"generate", "-p"}, "missing value for -p\n"},
		{[]string{"chat", "--top-k"}, "missing value for --top-k\n"},
		{[]string{"generate", "--temp", "warm", "-p", "x"}, `--temp: invalid value "warm": not a number` + "\n"},
		{[]string{"bench", "--nope"}, "unknown option --nope\n"},
		{[]string{"generate", "--cache-type", "q4_0", "-p", "x"}, `--cache-type: invalid value "q4_0": want f16, f32 or q8_0` + "\n"},
		{[]string{"bench", "--cache-type", "bf16"}, `--cache-type: invalid value "bf16": want f16, f32 or q8_0` + "\n"},
		{[]string{"tokenize", "--nope"}, "unknown option --nope\n"},
	} {
		_, stderr, st := runCLI(t, "", c.args...)
		assert.Equal(t, 1, st, "%v", c.args)
		assert.Contains(t, stderr, c.msg, "%v", c.args)
		assert.Contains(t, stderr, "\nusage: moonlm "+c.args[0], "%v", c.args)
		assert.Contains(t, stderr, "(moonlm help "+c.args[0]+" says more)", "%v", c.args)
		assert.NotContains(t, stderr, "options:", "%v prints the usage lines, not the whole help", c.args)
	}
}
