package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hybrid model's session memory: rewinding restores checkpoints of the
// recurrent state and evaluates the tokens after them again, bit for bit
// as a session that made the same calls; saved states and forks carry the
// recurrent state. All on the committed synthetic Qwen3.5 (Q8_0).

func openQwen35(t *testing.T) *Model {
	t.Helper()
	m, err := Open(synthModel(t, "synth-qwen35-Q8_0.gguf"), ModelParams{Threads: 2})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// hybridCalls is a sequence of calls on a session: a prefill of each
// chunk of several tokens, a decode of each one-token chunk.
type hybridCalls [][]int32

// run makes the calls on s and returns the logits of each.
func (c hybridCalls) run(t *testing.T, s *Session) [][]float32 {
	t.Helper()
	vocab := s.Model().Info().VocabSize
	var out [][]float32
	for _, chunk := range c {
		lg := make([]float32, vocab)
		if len(chunk) == 1 {
			require.NoError(t, s.Decode(chunk[0], lg))
		} else {
			require.NoError(t, s.Prefill(chunk, lg))
		}
		out = append(out, lg)
	}
	return out
}

var (
	hybA = []int32{1, 403, 407, 261, 378, 290, 330, 324}
	hybB = []int32{411, 260, 425, 262, 477, 291}
	hybD = []int32{300, 12, 77, 401, 9, 250, 333, 41, 17, 280}
)

func newHybridSession(t *testing.T, m *Model, p SessionParams) *Session {
	t.Helper()
	if p.NCtx == 0 {
		p.NCtx = 256
	}
	s, err := m.NewSession(p)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func decodes(toks []int32) hybridCalls {
	var c hybridCalls
	for _, x := range toks {
		c = append(c, []int32{x})
	}
	return c
}

// TestHybridRewindToCheckpoint: after a rewind to a checkpoint (the end
// of a prefill), repeating the same calls gives bit-identical logits, and
// the rewind evaluates nothing.
func TestHybridRewindToCheckpoint(t *testing.T) {
	s, first := checkRewindToCheckpoint(t, openQwen35(t))
	// And again from the middle of the decodes, whose checkpoint (every
	// 32 positions by default) is the prefill's end.
	require.NoError(t, s.Rewind(len(hybA)+len(hybB)))
	third := decodes(hybD).run(t, s)
	for i := range third {
		require.Equal(t, first[1+i], third[i], "decode %d after the second rewind", i)
	}
}

// checkRewindToCheckpoint runs hybA's prefill, then hybB and hybD's
// decodes, rewinds to the prefill's end (a checkpoint) and runs them again:
// the rewind must evaluate nothing and the logits must be bit-identical.
// It returns the session and the first run's logits.
func checkRewindToCheckpoint(t *testing.T, m *Model) (*Session, [][]float32) {
	t.Helper()
	s := newHybridSession(t, m, SessionParams{})
	hybridCalls{hybA}.run(t, s)
	again := append(hybridCalls{hybB}, decodes(hybD)...)
	first := again.run(t, s)
	before := s.Stats().Evaluated
	require.NoError(t, s.Rewind(len(hybA)))
	assert.Equal(t, len(hybA), s.Pos())
	assert.Equal(t, before, s.Stats().Evaluated, "a rewind to a checkpoint evaluates nothing")
	second := again.run(t, s)
	for i := range first {
		require.Equal(t, first[i], second[i], "call %d after the rewind", i)
	}
	return s, first
}

// TestHybridRewindReplays: a rewind to a position without a checkpoint
// restores the one before it and evaluates the tokens in between again,
// leaving the state of a session that made those calls.
func TestHybridRewindReplays(t *testing.T) {
	m := openQwen35(t)
	s := newHybridSession(t, m, SessionParams{})
	calls := append(hybridCalls{hybA, hybB}, decodes(hybD)...)
	calls.run(t, s)
	keep := len(hybA) + len(hybB) + 3
	before := s.Stats().Evaluated
	require.NoError(t, s.Rewind(keep))
	assert.Equal(t, keep, s.Pos())
	assert.Equal(t, before+3, s.Stats().Evaluated, "three tokens after the prefill's checkpoint evaluated again")
	got := decodes(hybD[3:]).run(t, s)

	// The same state as a session that prefilled those three tokens.
	ref := newHybridSession(t, m, SessionParams{})
	want := append(hybridCalls{hybA, hybB, hybD[:3]}, decodes(hybD[3:])...).run(t, ref)
	for i := range got {
		require.Equal(t, want[3+i], got[i], "decode %d after the rewind", i)
	}
	toks, err := s.Tokens()
	require.NoError(t, err)
	assert.Equal(t, slices.Concat(hybA, hybB, hybD), toks)

	// Back before every checkpoint: from position 0.
	require.NoError(t, s.Rewind(3))
	got = hybridCalls{hybA[3:]}.run(t, s)
	ref2 := newHybridSession(t, m, SessionParams{})
	want = hybridCalls{hybA[:3], hybA[3:]}.run(t, ref2)
	assert.Equal(t, want[1], got[0])
}

// TestHybridDecodeCheckpoints: while decoding, a checkpoint every
// CheckpointEvery positions; with a budget for two, the older ones are
// dropped and rewinds stay right.
func TestHybridDecodeCheckpoints(t *testing.T) {
	m := openQwen35(t)
	s := newHybridSession(t, m, SessionParams{CheckpointEvery: 4})
	first := append(hybridCalls{hybA}, decodes(hybD)...).run(t, s)
	var pos []int
	for _, c := range s.rec.cps {
		pos = append(pos, c.pos)
	}
	assert.Equal(t, []int{8, 12, 16}, pos, "the prefill's end, then every 4 decoded positions")
	before := s.Stats().Evaluated
	require.NoError(t, s.Rewind(12))
	assert.Equal(t, before, s.Stats().Evaluated)
	got := decodes(hybD[4:]).run(t, s)
	for i := range got {
		require.Equal(t, first[5+i], got[i])
	}

	// A budget of one state's size keeps the minimum of two checkpoints.
	r := s.rec
	small := newHybridSession(t, m, SessionParams{CheckpointEvery: 2, CheckpointBytes: int64(4 * len(r.state))})
	append(hybridCalls{hybA}, decodes(hybD)...).run(t, small)
	require.Len(t, small.rec.cps, minCheckpoints)
	assert.Equal(t, 18, small.rec.cps[len(small.rec.cps)-1].pos)
	require.NoError(t, small.Rewind(13))
	got = decodes(hybD[5:]).run(t, small)
	ref := newHybridSession(t, m, SessionParams{})
	want := append(hybridCalls{hybA}, decodes(hybD)...).run(t, ref)
	for i := range got {
		// The replay prefilled what was decoded: equal up to the batch's
		// rounding.
		assert.InDeltaSlice(t, want[6+i], got[i], 1e-3)
	}

	// No checkpoints at all: rewinds evaluate from position 0.
	none := newHybridSession(t, m, SessionParams{CheckpointBytes: -1})
	hybridCalls{hybA, hybB}.run(t, none)
	assert.Empty(t, none.rec.cps)
	before = none.Stats().Evaluated
	require.NoError(t, none.Rewind(len(hybA)))
	assert.Equal(t, before+int64(len(hybA)), none.Stats().Evaluated)
}

// TestHybridPrefillReuse: PrefillReuse goes back to the checkpoint at or
// before the common prefix and evaluates from there.
func TestHybridPrefillReuse(t *testing.T) {
	m := openQwen35(t)
	vocab := m.Info().VocabSize
	s := newHybridSession(t, m, SessionParams{})
	hybridCalls{hybA, hybB}.run(t, s)
	next := slices.Concat(hybA, hybB[:2], hybD[:4])
	got := make([]float32, vocab)
	n, err := s.PrefillReuse(next, got)
	require.NoError(t, err)
	assert.Equal(t, len(next)-len(hybA), n, "evaluated from the checkpoint at the end of the first prefill")
	ref := newHybridSession(t, m, SessionParams{})
	want := hybridCalls{hybA, next[len(hybA):]}.run(t, ref)
	assert.Equal(t, want[1], got)
}

// TestHybridStateSaveLoadFork: a saved state loaded into another session,
// and a fork, continue bit for bit as the original; a state of the
// hybrid model is refused by a session of another model.
func TestHybridStateSaveLoadFork(t *testing.T) {
	m := openQwen35(t)
	s := newHybridSession(t, m, SessionParams{})
	hybridCalls{hybA, hybB}.run(t, s)
	data, err := s.SaveState()
	require.NoError(t, err)
	size, err := s.StateSize()
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), size)
	f, err := s.Fork()
	require.NoError(t, err)
	t.Cleanup(f.Close)
	want := decodes(hybD).run(t, s)

	l := newHybridSession(t, m, SessionParams{NCtx: 128})
	require.NoError(t, l.LoadState(data))
	assert.Equal(t, len(hybA)+len(hybB), l.Pos())
	got := decodes(hybD).run(t, l)
	for i := range want {
		require.Equal(t, want[i], got[i], "decode %d after loading", i)
	}
	got = decodes(hybD).run(t, f)
	for i := range want {
		require.Equal(t, want[i], got[i], "decode %d of the fork", i)
	}
	// The loaded position is a checkpoint; the fork has the original's.
	require.NoError(t, l.Rewind(len(hybA)+len(hybB)))
	assert.Equal(t, want[0], decodes(hybD[:1]).run(t, l)[0])
	before := f.Stats().Evaluated
	require.NoError(t, f.Rewind(len(hybA)))
	assert.Equal(t, before, f.Stats().Evaluated)

	// Corrupting the recurrent state's bytes is caught by the checksum.
	bad := slices.Clone(data)
	bad[len(bad)-8] ^= 1
	assert.ErrorIs(t, l.LoadState(bad), ErrBadFile)

	other := openStories(t, 1)
	o, err := other.NewSession(SessionParams{NCtx: 128})
	require.NoError(t, err)
	defer o.Close()
	assert.ErrorIs(t, o.LoadState(data), ErrInvalidArgument)
	// And a state without recurrent layers is refused by the hybrid one.
	assert.ErrorIs(t, l.LoadState(stateFor(t, other, []int32{1, 400, 7}, SessionParams{NCtx: 16})), ErrInvalidArgument)
}

// TestHybridCancelRestores: a prefill cancelled after some chunks leaves
// the session where it was, recurrent state included.
func TestHybridCancelRestores(t *testing.T) {
	m := openQwen35(t)
	vocab := m.Info().VocabSize
	s := newHybridSession(t, m, SessionParams{})
	hybridCalls{hybA}.run(t, s)
	long := make([]int32, 3*maxBatch)
	for i := range long {
		long[i] = int32(3 + (i*37)%500)
	}
	// Cancel once the first chunk has changed the state: the second
	// chunk's first layer sees it.
	s.testAfterChunk = func() { s.Cancel() }
	err := s.Prefill(long, nil)
	s.testAfterChunk = nil
	require.ErrorIs(t, err, ErrCancelled)
	assert.Equal(t, len(hybA), s.Pos())
	got := make([]float32, vocab)
	require.NoError(t, s.Prefill(hybB, got))
	ref := newHybridSession(t, m, SessionParams{})
	want := hybridCalls{hybA, hybB}.run(t, ref)
	assert.Equal(t, want[1], got)
}

// FuzzLoadStateHybrid: a hybrid model's saved state (KV of the attention
// layers, then the recurrent state), mutated, is refused with a classified
// error or loads as a state of the session's shape, never a crash.
func FuzzLoadStateHybrid(f *testing.F) {
	m, err := Open(synthModel(f, "synth-qwen35-Q8_0.gguf"), ModelParams{Threads: 1})
	require.NoError(f, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 16})
	require.NoError(f, err)
	defer s.Close()
	f.Add(stateFor(f, m, []int32{1, 400, 7}, SessionParams{NCtx: 16}), false)
	f.Add(stateFor(f, m, nil, SessionParams{NCtx: 16}), true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		// A loaded state runs.
		if held := loadFuzzed(t, s, data, fix); held != nil && s.Pos() < 16 {
			require.NoError(t, s.Decode(1, make([]float32, m.Info().VocabSize)))
		}
	})
}

// TestHybridStateMutations is a deterministic sample of the fuzzer's
// work on a hybrid state: headers with the layer counts or the recurrent
// size changed are refused, the checksum made right again.
func TestHybridStateMutations(t *testing.T) {
	m := openQwen35(t)
	s := newHybridSession(t, m, SessionParams{NCtx: 64})
	good := stateFor(t, m, []int32{1, 400, 7}, SessionParams{NCtx: 64})
	le := func(b []byte, off int, v uint32) []byte {
		b = slices.Clone(b)
		b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return reseal(b)
	}
	for name, c := range map[string]struct {
		data []byte
		want error
	}{
		"KV layers":          {le(good, 128, 3), ErrBadFile},
		"recurrent layers":   {le(good, 132, 1), ErrBadFile},
		"recurrent size":     {le(good, 136, 12345), ErrBadFile},
		"no recurrent state": {le(le(le(good, 128, 4), 132, 0), 136, 0), ErrBadFile},
		"reserved":           {le(good, 150, 1), ErrUnsupported},
	} {
		err := s.LoadState(c.data)
		assert.ErrorIs(t, err, c.want, "%s: %v", name, err)
		assert.Equal(t, 0, s.Pos(), name)
	}
	require.NoError(t, s.LoadState(good))
	assert.Equal(t, 3, s.Pos())
}
