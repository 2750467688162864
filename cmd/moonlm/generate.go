package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/moonlm/moonlm/engine"
)

func init() {
	register(&command{
		name:    "generate",
		summary: "continue a prompt (-m FILE -p PROMPT|-f FILE [-n N] [--temp T] [--ids] ...)",
		run:     runGenerate,
	})
}

const generateUsage = `usage: moonlm generate -m FILE (-p PROMPT | -f FILE | -p -) [-n N] [--temp T] [--top-k K] [--top-p P]
                       [--min-p P] [--seed S] [-t THREADS] [-c CTX] [--ids] [--no-display-prompt]
                       [--lookup | --model-draft FILE] [--draft-max N]
Prints the prompt and streams its continuation to stdout, and the timings
to stderr. The prompt is -p's text, the contents of -f FILE, or with -p -
what stdin holds (one trailing newline dropped from a file or stdin, as
llama.cpp does). -n 0 sets no limit: generation runs until the model ends
it or the context (-c, default the model's) is full. --temp 0 is greedy
decoding. --lookup and --model-draft decode speculatively: faster when the
guesses are right, the tokens drawn from the model's distribution as
without them.`

// maxPromptBytes bounds a prompt read from a file or stdin: far more text
// than any model's context holds, so a larger one is a mistake.
const maxPromptBytes = 64 << 20

func runGenerate(args []string) error {
	fs := newFlagSet("generate")
	var ef engineFlags
	var sf samplerFlags
	var spf specFlags
	ef.register(fs, 0)
	sf.register(fs)
	spf.register(fs)
	prompt := fs.String("p", "", "the prompt `text`; - reads it from stdin")
	fs.StringVar(prompt, "prompt", "", "")
	file := fs.String("f", "", "read the prompt from `file`")
	fs.StringVar(file, "file", "", "")
	n := fs.Int("n", 128, "generate at most `N` tokens; 0 = no limit (until the model ends the text or the context is full)")
	fs.IntVar(n, "n-predict", 128, "")
	ids := fs.Bool("ids", false, "print the generated token ids, space-separated, instead of the text")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS token the model asks for")
	noEcho := fs.Bool("no-display-prompt", false, "print only the continuation, not the prompt before it")
	if help, err := parseFlags(fs, generateUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(generateUsage, "unexpected argument %q", fs.Arg(0))
	}
	if *n < 0 {
		return usageErr(generateUsage, "-n %d: want 0 (no limit, what llama.cpp spells -1) or more tokens", *n)
	}
	text, err := promptText(fs, *prompt, *file, os.Stdin)
	if err != nil {
		return usageErr(generateUsage, "%v", err)
	}
	m, err := ef.open()
	if err != nil {
		return err
	}
	defer m.Close()
	toks, err := m.Tokenize(text, !*noBOS, true)
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		bos := m.Info().BOS
		if bos < 0 {
			return fmt.Errorf("empty prompt and the model has no BOS token to start from")
		}
		toks = []int32{bos}
	}
	s, err := ef.session(m)
	if err != nil {
		return err
	}
	defer s.Close()
	if len(toks) > s.NCtx() {
		return fmt.Errorf("the prompt is %d tokens, more than the context's %d (-c)", len(toks), s.NCtx())
	}
	draft, closeDraft, err := spf.drafter(&ef, m, s.NCtx())
	if err != nil {
		return err
	}
	defer closeDraft()

	// Ctrl-C stops the generation cleanly (timings still print).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			s.Cancel()
		}
	}()

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if !*ids && !*noEcho {
		// As llama-cli does, so the output reads as one text.
		out.WriteString(text)
		out.Flush()
	}
	emit := func(piece []byte, _ int32) bool {
		if !*ids {
			out.Write(piece)
			out.Flush()
		}
		return true
	}
	st, err := s.Generate(toks, engine.GenerateParams{MaxTokens: *n, Sampler: sf.params(), Draft: draft, DraftTokens: spf.draftMax}, emit)
	if *ids {
		for i, id := range st.Generated {
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString(strconv.Itoa(int(id)))
		}
	}
	out.WriteByte('\n')
	out.Flush()
	printTimings(st, err)
	fmt.Fprint(os.Stderr, draftLine(st))
	return err
}

// promptText returns the prompt the flags ask for: -p's text, -f's file or,
// for -p -, stdin. Exactly one of -p and -f must be given.
func promptText(fs *flag.FlagSet, prompt, file string, stdin io.Reader) (string, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	hasP, hasF := set["p"] || set["prompt"], set["f"] || set["file"]
	switch {
	case hasP && hasF:
		return "", fmt.Errorf("give the prompt with -p or -f, not both")
	case hasF:
		f, err := os.Open(file)
		if err != nil {
			return "", fmt.Errorf("-f: %w", err)
		}
		defer f.Close()
		return readPrompt(f, "-f "+file)
	case hasP && prompt == "-":
		return readPrompt(stdin, "stdin")
	case hasP:
		return prompt, nil
	}
	return "", fmt.Errorf("no prompt: give -p TEXT, -f FILE, or -p - to read it from stdin")
}

// readPrompt reads a whole prompt (at most maxPromptBytes) and drops one
// trailing newline.
func readPrompt(r io.Reader, what string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPromptBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading the prompt from %s: %w", what, err)
	}
	if len(b) > maxPromptBytes {
		return "", fmt.Errorf("the prompt in %s is over %d MiB", what, maxPromptBytes>>20)
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(s, "\r"), nil
}
