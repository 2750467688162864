package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/gguf"
)

// engineFlags are the options generate, chat and perplexity share. The flag
// package accepts both -name and --name; an alias registered with no usage
// text shares its partner's help line.
type engineFlags struct {
	model   string
	threads int
	ctx     int
	kvF32   bool
	kvType  gguf.Type
	pack    string
	cache   string
}

func (f *engineFlags) register(fs *flag.FlagSet, defCtx int) {
	fs.StringVar(&f.model, "m", "", "GGUF model `file`")
	fs.StringVar(&f.model, "model", "", "")
	fs.IntVar(&f.threads, "t", 0, "worker `threads` (0 = all cores)")
	fs.IntVar(&f.threads, "threads", 0, "")
	fs.IntVar(&f.ctx, "c", defCtx, "context size in `tokens` (0 = the model's)")
	fs.IntVar(&f.ctx, "ctx-size", defCtx, "")
	fs.BoolVar(&f.kvF32, "kv-f32", false, "keep the KV cache in f32 instead of f16")
	fs.Func("cache-type", "KV cache `type`: f16 (default), f32 or q8_0 (q8_0 halves the cache's memory, as llama.cpp's q8_0 cache types)", func(v string) error {
		return setKVType(v, &f.kvType, &f.kvF32)
	})
	fs.StringVar(&f.pack, "pack", "auto", "repack weights for faster kernels (`mode`: auto follows MOONLM_PACK, on, off)")
	fs.StringVar(&f.cache, "packed-cache", "auto", "keep packed weights in the on-disk cache (`mode`: auto follows MOONLM_PACKED_CACHE, on, off)")
}

// modelParams turns the flags into engine.ModelParams.
func (f *engineFlags) modelParams() (engine.ModelParams, error) {
	p := engine.ModelParams{Threads: f.threads}
	if f.threads < 0 {
		return p, fmt.Errorf("-t %d: want 0 (all cores) or more", f.threads)
	}
	if f.ctx < 0 {
		return p, fmt.Errorf("-c %d: want 0 (the model's context) or more", f.ctx)
	}
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
	var bar *loadBar
	if isTerminal(os.Stderr) { // a bar for opens over a second
		bar = newLoadBar(os.Stderr, time.Now)
		p.Progress = bar.update
	}
	m, err := engine.Open(f.model, p)
	if bar != nil {
		bar.done() // before the "loaded" line or the error
	}
	if err != nil {
		return nil, err
	}
	info := m.Info()
	fmt.Fprintf(os.Stderr, "moonlm: loaded %s (%s, %d layers, dim %d, vocab %d) in %v, %d threads\n",
		info.Name, info.Arch, info.Layers, info.EmbeddingSize, info.VocabSize, time.Since(t0).Round(time.Millisecond), info.Threads)
	return m, nil
}

func (f *engineFlags) session(m *engine.Model) (*engine.Session, error) {
	return m.NewSession(f.sessionParams(f.ctx))
}

// sessionParams are the session settings the flags give, for a context of
// nCtx tokens.
func (f *engineFlags) sessionParams(nCtx int) engine.SessionParams {
	return engine.SessionParams{NCtx: nCtx, KVF32: f.kvF32, KVType: f.kvType}
}

// setKVType reads a KV cache type name into the engine's two settings:
// an F32 cache is asked for with f32 (gguf.F32 is the type's zero value,
// which the engine reads as its default, f16).
func setKVType(v string, typ *gguf.Type, f32 *bool) error {
	switch strings.ToLower(v) {
	case "f16":
		*typ, *f32 = gguf.F16, false
	case "f32":
		*typ, *f32 = gguf.F16, true
	case "q8_0":
		*typ, *f32 = gguf.Q8_0, false
	default:
		return errors.New("want f16, f32 or q8_0")
	}
	return nil
}

// samplerFlags are the sampling options, with llama.cpp's defaults.
type samplerFlags struct {
	temp, topP, minP, repeat float32
	topK, repeatN            int
	seed                     int64
}

func (f *samplerFlags) register(fs *flag.FlagSet) {
	float32Var(fs, &f.temp, "temp", 0.8, "sampling temperature `T` (0 = greedy)")
	fs.IntVar(&f.topK, "top-k", 40, "keep the `K` most likely tokens (0 = off)")
	float32Var(fs, &f.topP, "top-p", 0.95, "nucleus sampling threshold `P` (1 = off)")
	float32Var(fs, &f.minP, "min-p", 0.05, "drop tokens below `P` times the best one's probability (0 = off)")
	float32Var(fs, &f.repeat, "repeat-penalty", 1.0, "repetition penalty `R` (1 = off)")
	fs.IntVar(&f.repeatN, "repeat-last-n", 64, "`tokens` the repetition penalty looks back")
	fs.Int64Var(&f.seed, "seed", -1, "random seed `S` (-1 = from the clock)")
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

// float32Value is a float32 flag (a pointer, so help can tell aliases).
type float32Value float32

func (v *float32Value) String() string {
	if v == nil {
		return "0"
	}
	return strconv.FormatFloat(float64(*v), 'g', -1, 32)
}

func (v *float32Value) Set(s string) error {
	x, err := strconv.ParseFloat(s, 32)
	if err != nil || math.IsNaN(x) {
		return errors.New("not a number")
	}
	*v = float32Value(x)
	return nil
}

func float32Var(fs *flag.FlagSet, p *float32, name string, def float32, usage string) {
	*p = def
	fs.Var((*float32Value)(p), name, usage)
}

// printTimings reports a generation's speed on stderr, as llama.cpp does;
// see timingLine.
func printTimings(st engine.GenerateResult, err error) {
	if line := timingLine(st, err); line != "" {
		fmt.Fprint(os.Stderr, line)
	}
}

// timingLine is the timings report of a Generate call that returned st and
// err: nothing when the call failed before its prompt was evaluated (the
// error says it all, and st's stop reason means nothing), else the speeds
// and why it stopped ("cancelled" or "error" when err says so).
func timingLine(st engine.GenerateResult, err error) string {
	if err != nil && st.PromptTokens == 0 {
		return ""
	}
	reason := st.Finish.String()
	switch {
	case errors.Is(err, engine.ErrCancelled):
		reason = "cancelled"
	case err != nil:
		reason = "error"
	}
	pp := st.PromptDuration.Seconds()
	tg := st.DecodeDuration.Seconds()
	return fmt.Sprintf("\nmoonlm: prompt %d tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s (%.1f tok/s), stop: %s\n",
		st.PromptTokens, pp, rate(st.PromptTokens, pp), st.Tokens, tg, rate(st.Tokens, tg), reason)
}

func rate(n int, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}
