package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// Batched steps of the models whose layers are not all alike: gemma4
// (layers of two shapes, KV-sharing layers, per-layer inputs, a sliding
// window of 8 that the prompts pass) and the hybrids qwen35, qwen35moe
// and qwen3next (gated DeltaNet layers, whose state each session keeps,
// beside attention layers). All on the synthetic Q8_0 files.

// batchSynthPrompts are the prompts of the synthetic models' batched
// tests: of different lengths, all past gemma4's window.
var batchSynthPrompts = []string{
	"Once upon a time, there was a little dog named Max. He liked to run",
	"The cat sat on the mat and looked at the bird",
	"One day, a girl found a big red ball in the park. She wanted to play with it, but it was stuck in a tree, so she asked her brother",
	"Tom and Lily went to the shop to buy",
}

// openBatchSynth opens the synthetic model name on two threads.
func openBatchSynth(t *testing.T, name string) *Model {
	t.Helper()
	m, err := Open(synthModel(t, name), ModelParams{Threads: 2, Kernels: testKernels(t)})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// synthBatchRuns makes one run per prompt: n tokens, fewer for later
// prompts (so sequences leave the steps at different times).
func synthBatchRuns(t *testing.T, m *Model) []*batchRun {
	var runs []*batchRun
	for i, text := range batchSynthPrompts {
		toks, err := m.Tokenize(text, true, false)
		require.NoError(t, err)
		runs = append(runs, &batchRun{prompt: toks, n: 12 - 2*i})
	}
	return runs
}

// aloneRunChunked is aloneRun with the prompt prefilled in the chunks
// stepRuns feeds it in (one Prefill per chunk), on a session set up by
// setup.
func aloneRunChunked(t *testing.T, m *Model, p SessionParams, r *batchRun, chunk int, setup func(*Session)) {
	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	setup(s)
	l := make([]float32, m.Info().VocabSize)
	for fed := 0; fed < len(r.prompt); {
		n := promptChunk(len(r.prompt)-fed, chunk)
		require.NoError(t, s.Prefill(r.prompt[fed:fed+n], l))
		fed += n
	}
	for len(r.toks) < r.n {
		r.logits = append(r.logits, slices.Clone(l))
		tok := argmax(l)
		r.toks = append(r.toks, tok)
		require.NoError(t, s.Decode(tok, l))
	}
}

// requireRunsEqual checks that the batched runs equal the lone ones: the
// same greedy tokens and every logits vector bit for bit.
func requireRunsEqual(t *testing.T, alone, together []*batchRun) {
	t.Helper()
	for i := range alone {
		require.Equal(t, alone[i].toks, together[i].toks, "sequence %d: greedy tokens", i)
		require.Len(t, together[i].logits, len(alone[i].logits))
		for k := range alone[i].logits {
			requireBitsEqual(t, alone[i].logits[k], together[i].logits[k], fmt.Sprintf("sequence %d, token %d", i, k))
		}
	}
}

// TestBatchSynthMatchesAlone: several sessions of each synthetic model,
// prompts prefilled in chunks that join the others' decode steps, give
// in shared steps what each gives alone, bit for bit, with every KV cache
// type the model takes.
func TestBatchSynthMatchesAlone(t *testing.T) {
	for _, name := range []string{"synth-gemma4-Q8_0.gguf", "synth-qwen35-Q8_0.gguf", "synth-qwen35moe-Q8_0.gguf", "synth-qwen3next-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			m := openBatchSynth(t, name)
			kvs := []struct {
				name string
				p    SessionParams
			}{{"f16", SessionParams{NCtx: 256}}, {"f32", SessionParams{NCtx: 256, KVF32: true}}}
			if m.cfg.Shapes == nil {
				// gemma4 refuses a Q8_0 cache (TestGemma4Refusals).
				kvs = append(kvs, struct {
					name string
					p    SessionParams
				}{"q8_0", SessionParams{NCtx: 256, KVType: gguf.Q8_0}})
			}
			for _, kv := range kvs {
				t.Run(kv.name, func(t *testing.T) {
					alone, together := synthBatchRuns(t, m), synthBatchRuns(t, m)
					decoded := 0
					for _, r := range alone {
						aloneRun(t, m, kv.p, r)
						decoded += r.n
					}
					steps := batchedRuns(t, m, kv.p, together, 7)
					requireRunsEqual(t, alone, together)
					require.Less(t, steps, decoded, "the sequences shared no steps")
				})
			}
		})
	}
}

// TestBatchHybridChunkedDeltaNet: with the chunked recurrence on, each
// session's prompt chunk in a step is evaluated in chunks as it would be
// alone (a Prefill of the same chunk), so the logits stay bit for bit.
func TestBatchHybridChunkedDeltaNet(t *testing.T) {
	for _, name := range []string{"synth-qwen35-Q8_0.gguf", "synth-qwen3next-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			m := openBatchSynth(t, name)
			p := SessionParams{NCtx: 256}
			chunked := func(s *Session) { s.dn.chunk = deltaChunk }
			alone, together := synthBatchRuns(t, m), synthBatchRuns(t, m)
			for _, r := range alone {
				aloneRunChunked(t, m, p, r, 7, chunked)
			}
			b, err := m.NewBatcher(p)
			require.NoError(t, err)
			defer b.Close()
			chunked(b.s)
			var sessions []*Session
			for range together {
				s := newHybridSession(t, m, p)
				chunked(s)
				sessions = append(sessions, s)
			}
			stepRuns(t, b, sessions, together, 7)
			requireRunsEqual(t, alone, together)
		})
	}
}

// TestBatchHybridReferenceNumerics: in the llama.cpp numerics (ggml's
// token-by-token recurrence; products that round by batch size, so no
// bit-for-bit promise) the batched sessions give the same greedy tokens
// and logits within float rounding of each alone: each session's
// recurrent state is its own.
func TestBatchHybridReferenceNumerics(t *testing.T) {
	m, err := Open(synthModel(t, "synth-qwen35-Q8_0.gguf"), ModelParams{Threads: 2, Numerics: NumericsLlamaCpp})
	require.NoError(t, err)
	defer m.Close()
	p := SessionParams{NCtx: 256}
	alone, together := synthBatchRuns(t, m), synthBatchRuns(t, m)
	for _, r := range alone {
		aloneRun(t, m, p, r)
	}
	batchedRuns(t, m, p, together, 7)
	worst := 0.0
	for i := range alone {
		require.Equal(t, alone[i].toks, together[i].toks, "sequence %d: greedy tokens", i)
		for k := range alone[i].logits {
			d := relDiff(alone[i].logits[k], together[i].logits[k])
			worst = max(worst, d)
			// Measured 0 on this file; the bound leaves room for the
			// batch-size rounding the mode may have, far below what a
			// session reading another's state would be off by.
			require.LessOrEqual(t, d, 1e-4, "sequence %d, token %d", i, k)
		}
	}
	t.Logf("largest relative difference: %.2g", worst)
}

// TestBatchHybridCheckpoints: sessions stepped by a batcher keep the
// checkpoints they would keep alone (a prompt fed in chunks marked
// Continues is one prefill, checkpointed at its end; then one every
// CheckpointEvery decoded positions), and a rewind of a batched session
// to a checkpoint evaluates nothing and gives, stepped again, the logits
// it gave before.
func TestBatchHybridCheckpoints(t *testing.T) {
	for _, name := range []string{"synth-qwen35-Q8_0.gguf", "synth-qwen35moe-Q8_0.gguf", "synth-qwen3next-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			m := openBatchSynth(t, name)
			p := SessionParams{NCtx: 256, CheckpointEvery: 3}
			alone, together := synthBatchRuns(t, m), synthBatchRuns(t, m)
			var aloneCPs [][]int
			for _, r := range alone {
				s := newHybridSession(t, m, p)
				l := make([]float32, m.Info().VocabSize)
				require.NoError(t, s.Prefill(r.prompt, l))
				for len(r.toks) < r.n {
					r.logits = append(r.logits, slices.Clone(l))
					r.toks = append(r.toks, argmax(l))
					if len(r.toks) < r.n { // stepRuns does not evaluate the last
						require.NoError(t, s.Decode(r.toks[len(r.toks)-1], l))
					}
				}
				info, err := s.Checkpoints()
				require.NoError(t, err)
				aloneCPs = append(aloneCPs, info.Positions)
				s.Close()
			}
			b, err := m.NewBatcher(p)
			require.NoError(t, err)
			defer b.Close()
			var sessions []*Session
			for range together {
				sessions = append(sessions, newHybridSession(t, m, p))
			}
			stepRuns(t, b, sessions, together, 5)
			requireRunsEqual(t, alone, together)
			for i, s := range sessions {
				info, err := s.Checkpoints()
				require.NoError(t, err)
				require.Equal(t, aloneCPs[i], info.Positions, "sequence %d: checkpoints", i)
				require.Contains(t, info.Positions, len(together[i].prompt), "sequence %d: the prompt's end", i)
			}

			// Every session back to its second-to-last checkpoint, then
			// the same tokens again in shared steps.
			vocab := m.Info().VocabSize
			at := make([]int, len(sessions)) // tokens decoded since the prompt
			for i, s := range sessions {
				info, err := s.Checkpoints()
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(info.Positions), 2, "sequence %d", i)
				cp := info.Positions[len(info.Positions)-2]
				before := s.Stats().Evaluated
				require.NoError(t, s.Rewind(cp))
				require.Equal(t, before, s.Stats().Evaluated, "sequence %d: a rewind to a checkpoint evaluates nothing", i)
				at[i] = cp - len(together[i].prompt)
			}
			logits := make([][]float32, len(sessions))
			for i := range logits {
				logits[i] = make([]float32, vocab)
			}
			for {
				var entries []BatchEntry
				var who []int
				for i, s := range sessions {
					r := together[i]
					if at[i] >= r.n-1 {
						continue // the last token was never evaluated
					}
					entries = append(entries, BatchEntry{Session: s, Tokens: r.toks[at[i] : at[i]+1], Logits: logits[i]})
					who = append(who, i)
				}
				if len(entries) == 0 {
					break
				}
				require.NoError(t, b.Step(entries))
				for k, i := range who {
					require.NoError(t, entries[k].Err)
					at[i]++
					requireBitsEqual(t, together[i].logits[at[i]], logits[i], fmt.Sprintf("sequence %d, token %d after the rewind", i, at[i]))
				}
			}
		})
	}
}

// TestBatchHybridFailedStep: a step that fails after a recurrent layer
// has advanced the sessions' states (the batcher's scratch cancelled
// after layer 0, a DeltaNet layer) leaves every session as it was: the
// next step gives the logits the failed one would have.
func TestBatchHybridFailedStep(t *testing.T) {
	m := openQwen35(t)
	require.True(t, m.cfg.Recurrent(0))
	p := SessionParams{NCtx: 256}
	vocab := m.Info().VocabSize
	b, err := m.NewBatcher(p)
	require.NoError(t, err)
	defer b.Close()
	a, c := newHybridSession(t, m, p), newHybridSession(t, m, p)
	la, lc := make([]float32, vocab), make([]float32, vocab)
	require.NoError(t, b.Step([]BatchEntry{{Session: a, Tokens: hybA, Logits: la}, {Session: c, Tokens: hybB, Logits: lc}}))
	// a decodes; c's next entry is a prompt chunk that continues.
	entries := []BatchEntry{{Session: a, Tokens: hybD[:1], Logits: la}, {Session: c, Tokens: hybD[:4], Continues: true}}
	b.s.testAfterLayer = func(il int) {
		if il == 0 {
			b.s.Cancel()
		}
	}
	err = b.Step(entries)
	b.s.testAfterLayer = nil
	require.ErrorIs(t, err, ErrCancelled)
	for k, e := range entries {
		require.ErrorIs(t, e.Err, ErrCancelled, "entry %d", k)
	}
	require.Equal(t, len(hybA), a.Pos())
	require.Equal(t, len(hybB), c.Pos())

	entries[1].Continues, entries[1].Logits = false, lc
	require.NoError(t, b.Step(entries))
	ra, rc := newHybridSession(t, m, p), newHybridSession(t, m, p)
	want := append(hybridCalls{hybA}, decodes(hybD[:1])...).run(t, ra)
	requireBitsEqual(t, want[1], la, "decoded after the failed step")
	want = hybridCalls{hybB, hybD[:4]}.run(t, rc)
	requireBitsEqual(t, want[1], lc, "prefilled after the failed step")
}

// TestBatchHybridGenerateStepperError: a Generate whose Stepper fails
// after evaluating part of the prompt leaves the hybrid session at its
// position before the call, recurrent state included.
func TestBatchHybridGenerateStepperError(t *testing.T) {
	m := openQwen35(t)
	p := SessionParams{NCtx: 256}
	b, err := m.NewBatcher(p)
	require.NoError(t, err)
	defer b.Close()
	s := newHybridSession(t, m, p)
	require.NoError(t, s.Prefill(hybA, nil))
	st := &halfStepper{b: b}
	_, err = s.Generate(slices.Concat(hybB, hybD), GenerateParams{MaxTokens: 2, Stepper: st}, nil)
	require.ErrorIs(t, err, errHalfStepper)
	require.Equal(t, 1, st.steps, "the first chunk was evaluated")
	require.Equal(t, len(hybA), s.Pos())

	vocab := m.Info().VocabSize
	got, want := make([]float32, vocab), make([]float32, vocab)
	require.NoError(t, s.Prefill(hybB, got))
	ref := newHybridSession(t, m, p)
	require.NoError(t, ref.Prefill(hybA, nil))
	require.NoError(t, ref.Prefill(hybB, want))
	requireBitsEqual(t, want, got, "after the failed Generate")
}

var errHalfStepper = errors.New("half stepper: fails after the first chunk")

// halfStepper evaluates the first four tokens of an evaluation through
// its batcher, then fails.
type halfStepper struct {
	b     *Batcher
	steps int
}

func (h *halfStepper) Eval(s *Session, tokens []int32, logits []float32) error {
	e := []BatchEntry{{Session: s, Tokens: tokens[:4], Continues: true}}
	if err := h.b.Step(e); err != nil {
		return err
	}
	if e[0].Err != nil {
		return e[0].Err
	}
	h.steps++
	return errHalfStepper
}

// TestBatchSynthStepAllocatesNothing: a steady decode step of several
// sessions of gemma4 and of a hybrid model allocates nothing (the
// hybrid's checkpoints every 64 positions: none falls among the measured
// steps; taking one copies the state, as alone).
func TestBatchSynthStepAllocatesNothing(t *testing.T) {
	for _, name := range []string{"synth-gemma4-Q8_0.gguf", "synth-qwen35moe-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			checkStepAllocatesNothing(t, openBatchSynth(t, name), SessionParams{NCtx: 256, CheckpointEvery: 64}, 3, 40)
		})
	}
}
