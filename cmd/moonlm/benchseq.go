package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/moonlm/moonlm/engine"
)

// benchSeqResult is the --sequences phase: N sessions, each prefilled with
// the -p prompt and then decoding -n tokens, all in shared batched steps
// (engine.Batcher), as llama.cpp's llama-batched-bench measures.
type benchSeqResult struct {
	Sequences int `json:"sequences"`
	// AggregatePrefillTokS is every sequence's prompt tokens over the
	// prefill time (llama-batched-bench's S_PP).
	AggregatePrefillTokS float64 `json:"aggregate_prefill_tok_s"`
	// AggregateDecodeTokS is every sequence's decoded tokens over the
	// decode time (llama-batched-bench's S_TG).
	AggregateDecodeTokS float64 `json:"aggregate_decode_tok_s"`
	// SequenceTokenMS is the mean time between two tokens of one sequence
	// (one step); P50 and P99 are over the steps of every round.
	SequenceTokenMS    float64   `json:"per_sequence_latency_ms"`
	SequenceTokenP50MS float64   `json:"per_sequence_latency_p50_ms"`
	SequenceTokenP99MS float64   `json:"per_sequence_latency_p99_ms"`
	DecodeAll          []float64 `json:"aggregate_decode_tok_s_rounds,omitempty"`
	AllocsPerStep      float64   `json:"allocs_per_step"`
}

// benchSequences measures n sequences decoding together on m.
func benchSequences(m *engine.Model, cfg benchConfig, n int) (*benchSeqResult, error) {
	info := m.Info()
	nCtx := max(cfg.Prompt+cfg.Gen+1, 2)
	p := engine.SessionParams{NCtx: nCtx, KVType: cfg.KVType, KVF32: cfg.KVF32}
	b, err := m.NewBatcher(p)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer b.Close()
	if n > b.MaxTokens() {
		return nil, fmt.Errorf("bench: --sequences %d: a step holds at most %d tokens", n, b.MaxTokens())
	}
	sessions := make([]*engine.Session, n)
	logits := make([][]float32, n)
	for i := range sessions {
		if sessions[i], err = m.NewSession(p); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer sessions[i].Close()
		logits[i] = make([]float32, info.VocabSize)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	randToks := func(k int) []int32 {
		t := make([]int32, k)
		for i := range t {
			t[i] = int32(rng.IntN(info.VocabSize))
		}
		return t
	}
	prompts := make([][]int32, n)
	gens := make([][]int32, n)
	for i := range prompts {
		prompts[i] = randToks(max(cfg.Prompt, 1))
		if info.BOS >= 0 {
			prompts[i][0] = info.BOS
		}
		gens[i] = randToks(cfg.Gen)
	}
	entries := make([]engine.BatchEntry, n)
	step := func() error {
		if err := b.Step(entries); err != nil {
			return err
		}
		for i := range entries {
			if entries[i].Err != nil {
				return entries[i].Err
			}
		}
		return nil
	}
	// prefill evaluates every prompt, the steps shared: each sequence
	// takes an equal share of a step's tokens.
	chunk := max(1, b.MaxTokens()/n)
	prefill := func() (float64, error) {
		for _, s := range sessions {
			if err := s.Rewind(0); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		for done := 0; done < cfg.Prompt; {
			k := min(chunk, cfg.Prompt-done)
			for i := range entries {
				// The chunks of a prompt are one evaluation (a hybrid
				// model's checkpoint at its end only, as a Prefill).
				entries[i] = engine.BatchEntry{Session: sessions[i], Tokens: prompts[i][done : done+k], Continues: true}
				if done+k == cfg.Prompt {
					entries[i].Logits, entries[i].Continues = logits[i], false
				}
			}
			if err := step(); err != nil {
				return 0, err
			}
			done += k
		}
		return time.Since(t0).Seconds(), nil
	}
	var stepMS []float64
	decode := func(record bool) (float64, error) {
		for i := range entries {
			entries[i] = engine.BatchEntry{Session: sessions[i], Logits: logits[i]}
		}
		t0 := time.Now()
		for k := range cfg.Gen {
			for i := range entries {
				entries[i].Tokens = gens[i][k : k+1]
			}
			ts := time.Now()
			if err := step(); err != nil {
				return 0, err
			}
			if record {
				stepMS = append(stepMS, msSince(ts))
			}
		}
		return time.Since(t0).Seconds(), nil
	}
	res := &benchSeqResult{Sequences: n}
	if cfg.Warmup {
		if _, err := prefill(); err != nil {
			return nil, fmt.Errorf("bench: warm-up: %w", err)
		}
		if _, err := decode(false); err != nil {
			return nil, fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	stepMS = make([]float64, 0, cfg.Rounds*cfg.Gen)
	var pp []float64
	var allocs, steps uint64
	for r := 0; r < cfg.Rounds; r++ {
		if cfg.Prompt > 0 {
			secs, err := prefill()
			if err != nil {
				return nil, fmt.Errorf("bench: prefill round %d: %w", r, err)
			}
			pp = append(pp, float64(n*cfg.Prompt)/secs)
		}
		if cfg.Gen > 0 {
			a0 := heapAllocObjects()
			secs, err := decode(true)
			if err != nil {
				return nil, fmt.Errorf("bench: decode round %d: %w", r, err)
			}
			allocs += heapAllocObjects() - a0
			steps += uint64(cfg.Gen)
			res.DecodeAll = append(res.DecodeAll, float64(n*cfg.Gen)/secs)
		}
	}
	res.AggregatePrefillTokS = median(pp)
	res.AggregateDecodeTokS = median(res.DecodeAll)
	if len(stepMS) > 0 {
		var sum float64
		for _, v := range stepMS {
			sum += v
		}
		res.SequenceTokenMS = sum / float64(len(stepMS))
		slices.Sort(stepMS)
		res.SequenceTokenP50MS = stepMS[len(stepMS)/2]
		res.SequenceTokenP99MS = stepMS[min(len(stepMS)-1, len(stepMS)*99/100)]
	}
	if steps > 0 {
		res.AllocsPerStep = float64(allocs) / float64(steps)
	}
	return res, nil
}
