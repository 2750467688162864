package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/moonlm/moonlm/internal/hub"
)

func init() {
	register(&command{
		name:    "pull",
		summary: "download a GGUF model from the Hugging Face Hub into its cache (REPO[:FILE|:QUANT]); prints its path",
		run:     runPull,
	})
}

const pullUsage = `usage: moonlm pull [--revision REV] [-q] REPO[:FILE|:QUANT]
Downloads a GGUF file of a Hugging Face Hub repository into the Hub's cache
(HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub: shared with
the Hub's own tools) and prints its path, to pass to -m. REPO:FILE names the
file; REPO:QUANT takes the one file whose name contains QUANT (any case, e.g.
Q4_K_M); REPO alone takes its only GGUF file, or its Q4_K_M one. A download
that stops resumes where it was; LFS files are checked against their sha256.
Progress goes to stderr (one line redrawn on a terminal, plain lines
otherwise). HF_TOKEN (or HF_HOME/token) authenticates, HF_ENDPOINT names
another Hub, HF_HUB_OFFLINE=1 uses the cache only; when the Hub cannot be
reached, a file already in the cache is used.`

func runPull(args []string) error {
	fs := newFlagSet("pull")
	revision := fs.String("revision", "main", "branch, tag or commit to download from")
	var quiet bool
	fs.BoolVar(&quiet, "q", false, "no progress")
	fs.BoolVar(&quiet, "quiet", false, "")
	if help, err := parseFlags(fs, pullUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr(pullUsage, "want one REPO[:FILE|:QUANT], got %d arguments", fs.NArg())
	}
	ref, err := hub.ParseRef(fs.Arg(0))
	if err != nil {
		return err
	}
	cfg, err := hub.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	cfg.Revision = *revision
	if !quiet {
		cfg.Progress = hub.NewProgress(os.Stderr, isTerminal(os.Stderr))
	}
	c, err := hub.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	p, err := c.Fetch(ctx, ref)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stdout, p)
	return nil
}

// isTerminal reports whether w is a character device (a terminal), where
// progress redraws one line instead of printing many.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
