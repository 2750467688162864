package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/internal/server"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "OpenAI-compatible HTTP server (-m FILE [--host H] [--port P] [--parallel N] [--api-key KEY] ...)",
		run:     runServe,
	})
}

var serveUsage = `usage: moonlm serve -m FILE [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx N]
                    [--api-key KEY | --api-key-file FILE] [--alias NAME] [--chat-template NAME|FILE]
                    [--max-queue N] [--max-prompt-tokens N] [--max-tokens N] [--max-body BYTES]
                    [--timeout DUR] [--shutdown-timeout DUR] [--prefix-reuse=false] [--web DIR] [-t THREADS]
Serves the model over the OpenAI HTTP API:
  POST /v1/chat/completions   chat, streamed (SSE) or not
  POST /v1/completions        text completion, streamed or not
  GET  /v1/models             the model, by its alias (default: the file's name)
  GET  /health                503 while the model loads or the server drains, then 200
  GET  /metrics               Prometheus metrics
  GET  /web/...               the files of --web DIR (e.g. build/web from make web)
It listens on loopback only unless --host says otherwise. --parallel slots
run that many sequences at once (each with a --ctx-token KV cache); more
wait in a queue of --max-queue, and a request that does not fit gets 503
with Retry-After. With --api-key (or --api-key-file) the /v1 routes need
"Authorization: Bearer KEY". A model without a chat template serves chat
only with --chat-template, a built-in format (` + strings.Join(chat.Families(), ", ") + `)
or a Jinja template file. response_format (json_object, json_schema),
tools/tool_choice and logprobs are supported. SIGTERM or SIGINT stops taking
requests, lets those in flight finish (up to --shutdown-timeout), then exits.
docs/SERVING.md describes it all.`

func runServe(args []string) error {
	fs := newFlagSet("serve")
	var ef engineFlags
	ef.register(fs, 4096)
	fs.IntVar(&ef.ctx, "ctx", 4096, "")
	host := fs.String("host", "127.0.0.1", "listen on `address` (0.0.0.0 = every interface)")
	port := fs.Int("port", 8080, "listen on `port` (0 = any free port, printed)")
	parallel := fs.Int("parallel", 1, "run `N` sequences at once (slots)")
	fs.IntVar(parallel, "np", 1, "")
	apiKey := fs.String("api-key", "", "require this `key` as a Bearer token on the /v1 routes")
	apiKeyFile := fs.String("api-key-file", "", "read the API key from `file` (keeps it out of the process list)")
	alias := fs.String("alias", "", "the model's `name` in the API (default: the file's name)")
	tmpl := fs.String("chat-template", "", "chat template: a built-in format `name`, or a Jinja template file")
	maxQueue := fs.Int("max-queue", 64, "sequences that may wait for a slot (`N`)")
	maxPrompt := fs.Int("max-prompt-tokens", 0, "refuse prompts longer than `N` tokens (0 = the context less one)")
	maxTokens := fs.Int("max-tokens", 0, "refuse max_tokens above `N`, and give it to requests without one (0 = no limit but the context)")
	maxBody := fs.Int64("max-body", 4<<20, "refuse request bodies over `bytes`")
	timeout := fs.Duration("timeout", 10*time.Minute, "stop a request after `duration`")
	shutdownTimeout := fs.Duration("shutdown-timeout", 60*time.Second, "on SIGTERM, wait up to `duration` for requests in flight")
	webDir := fs.String("web", "", "also serve the static files of `dir` under /web/ (the browser page of make web)")
	reuse := fs.Bool("prefix-reuse", true, "keep each slot's KV cache and evaluate only what a prompt adds to it (--prefix-reuse=false: evaluate every prompt whole)")
	if help, err := parseFlags(fs, serveUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(serveUsage, "unexpected argument %q", fs.Arg(0))
	}
	switch {
	case ef.model == "":
		return usageErr(serveUsage, "no model: give -m FILE")
	case *parallel < 1 || *parallel > 256:
		return usageErr(serveUsage, "--parallel %d: want 1 to 256", *parallel)
	case *port < 0 || *port > 65535:
		return usageErr(serveUsage, "--port %d: want 0 to 65535", *port)
	case *maxQueue < 1:
		return usageErr(serveUsage, "--max-queue %d: want at least 1", *maxQueue)
	case *maxPrompt < 0 || *maxTokens < 0:
		return usageErr(serveUsage, "--max-prompt-tokens and --max-tokens want 0 or more")
	case *maxBody < 1:
		return usageErr(serveUsage, "--max-body %d: want at least 1", *maxBody)
	case *timeout <= 0 || *shutdownTimeout < 0:
		return usageErr(serveUsage, "--timeout wants a positive duration, --shutdown-timeout zero or more")
	case *apiKey != "" && *apiKeyFile != "":
		return usageErr(serveUsage, "--api-key and --api-key-file: give one")
	}
	cfg := server.Config{
		Alias: *alias, APIKey: *apiKey, Parallel: *parallel, Ctx: ef.ctx, KVF32: ef.kvF32, KVType: ef.kvType,
		MaxQueue: *maxQueue, MaxPromptTokens: *maxPrompt, MaxTokens: *maxTokens, MaxBodyBytes: *maxBody,
		Timeout: *timeout, PrefixReuse: *reuse,
		Log: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) },
	}
	if cfg.Alias == "" {
		cfg.Alias = filepath.Base(ef.model)
	}
	if *apiKeyFile != "" {
		b, err := readSmallFile(*apiKeyFile, 4096)
		if err != nil {
			return fmt.Errorf("--api-key-file: %w", err)
		}
		cfg.APIKey = strings.TrimSpace(string(b))
		if cfg.APIKey == "" {
			return fmt.Errorf("--api-key-file %s: the file is empty", *apiKeyFile)
		}
	}
	if *tmpl != "" {
		if _, err := chat.Family(*tmpl); err == nil {
			cfg.ChatTemplate = *tmpl
		} else if b, ferr := readSmallFile(*tmpl, 1<<20); ferr == nil {
			cfg.ChatTemplateSource = string(b)
		} else {
			return usageErr(serveUsage, "--chat-template %q: not a built-in format (%s) nor a readable file (%v)",
				*tmpl, strings.Join(chat.Families(), ", "), ferr)
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	handler := srv.Handler()
	if *webDir != "" {
		if st, err := os.Stat(*webDir); err != nil || !st.IsDir() {
			return usageErr(serveUsage, "--web %s: not a directory", *webDir)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /web/", http.StripPrefix("/web/", http.FileServer(http.Dir(*webDir))))
		mux.Handle("/", handler)
		handler = mux
	}

	// Listen before loading, so probes see /health say 503 until ready.
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	where := "loopback only; --host 0.0.0.0 listens on every interface"
	if ip := net.ParseIP(*host); (ip == nil && *host != "localhost") || (ip != nil && !ip.IsLoopback()) {
		where = "reachable from other machines"
		if cfg.APIKey == "" {
			where += ", with no --api-key"
		}
	}
	fmt.Fprintf(os.Stderr, "moonlm serve: listening on http://%s (%s)\n", ln.Addr(), where)
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sig)

	m, err := ef.open()
	if err != nil {
		hs.Close()
		return err
	}
	defer m.Close()
	if err := srv.Start(m); err != nil {
		hs.Close()
		return err
	}
	c := srv.Config()
	fmt.Fprintf(os.Stderr, "moonlm serve: ready: model %q, slots %d (context %d tokens each), queue %d\n", c.Alias, c.Parallel, c.Ctx, c.MaxQueue)

	select {
	case err := <-serveErr:
		srv.Close()
		return err
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "moonlm serve: %v: draining the requests in flight (up to %v)\n", s, *shutdownTimeout)
	}
	srv.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	go func() {
		// A second signal stops waiting.
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = hs.Shutdown(ctx)
	if err != nil {
		// Time is up: closing the connections cancels their sequences.
		fmt.Fprintf(os.Stderr, "moonlm serve: requests still in flight after the shutdown timeout; stopping them\n")
		hs.Close()
	}
	srv.Close()
	if e := <-serveErr; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	fmt.Fprintln(os.Stderr, "moonlm serve: stopped")
	return nil
}

// readSmallFile reads a file of at most limit bytes.
func readSmallFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, st.Size(), limit)
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return nil, err
	}
	return b, nil
}
