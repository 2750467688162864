package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strconv"

	"github.com/moonlm/moonlm/engine"
)

func init() {
	register(&command{
		name:    "generate",
		summary: "continue a prompt (-m FILE -p PROMPT [-n N] [--temp T] [--ids] ...)",
		run:     runGenerate,
	})
}

const generateUsage = `usage: moonlm generate -m FILE -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P] [--seed S] [-t THREADS] [--ids]
Streams the continuation of PROMPT to stdout (only the new text) and
timings to stderr. --temp 0 is greedy decoding.`

func runGenerate(args []string) error {
	fs := newFlagSet("generate", generateUsage)
	var ef engineFlags
	var sf samplerFlags
	ef.register(fs, 0)
	sf.register(fs)
	prompt := fs.String("p", "", "the prompt `text`")
	fs.StringVar(prompt, "prompt", "", "the prompt `text` (same as -p)")
	n := fs.Int("n", 128, "tokens to generate at most (0 = until the end of generation)")
	fs.IntVar(n, "n-predict", 128, "same as -n")
	ids := fs.Bool("ids", false, "print the generated token ids, space-separated, instead of text")
	noBOS := fs.Bool("no-bos", false, "do not add the BOS token the model asks for")
	if help, err := parseFlags(fs, generateUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), generateUsage)
	}
	if *n < 0 {
		*n = 0
	}
	m, err := ef.open()
	if err != nil {
		return err
	}
	defer m.Close()
	toks, err := m.Tokenize(*prompt, !*noBOS, true)
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
	first := true
	var st engine.GenerateResult
	emit := func(piece []byte, _ int32) bool {
		if !*ids {
			out.Write(piece)
			out.Flush()
		}
		return true
	}
	st, err = s.Generate(toks, engine.GenerateParams{MaxTokens: *n, Sampler: sf.params()}, emit)
	if *ids {
		for _, id := range st.Generated {
			if !first {
				out.WriteByte(' ')
			}
			first = false
			out.WriteString(strconv.Itoa(int(id)))
		}
	}
	out.WriteByte('\n')
	out.Flush()
	printTimings(st)
	return err
}
