package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// batchRun is one sequence of a batched test: its prompt, how many tokens
// it decodes, and what it produced (greedy tokens and every logits vector).
type batchRun struct {
	prompt []int32
	n      int
	toks   []int32
	logits [][]float32
}

// aloneRun decodes r alone: one Prefill of the prompt, then greedy Decode.
func aloneRun(t *testing.T, m *Model, p SessionParams, r *batchRun) {
	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	vocab := m.Info().VocabSize
	l := make([]float32, vocab)
	require.NoError(t, s.Prefill(r.prompt, l))
	for len(r.toks) < r.n {
		r.logits = append(r.logits, append([]float32(nil), l...))
		tok := argmax(l)
		r.toks = append(r.toks, tok)
		require.NoError(t, s.Decode(tok, l))
	}
}

// promptChunk is the length of the next chunk of a prompt with left
// tokens to evaluate, in chunks of chunk tokens: never a one-token chunk
// (alone that would take attention's decode path).
func promptChunk(left, chunk int) int {
	n := min(chunk, left)
	if left-n == 1 {
		n++
	}
	return n
}

// batchedRuns decodes every run in shared steps: each prompt is prefilled
// in chunks of chunk tokens, the first prompt's chunks alone and later
// prompts' chunks joining the steps in which the earlier sequences already
// decode; a sequence leaves the steps when it has its n tokens.
func batchedRuns(t *testing.T, m *Model, p SessionParams, runs []*batchRun, chunk int) (steps int) {
	b, err := m.NewBatcher(p)
	require.NoError(t, err)
	defer b.Close()
	sessions := make([]*Session, len(runs))
	for i := range runs {
		s, err := m.NewSession(p)
		require.NoError(t, err)
		defer s.Close()
		sessions[i] = s
	}
	return stepRuns(t, b, sessions, runs, chunk)
}

// stepRuns is batchedRuns on batcher b and the sessions (one per run,
// empty). A prompt's chunks but the last are marked Continues: the prompt
// is one evaluation, as a Prefill.
func stepRuns(t *testing.T, b *Batcher, sessions []*Session, runs []*batchRun, chunk int) (steps int) {
	vocab := b.m.Info().VocabSize
	type seq struct {
		s    *Session
		fed  int // prompt tokens evaluated
		l    []float32
		next int32
	}
	seqs := make([]*seq, len(runs))
	for i, s := range sessions {
		seqs[i] = &seq{s: s, l: make([]float32, vocab)}
	}
	entries := make([]BatchEntry, 0, len(runs))
	who := make([]int, 0, len(runs))
	for {
		entries, who = entries[:0], who[:0]
		for i, q := range seqs {
			if i > 0 && len(runs[i-1].toks) == 0 {
				break // sequence i starts once sequence i-1 decodes
			}
			r := runs[i]
			switch {
			case q.fed < len(r.prompt):
				n := promptChunk(len(r.prompt)-q.fed, chunk)
				e := BatchEntry{Session: q.s, Tokens: r.prompt[q.fed : q.fed+n], Continues: true}
				if q.fed+n == len(r.prompt) {
					e.Logits, e.Continues = q.l, false
				}
				entries = append(entries, e)
				q.fed += n
			case len(r.toks) < r.n:
				entries = append(entries, BatchEntry{Session: q.s, Tokens: []int32{q.next}, Logits: q.l})
			default:
				continue
			}
			who = append(who, i)
		}
		if len(entries) == 0 {
			return steps
		}
		require.NoError(t, b.Step(entries))
		steps++
		for k, i := range who {
			require.NoError(t, entries[k].Err, "sequence %d", i)
			if entries[k].Logits == nil {
				continue
			}
			r, q := runs[i], seqs[i]
			r.logits = append(r.logits, append([]float32(nil), q.l...))
			q.next = argmax(q.l)
			r.toks = append(r.toks, q.next)
		}
	}
}

// TestBatchMatchesAlone decodes several sequences of different lengths
// together (prompts prefilled in chunks that join the others' decode
// steps, one sequence finishing early) and checks that each equals the
// same sequence decoded alone: the same greedy tokens and every logits
// vector bit for bit.
func TestBatchMatchesAlone(t *testing.T) {
	type model struct {
		name, path string
		kv         map[string]SessionParams
		pack       PackMode
	}
	models := []model{
		{"stories260K", shareddata.Path(t, "models/stories260K.gguf"), map[string]SessionParams{"f16": {NCtx: 512}, "f32": {NCtx: 512, KVF32: true}}, PackDefault},
		{"SmolLM2", smolLM2Path(t), map[string]SessionParams{"f16": {NCtx: 512}, "f32": {NCtx: 512, KVF32: true}, "q8_0": {NCtx: 512, KVType: gguf.Q8_0}}, PackDefault},
		// Unpacked q4_K and q6_K matrices: the GGUF-layout four-token
		// kernels (packed ones are what the default open uses).
		{"Gemma3-unpacked", gemma3Path(t), map[string]SessionParams{"f16": {NCtx: 512}}, PackOff},
	}
	for _, md := range models {
		m, err := Open(md.path, ModelParams{Kernels: testKernels(t), Pack: md.pack})
		require.NoError(t, err)
		prompts := []string{
			"Once upon a time, there was a little dog named Max. He liked to run",
			"The cat sat",
			"One day, a girl found a big red ball in the park. She wanted to play with it, but it was stuck in a tree, so she asked her brother",
			"Tom and Lily went",
		}
		for kv, p := range md.kv {
			t.Run(md.name+"/"+kv, func(t *testing.T) {
				var alone, together []*batchRun
				for i, text := range prompts {
					toks, err := m.Tokenize(text, true, false)
					require.NoError(t, err)
					n := 12 - 3*i // different lengths: the last finishes early
					alone = append(alone, &batchRun{prompt: toks, n: n})
					together = append(together, &batchRun{prompt: toks, n: n})
					aloneRun(t, m, p, alone[i])
				}
				steps := batchedRuns(t, m, p, together, 7)
				decoded := 0
				for i := range alone {
					decoded += alone[i].n
					require.Equal(t, alone[i].toks, together[i].toks, "sequence %d: greedy tokens", i)
					for k := range alone[i].logits {
						requireBitsEqual(t, alone[i].logits[k], together[i].logits[k], fmt.Sprintf("sequence %d, token %d", i, k))
					}
				}
				require.Less(t, steps, decoded, "the sequences shared no steps")
			})
		}
		require.NoError(t, m.Close())
	}
}

func requireBitsEqual(t *testing.T, want, got []float32, what string) {
	t.Helper()
	require.Len(t, got, len(want))
	for j := range want {
		if math.Float32bits(want[j]) != math.Float32bits(got[j]) {
			require.Failf(t, "logits differ", "%s: logit %d: %v alone, %v batched", what, j, want[j], got[j])
		}
	}
}

// TestBatchStepAllocatesNothing checks a steady decode step of several
// sessions.
func TestBatchStepAllocatesNothing(t *testing.T) {
	checkStepAllocatesNothing(t, openStories(t, 2), SessionParams{NCtx: 512}, 4, 50)
}

// checkStepAllocatesNothing steps n sessions of m made with p through a
// 3-token prefill, then measures runs one-token steps of all of them: none
// may allocate.
func checkStepAllocatesNothing(t *testing.T, m *Model, p SessionParams, n, runs int) {
	t.Helper()
	b, err := m.NewBatcher(p)
	require.NoError(t, err)
	defer b.Close()
	vocab := m.Info().VocabSize
	entries := make([]BatchEntry, n)
	for i := range entries {
		s, err := m.NewSession(p)
		require.NoError(t, err)
		defer s.Close()
		entries[i] = BatchEntry{Session: s, Tokens: []int32{1, 403, int32(407 + i)}, Logits: make([]float32, vocab)}
	}
	require.NoError(t, b.Step(entries))
	for i := range entries {
		require.NoError(t, entries[i].Err)
		entries[i].Tokens = []int32{261}
	}
	allocs := testing.AllocsPerRun(runs, func() {
		if err := b.Step(entries); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
	for i := range entries {
		require.NoError(t, entries[i].Err)
		require.Equal(t, 3+runs+1, entries[i].Session.Pos())
	}
}

// TestBatchEntryErrors checks that a bad entry gets its own error and the
// others go on.
func TestBatchEntryErrors(t *testing.T) {
	m := openStories(t, 2)
	p := SessionParams{NCtx: 16}
	b, err := m.NewBatcher(p)
	require.NoError(t, err)
	vocab := m.Info().VocabSize
	newS := func() *Session {
		s, err := m.NewSession(p)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	good, other, cancelled, full := newS(), newS(), newS(), newS()
	require.NoError(t, full.Prefill(make([]int32, 15), nil))
	cancelled.Cancel()
	f32, err := m.NewSession(SessionParams{NCtx: 16, KVF32: true})
	require.NoError(t, err)
	defer f32.Close()
	l := make([]float32, vocab)
	entries := []BatchEntry{
		{Session: good, Tokens: []int32{1, 2}, Logits: l},
		{Session: good, Tokens: []int32{3}},                       // the same session twice
		{Session: other, Tokens: []int32{int32(vocab)}},           // outside the vocabulary
		{Session: other, Tokens: []int32{1}, Logits: l[:vocab-1]}, // short logits
		{Session: cancelled, Tokens: []int32{1}},                  // a pending Cancel
		{Session: full, Tokens: []int32{1, 2}},                    // context full
		{Session: f32, Tokens: []int32{1}},                        // another cache type
		{Session: other, Tokens: make([]int32, b.MaxTokens())},    // no room left
		{Tokens: []int32{1}},                                      // no session
	}
	require.NoError(t, b.Step(entries))
	require.NoError(t, entries[0].Err)
	require.Equal(t, 2, good.Pos())
	want := []error{nil, ErrBusy, ErrInvalidArgument, ErrInvalidArgument, ErrCancelled, ErrContextFull, ErrInvalidArgument, ErrInvalidArgument, ErrInvalidArgument}
	for i, w := range want[1:] {
		require.True(t, errors.Is(entries[i+1].Err, w), "entry %d: %v, want %v", i+1, entries[i+1].Err, w)
	}
	require.Equal(t, 0, other.Pos())
	require.Equal(t, 15, full.Pos())
	// The cancel was consumed: the session steps normally now.
	entries = []BatchEntry{{Session: cancelled, Tokens: []int32{1}}}
	require.NoError(t, b.Step(entries))
	require.NoError(t, entries[0].Err)
	b.Close()
	require.ErrorIs(t, b.Step(entries), ErrInvalidArgument)
}
