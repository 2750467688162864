package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure open, prefill, decode, memory and allocations (-m FILE [-t N] [-p 512] [-n 128] [-d 0] [-r 5] [--pg P,N] [--json])",
		run:     runBench,
	})
}

const benchUsage = `usage: moonlm bench -m FILE [-t THREADS] [-p 512] [-n 128] [-d DEPTH] [-r 5] [--pg P,N] [--json]
       [--sequences N] [--membw] [--no-warmup] [--cpuprofile FILE] [--memprofile FILE]
       [--pack auto|on|off] [--cache cold|warm|off[,...]]

Measures, each phase on its own: opening the model (mapping, parse of the
metadata and tensor table, model build), prefill of a P-token prompt from an
empty context (tokens/s and time to first token), decode of N tokens from an
empty context one at a time without sampling (as llama-bench's tg), and with
--pg P,N a P-token prefill followed by N decoded tokens. Results are medians
over -r rounds, after one warm-up round. -p 0 or -n 0 skips that phase.
-d D measures every phase at depth D, as llama-bench's -d: the context
already holds D tokens (prefilled once, untimed) before each prefill and
decode.

--sequences N replaces the prefill and decode phases: N sequences are each
prefilled with -p tokens and then decode -n tokens each, all in shared
batched steps (one forward pass advances every sequence, as
llama-batched-bench measures); it reports the aggregate prefill and decode
tokens/s and the per-sequence latency (the time between two tokens of one
sequence, mean, median and 99th percentile).

Open reports the repacking of weights (--pack; auto follows MOONLM_PACK)
and where the packed weights came from. --cache measures the open with the
packed-weight cache in each listed state: cold (a fresh temporary cache),
warm (a temporary cache filled by one open first) and off; the rest of the
run then uses the last listed state. Without --cache the environment's
cache settings apply.
`

// benchConfig is what one bench run measures.
type benchConfig struct {
	Path     string
	Threads  int
	Prompt   int // -p
	Gen      int // -n
	Rounds   int // -r
	PGPrompt int // --pg P,N; 0 when not requested
	PGGen    int
	Depth    int // -d: tokens already in the context before each phase
	Warmup   bool
	MemBW    bool // also measure plain memory read bandwidth
	Profile  io.Writer
	Pack     engine.PackMode
	Cache    []string // --cache states to measure the open in; the last one is used for the run
	// Sequences, when > 0, replaces the prefill and decode phases by N
	// sequences prefilled and decoded together (--sequences).
	Sequences int
	// KVType and KVF32 are the KV cache type (--cache-type), as
	// engine.SessionParams takes it.
	KVType gguf.Type
	KVF32  bool
}

// benchOpen is the open phase, each step timed on its own.
type benchOpen struct {
	MapMS           float64 `json:"map_ms"`   // open(2), fstat, mmap (engine.Open)
	ParseMS         float64 `json:"parse_ms"` // header, metadata index and tensor table (one pass in gguf.Parse)
	BuildMS         float64 `json:"build_ms"` // config, tensor checks, norms, worker pool (the tokenizer builds alongside, until after the pack)
	PackMS          float64 `json:"pack_ms"`  // repacking weights, or mapping them from the cache
	PackSource      string  `json:"pack_source"`
	PackedBytes     int64   `json:"packed_bytes"`
	PackedMatrices  int     `json:"packed_matrices"`
	SessionMS       float64 `json:"session_ms"`
	RSSAfterOpen    int64   `json:"rss_after_open_bytes"`
	RSSAfterSession int64   `json:"rss_after_session_bytes"`
}

// benchResult is the report; its JSON form is the --json output.
type benchResult struct {
	File      string `json:"file"`
	FileBytes int64  `json:"file_bytes"`
	Arch      string `json:"arch"`
	Name      string `json:"name"`
	// WeightBytesPerToken is what one decoded token reads of the weights:
	// every tensor except an untied token_embd, of which one row is read.
	WeightBytesPerToken int64  `json:"weight_bytes_per_token"`
	Kernels             string `json:"kernels"`
	Threads             int    `json:"threads"`
	GOMAXPROCS          int    `json:"gomaxprocs"`
	Rounds              int    `json:"rounds"`

	OpenMS     float64   `json:"open_ms"`
	OpenPackMS float64   `json:"open_pack_ms"`
	PackSource string    `json:"pack_source"` // engine.PackSource*: cache-hit, packed, packed+cache-write, off, none
	Open       benchOpen `json:"open"`
	// OpenCache is the open measured in each --cache state.
	OpenCache []benchCacheOpen `json:"open_cache,omitempty"`

	PromptTokens int       `json:"prompt_tokens"`
	PrefillTokS  float64   `json:"prefill_tok_s"`
	TTFTMS       float64   `json:"ttft_ms"`
	PrefillAll   []float64 `json:"prefill_tok_s_rounds,omitempty"`

	// Depth is -d: the tokens in the context before each phase, and
	// DepthFillMS the untimed-for-the-phases prefill that put them there.
	Depth       int     `json:"depth,omitempty"`
	DepthFillMS float64 `json:"depth_fill_ms,omitempty"`

	GenTokens  int       `json:"gen_tokens"`
	DecodeTokS float64   `json:"decode_tok_s"`
	DecodeAll  []float64 `json:"decode_tok_s_rounds,omitempty"`
	// DecodeWeightGBs is weight bytes read per second while decoding.
	DecodeWeightGBs float64 `json:"decode_weight_gb_s"`

	PGPrompt       int     `json:"pg_prompt_tokens,omitempty"`
	PGGen          int     `json:"pg_gen_tokens,omitempty"`
	PGTokS         float64 `json:"pg_tok_s,omitempty"`        // (P+N)/total, as llama-bench's pg
	PGDecodeTokS   float64 `json:"pg_decode_tok_s,omitempty"` // the N tokens after the prefill
	OpenToFirstTok float64 `json:"open_to_first_token_ms,omitempty"`

	KVBytes        int64   `json:"kv_bytes"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
	AllocsPerToken float64 `json:"allocs_per_token"`

	// Batched is the --sequences phase.
	Batched *benchSeqResult `json:"batched,omitempty"`
	// AggregateDecodeTokS and SequenceTokenMS repeat Batched's headline
	// figures at the top level.
	AggregateDecodeTokS float64 `json:"aggregate_decode_tok_s,omitempty"`
	SequenceTokenMS     float64 `json:"per_sequence_latency_ms,omitempty"`

	MemReadGBs   float64 `json:"mem_read_gb_s,omitempty"`
	BandwidthUse float64 `json:"bandwidth_ratio,omitempty"` // decode_weight_gb_s / mem_read_gb_s
}

// benchCacheOpen is one open of the model in a --cache state.
type benchCacheOpen struct {
	Cache        string  `json:"cache"` // cold, warm or off
	OpenMS       float64 `json:"open_ms"`
	PackMS       float64 `json:"open_pack_ms"`
	PackSource   string  `json:"pack_source"`
	RSSAfterOpen int64   `json:"rss_after_open_bytes"`
	// OpenToFirstTokMS is measured end to end: open, a new session and the
	// logits of a firstTokenPrompt-token prompt (which waits for anything
	// the open left to the background, such as verifying a cache entry).
	OpenToFirstTokMS float64 `json:"open_to_first_token_ms"`
	// CloseMS includes waiting for the background publish of a cold open.
	CloseMS float64 `json:"close_ms"`
}

// firstTokenPrompt is the prompt length of the end-to-end open to first
// token: a short chat turn.
const firstTokenPrompt = 16

// benchCacheParams returns the cache parameters of a --cache state, with a
// fresh temporary cache folder for cold and warm (cleanup removes it).
func benchCacheParams(state string) (p engine.PackedCacheParams, cleanup func(), err error) {
	switch state {
	case "off":
		return engine.PackedCacheParams{Mode: engine.CacheOff}, func() {}, nil
	case "cold", "warm":
		dir, err := os.MkdirTemp("", "moonlm-bench-cache-")
		if err != nil {
			return p, nil, fmt.Errorf("bench: --cache %s: %w", state, err)
		}
		return engine.PackedCacheParams{Mode: engine.CacheOn, Dir: dir}, func() { os.RemoveAll(dir) }, nil
	}
	return p, nil, fmt.Errorf("bench: --cache %q: want cold, warm or off", state)
}

// parsePackMode parses --pack.
func parsePackMode(s string) (engine.PackMode, error) {
	switch s {
	case "auto", "":
		return engine.PackDefault, nil
	case "on":
		return engine.PackOn, nil
	case "off":
		return engine.PackOff, nil
	}
	return 0, fmt.Errorf("--pack %q: want auto, on or off", s)
}

// benchOpenIn measures one open (and close) of the model in a cache state;
// warm opens once beforehand to fill the cache.
func benchOpenIn(cfg benchConfig, state string) (benchCacheOpen, error) {
	r := benchCacheOpen{Cache: state}
	cp, cleanup, err := benchCacheParams(state)
	if err != nil {
		return r, err
	}
	defer cleanup()
	p, err := withEnv(engine.ModelParams{Threads: cfg.Threads, Pack: cfg.Pack, PackedCache: cp})
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	if state == "warm" {
		m, err := engine.Open(cfg.Path, p)
		if err != nil {
			return r, fmt.Errorf("bench: filling the cache: %w", err)
		}
		if err := m.Close(); err != nil {
			return r, fmt.Errorf("bench: filling the cache: %w", err)
		}
	}
	debug.FreeOSMemory() // RSS after open should not count earlier opens' garbage
	t0 := time.Now()
	m, err := engine.Open(cfg.Path, p)
	if err != nil {
		return r, fmt.Errorf("bench: open (cache %s): %w", state, err)
	}
	r.OpenMS = msSince(t0)
	r.RSSAfterOpen = procStatus("VmRSS")
	st := m.OpenStats()
	r.PackMS, r.PackSource = st.PackMs, st.PackSource
	if err := firstToken(m); err != nil {
		m.Close()
		return r, fmt.Errorf("bench: first token (cache %s): %w", state, err)
	}
	r.OpenToFirstTokMS = msSince(t0)
	t1 := time.Now()
	if err := m.Close(); err != nil {
		return r, fmt.Errorf("bench: close (cache %s): %w", state, err)
	}
	r.CloseMS = msSince(t1)
	return r, nil
}

// firstToken computes the logits of a firstTokenPrompt-token prompt (BOS
// and random tokens) in a new session.
func firstToken(m *engine.Model) error {
	info := m.Info()
	s, err := m.NewSession(engine.SessionParams{NCtx: firstTokenPrompt})
	if err != nil {
		return err
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	prompt := make([]int32, firstTokenPrompt)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(info.VocabSize))
	}
	if info.BOS >= 0 {
		prompt[0] = info.BOS
	}
	return s.Prefill(prompt, make([]float32, info.VocabSize))
}

func runBench(args []string) error {
	fs := newFlagSet("bench")
	var cfg benchConfig
	var pg, profile, memProfile, pack, cache string
	var asJSON, noWarmup bool
	fs.StringVar(&cfg.Path, "m", "", "model `file`")
	fs.IntVar(&cfg.Threads, "t", runtime.NumCPU(), "`threads`")
	fs.IntVar(&cfg.Prompt, "p", 512, "prompt `tokens` for prefill (0 skips)")
	fs.IntVar(&cfg.Gen, "n", 128, "`tokens` to decode (0 skips)")
	fs.IntVar(&cfg.Rounds, "r", 5, "`rounds` (medians are reported)")
	fs.StringVar(&pg, "pg", "", "`P,N`: prefill P tokens, then decode N")
	fs.IntVar(&cfg.Depth, "d", 0, "context `depth`: tokens in the context before each phase")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.BoolVar(&noWarmup, "no-warmup", false, "skip the warm-up round")
	fs.BoolVar(&cfg.MemBW, "membw", false, "also measure plain memory read bandwidth")
	fs.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the measured rounds to `file`")
	fs.StringVar(&memProfile, "memprofile", "", "record every allocation and write the profile to `file` (finds what allocates per token)")
	fs.StringVar(&pack, "pack", "auto", "repack weights at open (`mode`: auto follows MOONLM_PACK, on, off)")
	fs.StringVar(&cache, "cache", "", "packed-weight cache `states` to measure the open in: cold, warm, off (comma-separated)")
	fs.Func("cache-type", "KV cache `type`: f16 (default), f32 or q8_0", func(v string) error {
		return setKVType(v, &cfg.KVType, &cfg.KVF32)
	})
	fs.IntVar(&cfg.Sequences, "sequences", 0, "`N` sequences prefilled with -p tokens each and decoding -n tokens each in shared batched steps, instead of the single-sequence phases")
	if help, err := parseFlags(fs, benchUsage, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr(benchUsage, "unexpected argument %q", fs.Arg(0))
	}
	if cfg.Path == "" {
		return usageErr(benchUsage, "no model: -m FILE is required")
	}
	if pg != "" {
		p, n, ok := strings.Cut(pg, ",")
		var err1, err2 error
		cfg.PGPrompt, err1 = strconv.Atoi(strings.TrimSpace(p))
		cfg.PGGen, err2 = strconv.Atoi(strings.TrimSpace(n))
		if !ok || err1 != nil || err2 != nil || cfg.PGPrompt < 1 || cfg.PGGen < 1 {
			return fmt.Errorf("--pg %q: want P,N with both positive", pg)
		}
	}
	cfg.Warmup = !noWarmup
	var err error
	if cfg.Pack, err = parsePackMode(pack); err != nil {
		return err
	}
	if cache != "" {
		for _, c := range strings.Split(cache, ",") {
			c = strings.TrimSpace(c)
			if c != "cold" && c != "warm" && c != "off" {
				return fmt.Errorf("--cache %q: want cold, warm or off (comma-separated)", c)
			}
			cfg.Cache = append(cfg.Cache, c)
		}
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		cfg.Profile = f
	}
	if memProfile != "" {
		runtime.MemProfileRate = 1
	}
	res, err := benchRun(cfg)
	if err != nil {
		return err
	}
	if memProfile != "" {
		f, err := os.Create(memProfile)
		if err != nil {
			return fmt.Errorf("memory profile: %w", err)
		}
		defer f.Close()
		runtime.GC() // the profile shows allocations up to the last collection
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return fmt.Errorf("memory profile: %w", err)
		}
	}
	if asJSON {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("bench: json: %w", err)
		}
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	res.writeText(os.Stdout)
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Nanoseconds()) / 1e6 }

// benchRun opens the model and measures every phase cfg asks for.
func benchRun(cfg benchConfig) (*benchResult, error) {
	if cfg.Rounds < 1 || cfg.Prompt < 0 || cfg.Gen < 0 || cfg.Threads < 1 || cfg.Depth < 0 {
		return nil, fmt.Errorf("bench: need -r >= 1, -t >= 1, -p >= 0, -n >= 0, -d >= 0 (have %d, %d, %d, %d, %d)", cfg.Rounds, cfg.Threads, cfg.Prompt, cfg.Gen, cfg.Depth)
	}
	params, err := withEnv(engine.ModelParams{Threads: cfg.Threads, Pack: cfg.Pack})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	res := &benchResult{File: cfg.Path, Kernels: params.Kernels.Name(), Threads: cfg.Threads,
		GOMAXPROCS: runtime.GOMAXPROCS(0), Rounds: cfg.Rounds}

	if len(cfg.Cache) > 0 {
		for _, state := range cfg.Cache {
			r, err := benchOpenIn(cfg, state)
			if err != nil {
				return nil, err
			}
			res.OpenCache = append(res.OpenCache, r)
		}
		// The run itself opens in the last state.
		last := cfg.Cache[len(cfg.Cache)-1]
		cp, cleanup, err := benchCacheParams(last)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		params.PackedCache = cp
		if params, err = withEnv(params); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if last == "warm" {
			m, err := engine.Open(cfg.Path, params)
			if err != nil {
				return nil, fmt.Errorf("bench: filling the cache: %w", err)
			}
			if err := m.Close(); err != nil {
				return nil, fmt.Errorf("bench: filling the cache: %w", err)
			}
		}
		// RSS after open and the peak should describe the run, not the
		// opens above.
		debug.FreeOSMemory()
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	}

	t0 := time.Now()
	m, err := engine.Open(cfg.Path, params)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer m.Close()
	res.OpenMS = msSince(t0)
	res.Open.RSSAfterOpen = procStatus("VmRSS")
	st := m.OpenStats()
	res.Open.MapMS, res.Open.ParseMS, res.Open.BuildMS, res.Open.PackMS = st.MapMs, st.ParseMs, st.TensorsMs, st.PackMs
	res.Open.PackSource, res.Open.PackedBytes, res.Open.PackedMatrices = st.PackSource, st.PackedBytes, st.PackedMatrices
	res.OpenPackMS, res.PackSource = st.PackMs, st.PackSource
	f := m.File()
	res.FileBytes = f.Size()
	res.WeightBytesPerToken = decodeWeightBytes(f)
	info := m.Info()
	res.Arch, res.Name = info.Arch, info.Name

	if cfg.Sequences > 0 {
		if cfg.Sequences > 4096 {
			return nil, fmt.Errorf("bench: --sequences %d: at most 4096", cfg.Sequences)
		}
		br, err := benchSequences(m, cfg, cfg.Sequences)
		if err != nil {
			return nil, err
		}
		res.Batched = br
		res.AggregateDecodeTokS, res.SequenceTokenMS = br.AggregateDecodeTokS, br.SequenceTokenMS
		res.PeakRSS = procStatus("VmHWM")
		return res, nil
	}
	nCtx := cfg.Depth + max(cfg.Prompt, cfg.Gen+1, cfg.PGPrompt+cfg.PGGen, 1)
	t3 := time.Now()
	s, err := m.NewSession(engine.SessionParams{NCtx: nCtx, KVType: cfg.KVType, KVF32: cfg.KVF32})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer s.Close()
	res.Open.SessionMS = msSince(t3)
	res.Open.RSSAfterSession = procStatus("VmRSS")
	// f16 keys and values for every layer and position.
	res.KVBytes = int64(2*2*info.Layers*info.KVHeads*info.HeadDim) * int64(nCtx)

	logits := make([]float32, info.VocabSize)
	// Random prompt tokens after BOS, as llama-bench does.
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]int32, max(cfg.Prompt, cfg.PGPrompt, cfg.Depth, 1))
	for i := range prompt {
		prompt[i] = int32(rng.IntN(info.VocabSize))
	}
	if info.BOS >= 0 {
		prompt[0] = info.BOS
	}
	gen := make([]int32, max(cfg.Gen, cfg.PGGen)+1)
	for i := range gen {
		gen[i] = int32(rng.IntN(info.VocabSize))
	}

	prefill := func(n int) (float64, error) {
		if err := s.Rewind(cfg.Depth); err != nil {
			return 0, err
		}
		t := time.Now()
		if err := s.Prefill(prompt[:n], logits); err != nil {
			return 0, err
		}
		return time.Since(t).Seconds(), nil
	}
	// decode feeds n tokens one at a time; no sampling, as llama-bench tg.
	decode := func(n int) (float64, error) {
		t := time.Now()
		for i := 0; i < n; i++ {
			if err := s.Decode(gen[i], logits); err != nil {
				return 0, err
			}
		}
		return time.Since(t).Seconds(), nil
	}

	if cfg.Depth > 0 {
		// The context every phase starts from; each phase rewinds to it.
		t := time.Now()
		if err := s.Prefill(prompt[:cfg.Depth], logits); err != nil {
			return nil, fmt.Errorf("bench: filling the context to depth %d: %w", cfg.Depth, err)
		}
		res.Depth, res.DepthFillMS = cfg.Depth, msSince(t)
	}
	if cfg.Warmup {
		// One short pass of each kind so the first measured round does not
		// pay page faults of the mapping and the cache's first growth.
		if cfg.Prompt > 0 || cfg.PGPrompt > 0 {
			if _, err := prefill(min(max(cfg.Prompt, cfg.PGPrompt), len(prompt))); err != nil {
				return nil, fmt.Errorf("bench: warm-up prefill: %w", err)
			}
		}
		if err := s.Rewind(cfg.Depth); err != nil {
			return nil, fmt.Errorf("bench: rewind: %w", err)
		}
		if _, err := decode(min(max(cfg.Gen, cfg.PGGen), 8)); err != nil {
			return nil, fmt.Errorf("bench: warm-up decode: %w", err)
		}
	}
	if cfg.Warmup {
		// The measured rounds should not share the process with the
		// background publish of a cold open (or a cache entry's
		// verification): their allocations would count as the decode's.
		if err := m.WaitPacked(); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if cfg.Profile != nil {
		if err := pprof.StartCPUProfile(cfg.Profile); err != nil {
			return nil, fmt.Errorf("bench: cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}

	var ttft, pgRate, pgDec []float64
	heapAllocObjects()
	var allocs, allocTokens uint64
	for r := 0; r < cfg.Rounds; r++ {
		if cfg.Prompt > 0 {
			secs, err := prefill(cfg.Prompt)
			if err != nil {
				return nil, fmt.Errorf("bench: prefill round %d: %w", r, err)
			}
			ttft = append(ttft, secs*1e3)
			res.PrefillAll = append(res.PrefillAll, float64(cfg.Prompt)/secs)
		}
		if cfg.Gen > 0 {
			if err := s.Rewind(cfg.Depth); err != nil {
				return nil, fmt.Errorf("bench: rewind: %w", err)
			}
			// The first token grows nothing after warm-up; allocations are
			// counted over the whole run of tokens.
			a0 := heapAllocObjects()
			secs, err := decode(cfg.Gen)
			if err != nil {
				return nil, fmt.Errorf("bench: decode round %d: %w", r, err)
			}
			if cfg.Warmup || r > 0 {
				allocs += heapAllocObjects() - a0
				allocTokens += uint64(cfg.Gen)
			}
			res.DecodeAll = append(res.DecodeAll, float64(cfg.Gen)/secs)
		}
		if cfg.PGPrompt > 0 {
			ps, err := prefill(cfg.PGPrompt)
			if err != nil {
				return nil, fmt.Errorf("bench: pg prefill round %d: %w", r, err)
			}
			ds, err := decode(cfg.PGGen)
			if err != nil {
				return nil, fmt.Errorf("bench: pg decode round %d: %w", r, err)
			}
			pgRate = append(pgRate, float64(cfg.PGPrompt+cfg.PGGen)/(ps+ds))
			pgDec = append(pgDec, float64(cfg.PGGen)/ds)
		}
	}
	if cfg.Profile != nil {
		pprof.StopCPUProfile()
	}
	res.PromptTokens, res.GenTokens = cfg.Prompt, cfg.Gen
	res.PrefillTokS, res.TTFTMS = median(res.PrefillAll), median(ttft)
	res.DecodeTokS = median(res.DecodeAll)
	res.DecodeWeightGBs = res.DecodeTokS * float64(res.WeightBytesPerToken) / 1e9
	if cfg.PGPrompt > 0 {
		res.PGPrompt, res.PGGen = cfg.PGPrompt, cfg.PGGen
		res.PGTokS, res.PGDecodeTokS = median(pgRate), median(pgDec)
	}
	if cfg.Prompt > 0 && cfg.Depth == 0 {
		res.OpenToFirstTok = res.OpenMS + res.Open.SessionMS + res.TTFTMS
	}
	if allocTokens > 0 {
		res.AllocsPerToken = float64(allocs) / float64(allocTokens)
	}
	res.PeakRSS = procStatus("VmHWM")
	if cfg.MemBW {
		res.MemReadGBs = memReadGBs(cfg.Threads)
		if res.MemReadGBs > 0 {
			res.BandwidthUse = res.DecodeWeightGBs / res.MemReadGBs
		}
	}
	return res, nil
}

// decodeWeightBytes is the weight bytes one decoded token reads: all tensor
// data, except that an untied token_embd is only looked up (one row) and
// that a mixture of experts' per-expert tensors (the last dimension of
// which counts the experts, as ffn_*_exps) count only the used experts'
// share.
func decodeWeightBytes(f *gguf.File) int64 {
	var n int64
	_, hasOutput := f.Tensor("output.weight")
	experts, used := moeCounts(f)
	for _, t := range f.Tensors() {
		if t.Name == "token_embd.weight" && hasOutput {
			if rows := t.Rows(); rows > 0 {
				n += t.Size() / rows
			}
			continue
		}
		if experts > 1 && len(t.Shape) >= 2 && t.Shape[len(t.Shape)-1] == experts && strings.Contains(t.Name, "_exps") {
			n += t.Size() / experts * used
			continue
		}
		n += t.Size()
	}
	return n
}

// moeCounts is the file's experts per layer and per token (0, 0 for a
// model without experts or with counts out of range).
func moeCounts(f *gguf.File) (experts, used int64) {
	arch := ""
	if v, ok := f.Lookup("general.architecture"); ok {
		arch, _ = v.String()
	}
	get := func(k string) int64 {
		v, ok := f.Lookup(arch + "." + k)
		if !ok {
			return 0
		}
		x, err := v.Int64()
		if err != nil {
			return 0
		}
		return x
	}
	experts, used = get("expert_count"), get("expert_used_count")
	if experts <= 1 || used <= 0 || used > experts || experts > 1<<16 {
		return 0, 0
	}
	return experts, used
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// allocSample is reused so that reading the counter allocates nothing
// itself (the first metrics.Read initializes the runtime's tables, which
// allocates: benchRun reads once before measuring).
var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}

// heapAllocObjects is the cumulative count of heap objects allocated. Not
// safe for concurrent use.
func heapAllocObjects() uint64 {
	metrics.Read(allocSample)
	if allocSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return allocSample[0].Value.Uint64()
}

// procStatus reads a memory field (in kB) of /proc/self/status as bytes, or
// -1 where there is no such file (not Linux).
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return -1
		}
		return kb << 10
	}
	return -1
}

// memReadGBs is a plain memory read benchmark: threads goroutines each sum
// the squares of a disjoint part of a 512 MiB float32 buffer with the
// detected kernel set's Dot(a, a) (the SIMD dot product; both operands are
// the same address, so memory sees one stream); the best of five passes, in
// GB/s. It is the bandwidth a weight-streaming decode can hope for.
func memReadGBs(threads int) float64 {
	const size = 512 << 20
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = 1
	}
	best := 0.0
	sums := make([]float32, threads)
	part := len(buf) / threads
	for pass := 0; pass < 5; pass++ {
		var wg sync.WaitGroup
		t := time.Now()
		for w := 0; w < threads; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				sums[w] = kernels.Detect().Dot(buf[w*part:(w+1)*part], buf[w*part:(w+1)*part])
			}(w)
		}
		wg.Wait()
		best = max(best, float64(part*threads*4)/time.Since(t).Seconds()/1e9)
	}
	runtime.KeepAlive(sums)
	return best
}

func (r *benchResult) writeText(w io.Writer) {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintf(w, "model     %s (%s %q, %.1f MiB, %.1f MiB weights per token)\n", r.File, r.Arch, r.Name, mib(r.FileBytes), mib(r.WeightBytesPerToken))
	fmt.Fprintf(w, "kernels   %s, %d threads (GOMAXPROCS %d), medians of %d rounds\n", r.Kernels, r.Threads, r.GOMAXPROCS, r.Rounds)
	fmt.Fprintf(w, "open      %.1f ms (map %.2f, parse %.2f, build %.1f, pack %.1f; session %.1f); RSS after open %.1f MiB\n",
		r.OpenMS, r.Open.MapMS, r.Open.ParseMS, r.Open.BuildMS, r.Open.PackMS, r.Open.SessionMS, mib(r.Open.RSSAfterOpen))
	fmt.Fprintf(w, "packing   %s: %d matrices, %.1f MiB\n", r.PackSource, r.Open.PackedMatrices, mib(r.Open.PackedBytes))
	for _, c := range r.OpenCache {
		fmt.Fprintf(w, "open %-5s %.1f ms (pack %.1f, %s), to first token (%d-token prompt) %.1f ms, RSS after open %.1f MiB, close %.1f ms\n",
			c.Cache, c.OpenMS, c.PackMS, c.PackSource, firstTokenPrompt, c.OpenToFirstTokMS, mib(c.RSSAfterOpen), c.CloseMS)
	}
	if r.Depth > 0 {
		fmt.Fprintf(w, "depth     %d tokens in the context before each phase (filled in %.0f ms)\n", r.Depth, r.DepthFillMS)
	}
	if b := r.Batched; b != nil {
		fmt.Fprintf(w, "batched   %d sequences: prefill %.2f tok/s aggregate, decode %.2f tok/s aggregate\n", b.Sequences, b.AggregatePrefillTokS, b.AggregateDecodeTokS)
		fmt.Fprintf(w, "latency   per sequence token %.2f ms mean, %.2f p50, %.2f p99; %.3f allocations per step\n", b.SequenceTokenMS, b.SequenceTokenP50MS, b.SequenceTokenP99MS, b.AllocsPerStep)
	}
	if r.PromptTokens > 0 {
		fmt.Fprintf(w, "pp%-6d  %.2f tok/s, time to first token %.1f ms (open to first token %.1f ms)\n", r.PromptTokens, r.PrefillTokS, r.TTFTMS, r.OpenToFirstTok)
	}
	if r.GenTokens > 0 {
		fmt.Fprintf(w, "tg%-6d  %.2f tok/s (%.2f GB/s of weights), %.3f allocations per token\n", r.GenTokens, r.DecodeTokS, r.DecodeWeightGBs, r.AllocsPerToken)
	}
	if r.PGPrompt > 0 {
		fmt.Fprintf(w, "pp%d+tg%d  %.2f tok/s (decode part %.2f tok/s)\n", r.PGPrompt, r.PGGen, r.PGTokS, r.PGDecodeTokS)
	}
	fmt.Fprintf(w, "memory    peak RSS %.1f MiB (file %.1f + KV %.1f MiB)\n", mib(r.PeakRSS), mib(r.FileBytes), mib(r.KVBytes))
	if r.MemReadGBs > 0 {
		fmt.Fprintf(w, "bandwidth plain read %.2f GB/s; decode reads weights at %.0f%% of it\n", r.MemReadGBs, 100*r.BandwidthUse)
	}
}
