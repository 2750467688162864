package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/sample"
)

// engineFlags are the options generate, chat and perplexity share. The flag
// package accepts both -name and --name.
type engineFlags struct {
	model   string
	threads int
	ctx     int
	kvF32   bool
	pack    string
	cache   string
}

func (f *engineFlags) register(fs *flag.FlagSet, defCtx int) {
	fs.StringVar(&f.model, "m", "", "GGUF model `file`")
	fs.StringVar(&f.model, "model", "", "GGUF model `file` (same as -m)")
	fs.IntVar(&f.threads, "t", 0, "worker `threads` (0 = all cores)")
	fs.IntVar(&f.threads, "threads", 0, "worker `threads` (same as -t)")
	fs.IntVar(&f.ctx, "c", defCtx, "context size in `tokens` (0 = the model's)")
	fs.IntVar(&f.ctx, "ctx-size", defCtx, "context size in `tokens` (same as -c)")
	fs.BoolVar(&f.kvF32, "kv-f32", false, "keep the KV cache in f32 instead of f16")
	fs.StringVar(&f.pack, "pack", "auto", "repack weights for faster kernels: auto (MOONLM_PACK), on or off")
	fs.StringVar(&f.cache, "packed-cache", "auto", "keep packed weights in the on-disk cache: auto (MOONLM_PACKED_CACHE), on or off")
}

// modelParams turns the flags into engine.ModelParams.
func (f *engineFlags) modelParams() (engine.ModelParams, error) {
	p := engine.ModelParams{Threads: f.threads}
	var err error
	if p.Pack, err = parsePackMode(f.pack); err != nil {
		return p, err
	}
	switch f.cache {
	case "auto", "":
	case "on":
		p.PackedCache.Mode = engine.CacheOn
	case "off":
		p.PackedCache.Mode = engine.CacheOff
	default:
		return p, fmt.Errorf("--packed-cache %q: want auto, on or off", f.cache)
	}
	return withEnv(p)
}

func (f *engineFlags) open() (*engine.Model, error) {
	if f.model == "" {
		return nil, fmt.Errorf("no model: give -m FILE")
	}
	p, err := f.modelParams()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	m, err := engine.Open(f.model, p)
	if err != nil {
		return nil, err
	}
	info := m.Info()
	fmt.Fprintf(os.Stderr, "moonlm: loaded %s (%s, %d layers, dim %d, vocab %d) in %v, %d threads\n",
		info.Name, info.Arch, info.Layers, info.EmbeddingSize, info.VocabSize, time.Since(t0).Round(time.Millisecond), info.Threads)
	return m, nil
}

func (f *engineFlags) session(m *engine.Model) (*engine.Session, error) {
	return m.NewSession(engine.SessionParams{NCtx: f.ctx, KVF32: f.kvF32})
}

// samplerFlags are the sampling options, with llama.cpp's defaults.
type samplerFlags struct {
	temp, topP, minP, repeat float32
	topK, repeatN            int
	seed                     int64
}

func (f *samplerFlags) register(fs *flag.FlagSet) {
	float32Var(fs, &f.temp, "temp", 0.8, "sampling temperature (0 = greedy)")
	fs.IntVar(&f.topK, "top-k", 40, "keep the K most likely tokens (0 = off)")
	float32Var(fs, &f.topP, "top-p", 0.95, "nucleus sampling threshold (1 = off)")
	float32Var(fs, &f.minP, "min-p", 0.05, "drop tokens below this fraction of the best (0 = off)")
	float32Var(fs, &f.repeat, "repeat-penalty", 1.0, "repetition penalty (1 = off)")
	fs.IntVar(&f.repeatN, "repeat-last-n", 64, "tokens the repetition penalty looks back")
	fs.Int64Var(&f.seed, "seed", -1, "random seed (-1 = from the clock)")
}

func (f *samplerFlags) params() sample.Params {
	seed := uint64(f.seed)
	if f.seed < 0 {
		seed = uint64(time.Now().UnixNano())
	}
	p := sample.Params{
		Temperature: f.temp, TopK: f.topK, TopP: f.topP, MinP: f.minP,
		RepeatPenalty: f.repeat, Seed: seed,
	}
	if f.repeat != 1 && f.repeat != 0 {
		p.PenaltyLastN = f.repeatN
	}
	return p
}

type float32Value struct{ p *float32 }

func (v float32Value) String() string {
	if v.p == nil {
		return "0"
	}
	return fmt.Sprint(*v.p)
}

func (v float32Value) Set(s string) error {
	var x float64
	if _, err := fmt.Sscan(s, &x); err != nil {
		return fmt.Errorf("not a number: %q", s)
	}
	*v.p = float32(x)
	return nil
}

func float32Var(fs *flag.FlagSet, p *float32, name string, def float32, usage string) {
	*p = def
	fs.Var(float32Value{p}, name, usage)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	_ = usage
	return fs
}

// parseFlags parses args, printing usage and the flags for -h.
func parseFlags(fs *flag.FlagSet, usage string, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fmt.Fprintln(os.Stderr, usage)
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
			return true, nil
		}
		return false, fmt.Errorf("%v\n%s", err, usage)
	}
	return false, nil
}

// printTimings reports a generation's speed on stderr, as llama.cpp does.
func printTimings(st engine.GenerateStats) {
	pp := st.PromptDuration.Seconds()
	tg := st.DecodeDuration.Seconds()
	fmt.Fprintf(os.Stderr, "\nmoonlm: prompt %d tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s (%.1f tok/s), stop: %s\n",
		st.PromptTokens, pp, rate(st.PromptTokens, pp), st.Tokens, tg, rate(st.Tokens, tg), st.Reason)
}

func rate(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
