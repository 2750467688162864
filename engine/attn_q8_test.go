package engine

import (
	"fmt"
	"os"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKVQ8LlamaCppExact: in the llama.cpp numerics mode a Q8_0 KV cache
// reproduces llama.cpp run with the same cache (-ctk q8_0 -ctv q8_0, flash
// attention on) at every prompt position, with its default Walsh-Hadamard
// rotation and (kvq8-norot, made with LLAMA_ATTN_ROT_DISABLE=1) without.
// (All of the files' prompts, 158 positions, were measured exact.)
func TestKVQ8LlamaCppExact(t *testing.T) {
	if testing.Short() {
		t.Skip("the llama.cpp numerics mode's pure-Go kernels take a minute per model")
	}
	for _, tc := range []struct{ name, refs string }{
		{"smollm2", "testdata/smollm2-135m-q4_1"},
		{"gemma3", "testdata/gemma3-270m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := smolLM2Path(t)
			if tc.name == "gemma3" {
				path = gemma3Path(t)
			}
			m, err := Open(path, ModelParams{Kernels: testKernels(t), Numerics: NumericsLlamaCpp})
			require.NoError(t, err)
			defer m.Close()
			vocab := m.Info().VocabSize
			for _, rot := range []bool{true, false} {
				file := tc.refs + ".kvq8.ref.jsonl"
				if !rot {
					file = tc.refs + ".kvq8-norot.ref.jsonl"
				}
				if _, err := os.Stat(file); err != nil && !rot {
					t.Logf("no %s: the unrotated comparison is skipped", file)
					continue
				}
				testNoKVRotation = !rot
				worst := 0.0
				// Two prompts per file keep the test to a minute a model.
				for ci, rc := range loadRefs(t, file)[:2] {
					s, err := m.NewSession(SessionParams{NCtx: 512, KVType: gguf.Q8_0})
					require.NoError(t, err)
					all := make([]float32, len(rc.Tokens)*vocab)
					require.NoError(t, s.PrefillAll(rc.Tokens, all))
					s.Close()
					for i := range rc.Tokens {
						d := worstLogProbDiff(all[i*vocab:(i+1)*vocab], rc.PromptLogits[i])
						assert.LessOrEqual(t, d, 1e-4, "rotation %v, case %d %q, position %d", rot, ci, rc.Prompt, i)
						worst = max(worst, d)
					}
				}
				testNoKVRotation = false
				t.Logf("rotation %v: worst log-probability difference %.2g", rot, worst)
			}
		})
	}
}

// TestKVQ8Reference compares the fast mode's Q8_0 cache with llama.cpp's.
// A Q8_0 cache amplifies the fast kernels' rounding differences (a value
// that rounds to the next int8 step moves by up to 1/127 of its block's
// largest, where an f16 cache moves by one f16 unit), so the bounds are
// those of TestRealModelsReference loosened: the first position within
// 0.2, over all prompt positions our median difference at most 1.25 times
// llama.cpp's own spread between its F16 and Q8_0 caches, our largest at
// most 1.5 times its largest.
func TestKVQ8Reference(t *testing.T) {
	for _, tc := range []struct{ name, refs string }{
		{"smollm2", "testdata/smollm2-135m-q4_1"},
		{"gemma3", "testdata/gemma3-270m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := smolLM2Path(t)
			if tc.name == "gemma3" {
				path = gemma3Path(t)
			}
			ref16 := loadRefs(t, tc.refs+".ref.jsonl")
			refQ8 := loadRefs(t, tc.refs+".kvq8.ref.jsonl")
			require.Len(t, refQ8, len(ref16))
			m, err := Open(path, ModelParams{Kernels: testKernels(t)})
			require.NoError(t, err)
			defer m.Close()
			vocab := m.Info().VocabSize
			var theirs, ours []float64
			for ci, rc := range refQ8 {
				require.Equal(t, ref16[ci].Tokens, rc.Tokens)
				s, err := m.NewSession(SessionParams{NCtx: 512, KVType: gguf.Q8_0})
				require.NoError(t, err)
				all := make([]float32, len(rc.Tokens)*vocab)
				require.NoError(t, s.PrefillAll(rc.Tokens, all))
				s.Close()
				for i := range rc.Tokens {
					theirs = append(theirs, refSpread(ref16[ci].PromptLogits[i], rc.PromptLogits[i]))
					d := worstLogProbDiff(all[i*vocab:(i+1)*vocab], rc.PromptLogits[i])
					if i == 0 {
						assert.LessOrEqual(t, d, 0.2, "case %d %q: first position", ci, rc.Prompt)
					}
					ours = append(ours, d)
				}
			}
			o, l := summarize(ours), summarize(theirs)
			t.Logf("%d positions: ours vs llama.cpp q8_0 mean %.3f median %.3f max %.3f; llama.cpp f16 vs q8_0 mean %.3f median %.3f max %.3f",
				len(ours), o.mean, o.median, o.max, l.mean, l.median, l.max)
			assert.LessOrEqual(t, o.median, 1.25*l.median, "median")
			assert.LessOrEqual(t, o.max, 1.5*l.max, "max")
		})
	}
}

// TestKVQ8StateForkReuse: a Q8_0 cache forks, saves and restores bit for
// bit, and grows (past its first 512 positions) keeping what it holds.
func TestKVQ8StateForkReuse(t *testing.T) {
	m, err := Open(smolLM2Path(t), ModelParams{Kernels: testKernels(t)})
	require.NoError(t, err)
	defer m.Close()
	vocab := m.Info().VocabSize
	p := SessionParams{NCtx: 1024, KVType: gguf.Q8_0}
	toks := make([]int32, 520)
	for i := range toks {
		toks[i] = int32(100 + (i*37)%5000)
	}
	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, vocab)
	require.NoError(t, s.Prefill(toks[:300], nil))
	require.NoError(t, s.Prefill(toks[300:], logits)) // grows from 512 positions
	data, err := s.SaveState()
	require.NoError(t, err)
	assert.Equal(t, uint32(gguf.Q8_0), uint32(data[92]))
	f, err := s.Fork()
	require.NoError(t, err)
	defer f.Close()
	r, err := m.NewSession(p)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.LoadState(data))
	want := continueGreedy(t, s, logits, 4)
	sameBits(t, "fork", continueGreedy(t, f, logits, 4), want)
	sameBits(t, "restored", continueGreedy(t, r, logits, 4), want)

	// An f16 session refuses a q8_0 state.
	h, err := m.NewSession(SessionParams{NCtx: 1024})
	require.NoError(t, err)
	defer h.Close()
	assert.ErrorIs(t, h.LoadState(data), ErrInvalidArgument)
}

func TestKVQ8Refusals(t *testing.T) {
	m := openStories(t, 1) // head dimension 8
	_, err := m.NewSession(SessionParams{NCtx: 16, KVType: gguf.Q8_0})
	assert.ErrorIs(t, err, ErrUnsupported)
	_, err = m.NewSession(SessionParams{NCtx: 16, KVType: gguf.Q4_0})
	assert.ErrorIs(t, err, ErrUnsupported)
}

// TestKVQ8GroupMatchesPerHead checks that a decode step over a Q8_0 cache
// in the fast mode by decodeQ8 (contiguous ranges of KV heads per thread,
// their keys by shared tiles) gives logits bit-identical to one task per
// KV head (attendHeadsQ8 for one KV head at a time, round-robin), with 1
// and 2 threads, on models with grouped-query attention (SmolLM2: 3 query
// heads per KV head) and a sliding window (the gemma2 synthetic file).
// (That a query head's result does not depend on the heads computed with
// it is the kernels' own tests: AttnScoresQ8Heads, AttnValuesQ8Heads.)
func TestKVQ8GroupMatchesPerHead(t *testing.T) {
	models := map[string]string{
		"smollm2": smolLM2Path(t),
		"gemma2":  synthF32(t, synthSpecOf(t, "gemma2")),
	}
	for name, path := range models {
		for threads := 1; threads <= 2; threads++ {
			t.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(t *testing.T) {
				m, err := Open(path, ModelParams{Kernels: testKernels(t), Threads: threads})
				require.NoError(t, err)
				defer m.Close()
				vocab := m.Info().VocabSize
				run := func(perHead bool) []float32 {
					testPerKVHead = perHead
					defer func() { testPerKVHead = false }()
					s, err := m.NewSession(SessionParams{NCtx: 256, KVType: gguf.Q8_0})
					require.NoError(t, err)
					defer s.Close()
					require.NotNil(t, s.decScores, "decode steps do not take decodeQ8")
					return prefillDecodeLogits(t, s, vocab, 60)
				}
				requireIdenticalLogits(t, run(false), run(true), vocab, "grouped", "per head")
			})
		}
	}
}

// TestKVQ8DecodeAllocatesNothing: a decode step over a Q8_0 cache
// (decodeQ8, with its tiles and grouped kernels) allocates nothing.
func TestKVQ8DecodeAllocatesNothing(t *testing.T) {
	m, err := Open(smolLM2Path(t), ModelParams{Kernels: testKernels(t), Threads: 2})
	require.NoError(t, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 512, KVType: gguf.Q8_0})
	require.NoError(t, err)
	defer s.Close()
	require.NotNil(t, s.decScores, "decode steps do not take decodeQ8")
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 403, 407, 52, 9}, logits))
	allocs := testing.AllocsPerRun(20, func() {
		if err := s.Decode(261, logits); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}
