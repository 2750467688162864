package engine

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// longStoriesPrompt is a prompt of more than one prefill chunk.
func longStoriesPrompt(t *testing.T, m *Model) []int32 {
	t.Helper()
	p := storiesPrompt(t, m)
	for len(p) < maxBatch+40 {
		p = append(p, p[1:]...)
	}
	return p[:maxBatch+40]
}

// prefillLogits prefills toks into a fresh session and returns the last
// position's logits.
func prefillLogits(t *testing.T, m *Model, toks []int32, p SessionParams) []float32 {
	t.Helper()
	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill(toks, logits))
	return logits
}

// sameBits fails unless a and b are equal bit for bit.
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	require.Equal(t, len(a), len(b), what)
	for i := range a {
		if a[i] != b[i] && !(a[i] != a[i] && b[i] != b[i]) {
			t.Fatalf("%s: logit %d is %v, want %v (bit for bit)", what, i, a[i], b[i])
		}
	}
}

func TestPrefixReuseEvaluatesOnlyTheRest(t *testing.T) {
	m := openStories(t, 2)
	vocab := m.Info().VocabSize
	full := longStoriesPrompt(t, m)
	s, err := m.NewSession(SessionParams{NCtx: 512})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, vocab)

	// A first turn evaluates everything.
	first := full[:30]
	n, err := s.PrefillReuse(first, logits)
	require.NoError(t, err)
	assert.Equal(t, 30, n)
	sameBits(t, "first turn", logits, prefillLogits(t, m, first, SessionParams{NCtx: 512}))

	// A longer sequence with the same start evaluates only the new tokens
	// (crossing a prefill chunk boundary).
	n, err = s.PrefillReuse(full, logits)
	require.NoError(t, err)
	assert.Equal(t, len(full)-30, n)
	sameBits(t, "extended", logits, prefillLogits(t, m, full, SessionParams{NCtx: 512}))
	assert.Equal(t, SessionStats{Evaluated: int64(len(full)), Reused: 30}, s.Stats())
	held, err := s.Tokens()
	require.NoError(t, err)
	assert.Equal(t, full, held)

	// The same sequence again: the last token is evaluated again for its logits.
	n, err = s.PrefillReuse(full, logits)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	sameBits(t, "repeated", logits, prefillLogits(t, m, full, SessionParams{NCtx: 512}))
	assert.Equal(t, len(full), s.Pos())

	// Without logits, a held sequence costs nothing.
	n, err = s.PrefillReuse(full, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, n)

	// A sequence that diverges at 50 keeps 50 positions and drops the rest.
	branch := slices.Clone(full[:60])
	branch[50] = (branch[50] + 7) % int32(vocab)
	n, err = s.PrefillReuse(branch, logits)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, 60, s.Pos())
	sameBits(t, "branch", logits, prefillLogits(t, m, branch, SessionParams{NCtx: 512}))

	// A prefix of what is held: rewinds, evaluating the last token only.
	n, err = s.PrefillReuse(branch[:20], logits)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 20, s.Pos())
	sameBits(t, "prefix", logits, prefillLogits(t, m, branch[:20], SessionParams{NCtx: 512}))

	// Decoding after a reuse continues the history.
	require.NoError(t, s.Decode(5, logits))
	held, err = s.Tokens()
	require.NoError(t, err)
	assert.Equal(t, append(slices.Clone(branch[:20]), 5), held)
}

func TestPrefixReuseRefusesBeforeChanging(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	p := storiesPrompt(t, m)
	_, err = s.PrefillReuse(p, nil)
	require.NoError(t, err)
	pos := s.Pos()

	_, err = s.PrefillReuse(nil, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.PrefillReuse([]int32{p[0], 100000}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.PrefillReuse(p, make([]float32, 3))
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = s.PrefillReuse(make([]int32, 65), nil)
	assert.ErrorIs(t, err, ErrContextFull)
	assert.Equal(t, pos, s.Pos(), "a refused call changes nothing")
}

// continueGreedy decodes n greedy tokens from logits and returns every
// step's logits concatenated.
func continueGreedy(t *testing.T, s *Session, logits []float32, n int) []float32 {
	t.Helper()
	l := slices.Clone(logits)
	var all []float32
	for range n {
		require.NoError(t, s.Decode(argmax(l), l))
		all = append(all, l...)
	}
	return all
}

func TestForkContinuesBitForBit(t *testing.T) {
	m := openStories(t, 2)
	vocab := m.Info().VocabSize
	prompt := longStoriesPrompt(t, m)
	for _, kv := range []SessionParams{{NCtx: 256}, {NCtx: 256, KVF32: true}} {
		ref, err := m.NewSession(kv)
		require.NoError(t, err)
		logits := make([]float32, vocab)
		require.NoError(t, ref.Prefill(prompt, logits))
		want := continueGreedy(t, ref, logits, 12)
		ref.Close()

		a, err := m.NewSession(kv)
		require.NoError(t, err)
		require.NoError(t, a.Prefill(prompt, logits))
		b, err := a.Fork()
		require.NoError(t, err)
		assert.Equal(t, a.Pos(), b.Pos())
		assert.Zero(t, b.Stats().Evaluated, "a fork recomputes nothing")

		// The original takes another path first; the fork is unaffected.
		other := make([]float32, vocab)
		require.NoError(t, a.Decode(3, other))
		sameBits(t, "fork", continueGreedy(t, b, logits, 12), want)
		// And the original, rewound, still continues as before.
		require.NoError(t, a.Rewind(len(prompt)))
		sameBits(t, "original", continueGreedy(t, a, logits, 12), want)

		// A fork of a fork, closed original.
		c, err := b.Fork()
		require.NoError(t, err)
		b.Close()
		a.Close()
		assert.Equal(t, len(prompt)+12, c.Pos())
		held, err := c.Tokens()
		require.NoError(t, err)
		assert.Equal(t, prompt, held[:len(prompt)])
		c.Close()
	}
}

func TestForkOfEmptyAndClosed(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 32})
	require.NoError(t, err)
	f, err := s.Fork()
	require.NoError(t, err)
	assert.Equal(t, 0, f.Pos())
	assert.Equal(t, 32, f.NCtx())
	f.Close()
	s.Close()
	_, err = s.Fork()
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestStateRoundTripBitForBit(t *testing.T) {
	path := shareddata.Path(t, "models/stories260K.gguf")
	m := openStories(t, 2)
	vocab := m.Info().VocabSize
	prompt := longStoriesPrompt(t, m)
	for _, kv := range []SessionParams{{NCtx: 256}, {NCtx: 256, KVF32: true}} {
		s, err := m.NewSession(kv)
		require.NoError(t, err)
		logits := make([]float32, vocab)
		require.NoError(t, s.Prefill(prompt, logits))
		data, err := s.SaveState()
		require.NoError(t, err)
		size, err := s.StateSize()
		require.NoError(t, err)
		assert.EqualValues(t, size, len(data))
		file := filepath.Join(t.TempDir(), "state.bin")
		require.NoError(t, s.SaveStateFile(file))
		onDisk, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.Equal(t, data, onDisk)
		want := continueGreedy(t, s, logits, 12)
		s.Close()

		// A second open of the same file, as a new process would.
		m2, err := Open(path, ModelParams{Threads: 1, Kernels: testKernels(t)})
		require.NoError(t, err)
		for _, load := range []func(*Session) error{
			func(r *Session) error { return r.LoadState(data) },
			func(r *Session) error { return r.LoadStateFile(file) },
		} {
			// A different context size is fine if the state fits; a
			// session that held other positions is replaced.
			r, err := m2.NewSession(SessionParams{NCtx: 200, KVF32: kv.KVF32})
			require.NoError(t, err)
			require.NoError(t, r.Prefill([]int32{1, 2, 3}, nil))
			require.NoError(t, load(r))
			assert.Equal(t, len(prompt), r.Pos())
			held, err := r.Tokens()
			require.NoError(t, err)
			assert.Equal(t, prompt, held)
			sameBits(t, "restored", continueGreedy(t, r, logits, 12), want)
			r.Close()
		}
		require.NoError(t, m2.Close())
	}
}

// stateFor saves a session of m holding toks.
func stateFor(t testing.TB, m *Model, toks []int32, p SessionParams) []byte {
	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	if len(toks) > 0 {
		require.NoError(t, s.Prefill(toks, nil))
	}
	data, err := s.SaveState()
	require.NoError(t, err)
	return data
}

// reseal recomputes a state's checksum after an edit.
func reseal(b []byte) []byte {
	end := len(b) - 4
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crcTable))
	return b
}

func TestStateRefusals(t *testing.T) {
	m := openStories(t, 1)
	prompt := storiesPrompt(t, m)
	good := stateFor(t, m, prompt, SessionParams{NCtx: 128})

	s, err := m.NewSession(SessionParams{NCtx: 128})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Prefill(prompt[:5], nil))

	edit := func(f func(b []byte)) []byte {
		b := slices.Clone(good)
		f(b)
		return b
	}
	le := binary.LittleEndian
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadFile},
		{"header only", good[:stateHeaderSize], ErrBadFile},
		{"truncated", good[:len(good)-1], ErrBadFile},
		{"half", good[:len(good)/2], ErrBadFile},
		{"trailing bytes", append(slices.Clone(good), 0), ErrBadFile},
		{"magic", edit(func(b []byte) { b[0] = 'X' }), ErrBadFile},
		{"flipped KV bit", edit(func(b []byte) { b[len(b)-40] ^= 1 }), ErrBadFile},
		{"flipped token", edit(func(b []byte) { b[stateHeaderSize] ^= 1 }), ErrBadFile},
		{"older version", reseal(edit(func(b []byte) { le.PutUint32(b[8:], stateVersion-1) })), ErrUnsupported},
		{"version 0", reseal(edit(func(b []byte) { le.PutUint32(b[8:], 0) })), ErrBadFile},
		{"newer version", reseal(edit(func(b []byte) { le.PutUint32(b[8:], stateVersion+1) })), ErrUnsupported},
		{"huge positions", reseal(edit(func(b []byte) { le.PutUint64(b[112:], 1<<62) })), ErrBadFile},
		{"huge payload", reseal(edit(func(b []byte) { le.PutUint64(b[120:], 1<<62) })), ErrBadFile},
		{"kv type 7", reseal(edit(func(b []byte) { le.PutUint32(b[92:], 7) })), ErrBadFile},
		{"q8_0 with f16 sizes", reseal(edit(func(b []byte) { le.PutUint32(b[92:], 8) })), ErrBadFile},
		{"flags", reseal(edit(func(b []byte) { le.PutUint32(b[100:], 1) })), ErrUnsupported},
		{"token outside vocabulary", reseal(edit(func(b []byte) { le.PutUint32(b[stateHeaderSize+4:], 512) })), ErrBadFile},
		{"another model", reseal(edit(func(b []byte) { b[20] ^= 0xff })), ErrInvalidArgument},
		{"another numerics", reseal(edit(func(b []byte) { le.PutUint32(b[96:], uint32(NumericsLlamaCpp)) })), ErrInvalidArgument},
		{"f32 state", stateFor(t, m, prompt, SessionParams{NCtx: 128, KVF32: true}), ErrInvalidArgument},
	}
	for _, c := range cases {
		err := s.LoadState(c.data)
		assert.ErrorIs(t, err, c.want, "%s: %v", c.name, err)
		assert.Equal(t, 5, s.Pos(), "%s: a refused state leaves the session as it was", c.name)
	}

	small, err := m.NewSession(SessionParams{NCtx: len(prompt) - 1})
	require.NoError(t, err)
	defer small.Close()
	assert.ErrorIs(t, small.LoadState(good), ErrContextFull)

	// A state of another model file (same family, other weights and
	// metadata).
	other, err := Open(shareddata.Path(t, "models/tiny-random-llama.gguf"), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer other.Close()
	foreign := stateFor(t, other, []int32{1, 2, 3}, SessionParams{NCtx: 64})
	err = s.LoadState(foreign)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "another model")

	// Files: absent, a folder, truncated.
	dir := t.TempDir()
	assert.ErrorIs(t, s.LoadStateFile(filepath.Join(dir, "absent")), ErrIO)
	assert.ErrorIs(t, s.LoadStateFile(dir), ErrIO)
	cut := filepath.Join(dir, "cut")
	require.NoError(t, os.WriteFile(cut, good[:len(good)-9], 0o644))
	assert.ErrorIs(t, s.LoadStateFile(cut), ErrBadFile)
	assert.ErrorIs(t, s.SaveStateFile(filepath.Join(dir, "no", "such", "dir")), ErrIO)
	assert.Equal(t, 5, s.Pos())
}

func TestStateEmptySession(t *testing.T) {
	m := openStories(t, 1)
	data := stateFor(t, m, nil, SessionParams{NCtx: 16})
	assert.Len(t, data, stateHeaderSize+4)
	s, err := m.NewSession(SessionParams{NCtx: 16})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Prefill([]int32{1, 2}, nil))
	require.NoError(t, s.LoadState(data))
	assert.Equal(t, 0, s.Pos())
}

// FuzzLoadState feeds arbitrary bytes to LoadState. With reseal the
// checksum is made right, so mutations also reach the checks after it.
// Whatever the input, the call returns (an error or a session holding a
// valid state), never panics.
func FuzzLoadState(f *testing.F) {
	m, err := Open(shareddata.Path(f, "models/stories260K.gguf"), ModelParams{Threads: 1})
	require.NoError(f, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 16})
	require.NoError(f, err)
	defer s.Close()
	f.Add(stateFor(f, m, []int32{1, 400, 7}, SessionParams{NCtx: 16}), false)
	f.Add(stateFor(f, m, []int32{1}, SessionParams{NCtx: 16, KVF32: true}), true)
	f.Add([]byte(stateMagic), true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		for _, tok := range loadFuzzed(t, s, data, fix) {
			require.True(t, tok >= 0 && tok < 512)
		}
	})
}

// loadFuzzed loads a fuzzed state into s (with its checksum made right
// first when fix): a refusal must be a classified error; a state that
// loads must hold one token per position, which it returns.
func loadFuzzed(t *testing.T, s *Session, data []byte, fix bool) []int32 {
	t.Helper()
	if fix && len(data) >= 4 {
		data = reseal(slices.Clone(data))
	}
	if err := s.LoadState(data); err != nil {
		if !isStateRefusal(err) {
			t.Fatalf("unclassified error: %v", err)
		}
		return nil
	}
	held, err := s.Tokens()
	require.NoError(t, err)
	require.Len(t, held, s.Pos())
	return held
}

// TestStateRandomMutations is a deterministic sample of what the fuzzer
// does: random bytes overwritten, truncations, the checksum made right
// again half the time.
func TestStateRandomMutations(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 16})
	require.NoError(t, err)
	defer s.Close()
	good := stateFor(t, m, []int32{1, 400, 7}, SessionParams{NCtx: 16})
	r := rand.New(rand.NewPCG(1, 2))
	loaded := 0
	for range 20000 {
		d := slices.Clone(good)
		for range r.IntN(4) + 1 {
			d[r.IntN(len(d))] = byte(r.Uint32())
		}
		if r.IntN(3) == 0 {
			d = d[:r.IntN(len(d))]
		}
		if len(d) >= 4 && r.IntN(2) == 0 {
			d = reseal(d)
		}
		if err := s.LoadState(d); err != nil {
			require.True(t, isStateRefusal(err), "unclassified error: %v", err)
			continue
		}
		loaded++
		held, err := s.Tokens()
		require.NoError(t, err)
		for _, tok := range held {
			require.True(t, tok >= 0 && tok < 512)
		}
	}
	// Resealed edits of the KV bytes load (any bits are valid values).
	assert.Greater(t, loaded, 0)
}

// isStateRefusal reports whether err carries one of the sentinels a
// refused state may have.
func isStateRefusal(err error) bool {
	for _, e := range []error{ErrBadFile, ErrInvalidArgument, ErrContextFull, ErrUnsupported, ErrIO, ErrOutOfMemory} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestPrefixReuseForkStateSmolLM2 repeats the bit-for-bit checks on a real
// quantized model (packed kernels, grouped-query attention, several
// prefill chunks).
func TestPrefixReuseForkStateSmolLM2(t *testing.T) {
	m, err := Open(smolLM2Path(t), ModelParams{Kernels: testKernels(t)})
	require.NoError(t, err)
	defer m.Close()
	vocab := m.Info().VocabSize
	text := strings.Repeat("The quick brown fox jumps over the lazy dog, and the cat watches. ", 12)
	toks, err := m.Tokenize(text, true, false)
	require.NoError(t, err)
	require.Greater(t, len(toks), 2*maxBatch)
	p := SessionParams{NCtx: 512}
	// The tiled Q4_1 product rounds a token's row by its place in the
	// batch, so the reference evaluates in the same two calls; a split at
	// a chunk boundary also equals one prefill of everything.
	split := func(k int) []float32 {
		r, err := m.NewSession(p)
		require.NoError(t, err)
		defer r.Close()
		l := make([]float32, vocab)
		require.NoError(t, r.Prefill(toks[:k], nil))
		require.NoError(t, r.Prefill(toks[k:], l))
		return l
	}
	whole := prefillLogits(t, m, toks, p)

	s, err := m.NewSession(p)
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, vocab)
	for _, k := range []int{37, maxBatch} {
		require.NoError(t, s.Rewind(0))
		_, err = s.PrefillReuse(toks[:k], logits)
		require.NoError(t, err)
		n, err := s.PrefillReuse(toks, logits)
		require.NoError(t, err)
		assert.Equal(t, len(toks)-k, n)
		sameBits(t, "reuse", logits, split(k))
	}
	sameBits(t, "reuse after a whole chunk", logits, whole)

	f, err := s.Fork()
	require.NoError(t, err)
	defer f.Close()
	data, err := s.SaveState()
	require.NoError(t, err)
	r, err := m.NewSession(p)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.LoadState(data))
	cont := continueGreedy(t, s, logits, 6)
	sameBits(t, "fork", continueGreedy(t, f, logits, 6), cont)
	sameBits(t, "restored", continueGreedy(t, r, logits, 6), cont)
}

// TestFingerprint: the same file opened twice has one fingerprint; another
// file, another; a model made by OpenFile has its own, stable one.
func TestFingerprint(t *testing.T) {
	a := openStories(t, 1)
	b := openStories(t, 1)
	assert.Equal(t, a.Fingerprint(), b.Fingerprint())
	assert.NotEqual(t, [32]byte{}, a.Fingerprint())
	other, err := Open(shareddata.Path(t, "models/tiny-random-llama.gguf"), ModelParams{Threads: 1})
	require.NoError(t, err)
	defer other.Close()
	assert.NotEqual(t, a.Fingerprint(), other.Fingerprint())
	f, err := gguf.Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer f.Close()
	m, err := OpenFile(f, ModelParams{Threads: 1})
	require.NoError(t, err)
	defer m.Close()
	fp := m.Fingerprint()
	assert.NotEqual(t, a.Fingerprint(), fp)
	assert.Equal(t, fp, m.Fingerprint())
}

// TestModelHash: the fingerprint's hash is 32 bytes, the same for the same
// bytes written in any pieces, and every one of its three parts changes
// when any single bit of the input does.
func TestModelHash(t *testing.T) {
	sum := func(parts ...[]byte) []byte {
		h := newModelHash()
		for _, p := range parts {
			h.Write(p)
		}
		return h.Sum(nil)
	}
	in := []byte("general.architecture llama; blk.0.attn_q.weight q4_1 [64 64]")
	whole := sum(in)
	require.Len(t, whole, 32)
	assert.Equal(t, whole, sum(in[:7], in[7:30], nil, in[30:]))
	for i := range len(in) * 8 {
		b := slices.Clone(in)
		b[i/8] ^= 1 << (i % 8)
		got := sum(b)
		for _, part := range [][2]int{{0, 16}, {16, 24}, {24, 32}} {
			assert.NotEqual(t, whole[part[0]:part[1]], got[part[0]:part[1]], "bit %d, bytes %v", i, part)
		}
	}
}
