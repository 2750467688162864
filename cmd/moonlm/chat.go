package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/sample"
)

func init() {
	register(&command{
		name:    "chat",
		summary: "interactive chat with the model's template or a built-in one (-m FILE [--template NAME] [--system TEXT] ...)",
		run:     runChat,
	})
}

var chatUsage = `usage: moonlm chat -m FILE [--template NAME] [--system TEXT] [-n N] [--temp T] [--top-k K] [--top-p P]
                   [--min-p P] [--seed S] [-t THREADS] [-c CTX]
Reads one user message per line from stdin and streams the replies. Empty
lines are skipped; /reset starts a new conversation; EOF or /exit ends.
Ctrl-C stops the reply being generated. The conversation is written with
the model's chat template; a model without one (a base model) is an error
unless --template names a built-in format:
` + strings.Join(chat.Families(), ", ") + `.
-n 0 sets no limit on a reply: it runs until the model ends it or the
context (-c) is full.`

func runChat(args []string) error {
	fs := newFlagSet("chat")
	var ef engineFlags
	var sf samplerFlags
	ef.register(fs, 4096)
	sf.register(fs)
	system := fs.String("system", "", "system prompt `text`")
	n := fs.Int("n", 1024, "generate at most `N` tokens per reply; 0 = no limit (until the model ends it or the context is full)")
	template := fs.String("template", "", "write the conversation in the built-in format `name` instead of the model's template")
	if help, err := parseFlags(fs, chatUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(chatUsage, "unexpected argument %q", fs.Arg(0))
	}
	if *n < 0 {
		return usageErr(chatUsage, "-n %d: want 0 (no limit, what llama.cpp spells -1) or more tokens", *n)
	}
	if *template != "" {
		if _, err := chat.Family(*template); err != nil {
			return usageErr(chatUsage, "--template: %v", err)
		}
	}
	m, err := ef.open()
	if err != nil {
		return err
	}
	defer m.Close()
	// Refuse a model without a usable template before reading any input.
	probe := []chat.Message{{Role: "user", Content: "Hi"}}
	if _, err := m.ApplyChatTemplateNamed(*template, probe, true); errors.Is(err, engine.ErrUnsupported) {
		return fmt.Errorf("%w\n(--template NAME picks one)", err)
	}
	s, err := ef.session(m)
	if err != nil {
		return err
	}
	defer s.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	go func() {
		for range sig {
			s.Cancel()
		}
	}()

	c := &chatState{m: m, s: s, template: *template, sampler: sf.params(), maxTokens: *n}
	if *system != "" {
		c.msgs = append(c.msgs, chat.Message{Role: "system", Content: *system})
	}
	base := len(c.msgs)
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for {
		fmt.Fprint(os.Stderr, "> ")
		line, err := in.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			if err == io.EOF {
				fmt.Fprintln(os.Stderr)
				return nil
			}
			return fmt.Errorf("reading stdin: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			c.msgs = c.msgs[:base]
			continue
		}
		reply, st, err := c.turn(line, func(piece string) bool {
			out.WriteString(piece)
			out.Flush()
			return true
		})
		out.WriteString("\n")
		out.Flush()
		if err != nil && !errors.Is(err, engine.ErrCancelled) {
			return err
		}
		printTimings(st, err)
		if err == nil && st.Finish == engine.FinishContext {
			fmt.Fprintln(os.Stderr, "moonlm: the context is full; /reset to start over")
		}
		_ = reply
	}
}

// chatState is a conversation on one session. Each turn renders the whole
// conversation with the template and prefills only what the KV cache does
// not already hold (the longest common prefix with the cached tokens).
type chatState struct {
	m         *engine.Model
	s         *engine.Session
	template  string // a built-in format's name, or "" for the model's template
	msgs      []chat.Message
	cached    []int32 // the tokens in the session's KV cache, in order
	sampler   sample.Params
	maxTokens int
}

// turn adds a user message, generates the reply (streamed to emit) and adds
// it to the conversation.
func (c *chatState) turn(user string, emit func(string) bool) (string, engine.GenerateResult, error) {
	msgs := append(c.msgs, chat.Message{Role: "user", Content: user})
	text, err := c.m.ApplyChatTemplateNamed(c.template, msgs, true)
	if err != nil {
		return "", engine.GenerateResult{}, err
	}
	// The template writes BOS itself where the model wants it.
	toks, err := c.m.Tokenize(text, false, true)
	if err != nil {
		return "", engine.GenerateResult{}, err
	}
	if len(c.cached) == 0 && c.m.Info().AddBOS && (len(toks) == 0 || toks[0] != c.m.Info().BOS) {
		toks = append([]int32{c.m.Info().BOS}, toks...)
	}
	keep := 0
	for keep < len(c.cached) && keep < len(toks)-1 && c.cached[keep] == toks[keep] {
		keep++
	}
	if err := c.s.Rewind(keep); err != nil {
		return "", engine.GenerateResult{}, err
	}
	c.cached = append(c.cached[:keep], toks[keep:]...)
	var sb strings.Builder
	st, err := c.s.Generate(toks[keep:], engine.GenerateParams{MaxTokens: c.maxTokens, Sampler: c.sampler}, func(p []byte, _ int32) bool {
		sb.Write(p)
		return len(p) == 0 || emit(string(p))
	})
	// Keep the cache bookkeeping exact whatever happened.
	if st.PromptTokens == 0 {
		c.cached = c.cached[:keep]
	}
	gen := st.Generated
	if len(gen) > 0 && !st.LastTokenCached {
		gen = gen[:len(gen)-1]
	}
	c.cached = append(c.cached, gen...)
	if len(c.cached) != c.s.Pos() {
		// Should not happen; fall back to re-prefilling next turn.
		c.cached = c.cached[:0]
		_ = c.s.Rewind(0)
	}
	if err != nil && !errors.Is(err, engine.ErrCancelled) {
		return "", st, err
	}
	reply := strings.TrimSpace(sb.String())
	c.msgs = append(msgs, chat.Message{Role: "assistant", Content: reply})
	return reply, st, err
}
