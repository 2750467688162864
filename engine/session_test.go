package engine

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func openStories(t *testing.T, threads int) *Model {
	t.Helper()
	m, err := Open(shareddata.Path(t, "models/stories260K.gguf"), ModelParams{Threads: threads, Kernels: testKernels(t)})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func storiesPrompt(t *testing.T, m *Model) []int32 {
	toks, err := m.Tokenize("Once upon a time, there was a little dog named Max. He liked to run", true, false)
	require.NoError(t, err)
	return toks
}

// greedyTokens prefills prompt and decodes n greedy tokens.
func greedyTokens(t testing.TB, s *Session, prompt []int32, n int) []int32 {
	vocab := s.Model().Info().VocabSize
	logits := make([]float32, vocab)
	require.NoError(t, s.Prefill(prompt, logits))
	var out []int32
	for len(out) < n {
		tok := argmax(logits)
		out = append(out, tok)
		require.NoError(t, s.Decode(tok, logits))
	}
	return out
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "absent.gguf"), ModelParams{})
	assert.ErrorIs(t, err, ErrIO)

	bad := filepath.Join(t.TempDir(), "bad.gguf")
	require.NoError(t, os.WriteFile(bad, []byte("not a gguf file at all"), 0o644))
	_, err = Open(bad, ModelParams{})
	assert.ErrorIs(t, err, ErrBadFile)

	// A vocabulary-only file has no tensors: the error names the first one.
	_, err = Open(shareddata.Path(t, "vocab/ggml-vocab-llama-spm.gguf"), ModelParams{})
	if assert.Error(t, err) {
		assert.True(t, errors.Is(err, ErrBadFile) || errors.Is(err, ErrUnsupported), "%v", err)
	}
}

func TestInfo(t *testing.T) {
	m := openStories(t, 1)
	info := m.Info()
	assert.Equal(t, "llama", info.Arch)
	assert.Equal(t, 512, info.VocabSize)
	assert.Equal(t, 64, info.EmbeddingSize)
	assert.Equal(t, 5, info.Layers)
	assert.Equal(t, 8, info.Heads)
	assert.Equal(t, 4, info.KVHeads)
	assert.Equal(t, 2048, info.ContextLength)
	assert.EqualValues(t, 1, info.BOS)
	assert.EqualValues(t, 2, info.EOS)
}

// TestPrefillMatchesDecode checks the batched path (MatMul, causal
// attention over the batch, chunking) against token-by-token decoding.
func TestPrefillMatchesDecode(t *testing.T) {
	m := openStories(t, 2)
	vocab := m.Info().VocabSize
	var prompt []int32
	for len(prompt) < 150 { // more than one chunk of maxBatch
		prompt = append(prompt, storiesPrompt(t, m)...)
	}
	a, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer a.Close()
	all := make([]float32, len(prompt)*vocab)
	require.NoError(t, a.PrefillAll(prompt, all))

	b, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer b.Close()
	logits := make([]float32, vocab)
	for i, tok := range prompt {
		require.NoError(t, b.Decode(tok, logits))
		row := all[i*vocab : (i+1)*vocab]
		for j := range logits {
			require.InDelta(t, row[j], logits[j], 1e-3, "position %d token %d", i, j)
		}
	}
	// Prefill's last-position logits equal PrefillAll's last row.
	c, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Prefill(prompt, logits))
	assert.Equal(t, all[(len(prompt)-1)*vocab:], logits)
	assert.Equal(t, len(prompt), c.Pos())

	// PrefillFrom gives the same rows, for a start inside the second chunk.
	d, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer d.Close()
	from := maxBatch + 7
	part := make([]float32, (len(prompt)-from)*vocab)
	require.NoError(t, d.PrefillFrom(prompt, from, part))
	assert.Equal(t, all[from*vocab:], part)
}

func TestRewindMatchesFreshSession(t *testing.T) {
	m := openStories(t, 2)
	vocab := m.Info().VocabSize
	prompt := storiesPrompt(t, m)
	other, err := m.Tokenize("The cat sat on the mat and", true, false)
	require.NoError(t, err)

	s, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, vocab)
	require.NoError(t, s.Prefill(prompt, logits))
	greedyTokens(t, s, prompt[len(prompt)-1:], 5) // move on a bit
	require.NoError(t, s.Rewind(3))
	assert.Equal(t, 3, s.Pos())
	require.NoError(t, s.Prefill(other[3:], logits))

	f, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer f.Close()
	fresh := make([]float32, vocab)
	require.NoError(t, f.Prefill(prompt[:3], fresh)) // what s kept
	require.NoError(t, f.Prefill(other[3:], fresh))
	assert.Equal(t, fresh, logits)

	assert.ErrorIs(t, s.Rewind(-1), ErrInvalidArgument)
	assert.ErrorIs(t, s.Rewind(s.Pos()+1), ErrInvalidArgument)
}

func TestContextFull(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 8})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 403, 407, 261, 378, 432}, logits))
	require.NoError(t, s.Decode(383, logits))
	require.NoError(t, s.Decode(286, logits))
	assert.Equal(t, 8, s.Pos())
	err = s.Decode(261, logits)
	assert.ErrorIs(t, err, ErrContextFull)
	assert.Equal(t, 8, s.Pos())
	assert.ErrorIs(t, s.Prefill([]int32{1, 2}, logits), ErrContextFull)

	s2, err := m.NewSession(SessionParams{NCtx: 4})
	require.NoError(t, err)
	defer s2.Close()
	assert.ErrorIs(t, s2.Prefill([]int32{1, 403, 407, 261, 378}, logits), ErrContextFull)
	assert.Equal(t, 0, s2.Pos())
}

func TestKVCacheGrows(t *testing.T) {
	m := openStories(t, 2)
	s, err := m.NewSession(SessionParams{NCtx: 1500})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, initialPositions, s.cache.cap)
	prompt := make([]int32, 0, 1200)
	for len(prompt) < 1200 {
		prompt = append(prompt, storiesPrompt(t, m)[1:]...)
	}
	prompt = prompt[:1200]
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill(prompt[:600], logits))
	assert.Equal(t, 1024, s.cache.cap)
	require.NoError(t, s.Prefill(prompt[600:], logits))
	assert.Equal(t, 1500, s.cache.cap)

	// The grown cache kept the earlier positions: same logits as one pass.
	f, err := m.NewSession(SessionParams{NCtx: 1500})
	require.NoError(t, err)
	defer f.Close()
	fresh := make([]float32, len(logits))
	require.NoError(t, f.Prefill(prompt, fresh))
	assert.Equal(t, fresh, logits)
}

func TestBadArguments(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 32})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	assert.ErrorIs(t, s.Prefill(nil, logits), ErrInvalidArgument)
	assert.ErrorIs(t, s.Prefill([]int32{1, 9999}, logits), ErrInvalidArgument)
	assert.ErrorIs(t, s.Prefill([]int32{-1}, logits), ErrInvalidArgument)
	assert.ErrorIs(t, s.Decode(1, logits[:10]), ErrInvalidArgument)
	assert.ErrorIs(t, s.PrefillAll([]int32{1, 2}, logits), ErrInvalidArgument)
	assert.Equal(t, 0, s.Pos())
	require.NoError(t, s.Prefill([]int32{1}, nil)) // nil logits: cache only
	assert.Equal(t, 1, s.Pos())
	_, err = m.NewSession(SessionParams{NCtx: -1})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = m.NewSession(SessionParams{NCtx: 1 << 30})
	assert.ErrorIs(t, err, ErrOutOfMemory)
	assert.ErrorIs(t, m.Close(), ErrBusy) // a session is open
}

func TestCancelFromAnotherGoroutine(t *testing.T) {
	m := openStories(t, 2)
	s, err := m.NewSession(SessionParams{NCtx: 2048})
	require.NoError(t, err)
	defer s.Close()
	prompt := make([]int32, 0, 2000)
	for len(prompt) < 2000 {
		prompt = append(prompt, storiesPrompt(t, m)[1:]...)
	}
	prompt = prompt[:2000]
	logits := make([]float32, m.Info().VocabSize)
	done := make(chan error, 1)
	go func() { done <- s.Prefill(prompt, logits) }()
	// One Cancel, sent once the call runs, stops it.
	for start := time.Now(); !s.busy.Load(); time.Sleep(50 * time.Microsecond) {
		require.Less(t, time.Since(start), 10*time.Second, "prefill did not start")
	}
	s.Cancel()
	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("prefill did not return after Cancel")
	}
	require.ErrorIs(t, err2, ErrCancelled)
	assert.Equal(t, 0, s.Pos(), "a cancelled prefill leaves the position unchanged")
	// The session is usable afterwards.
	require.NoError(t, s.Prefill(prompt[:5], logits))
}

// A Cancel is one request the session owns: it stops the running call or,
// when none runs, the next one, and the call that returns ErrCancelled
// consumes it (two Cancels make one request). Before, a Cancel landing
// just before a call started was cleared by the call's start and lost.
func TestCancelIsOneRequest(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	logits := make([]float32, m.Info().VocabSize)
	require.NoError(t, s.Prefill([]int32{1, 5}, logits))
	s.Cancel()
	s.Cancel()
	require.ErrorIs(t, s.Decode(7, logits), ErrCancelled, "a Cancel before the call cancels it")
	assert.Equal(t, 2, s.Pos(), "the cancelled call left no trace")
	require.NoError(t, s.Decode(7, logits), "the request was consumed")
	s.Cancel()
	require.ErrorIs(t, s.Prefill([]int32{3, 4}, logits), ErrCancelled)
	assert.Equal(t, 3, s.Pos())
	require.NoError(t, s.Prefill([]int32{3, 4}, logits))
	assert.Equal(t, 5, s.Pos())
}

func TestBusySession(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{})
	require.NoError(t, err)
	defer s.Close()
	require.True(t, s.busy.CompareAndSwap(false, true)) // as if a call were running
	logits := make([]float32, m.Info().VocabSize)
	assert.ErrorIs(t, s.Decode(1, logits), ErrBusy)
	assert.ErrorIs(t, s.Prefill([]int32{1}, logits), ErrBusy)
	assert.ErrorIs(t, s.Rewind(0), ErrBusy)
	s.busy.Store(false)
	assert.NoError(t, s.Decode(1, logits))
}

// TestConcurrentSessions runs sessions on one model from several goroutines
// (shared pool, and one with its own pool) and compares with sequential runs.
func TestConcurrentSessions(t *testing.T) {
	m := openStories(t, 2)
	prompts := []string{"Once upon a time", "Lily wanted to play", "The little dog", "One day, a big bear"}
	want := make([][]int32, len(prompts))
	toks := make([][]int32, len(prompts))
	for i, p := range prompts {
		var err error
		toks[i], err = m.Tokenize(p, true, false)
		require.NoError(t, err)
		s, err := m.NewSession(SessionParams{NCtx: 64})
		require.NoError(t, err)
		want[i] = greedyTokens(t, s, toks[i], 12)
		s.Close()
	}
	var wg sync.WaitGroup
	got := make([][]int32, len(prompts))
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := SessionParams{NCtx: 64}
			if i == 3 {
				p.Threads = 1 // a pool of its own
			}
			s, err := m.NewSession(p)
			if !assert.NoError(t, err) {
				return
			}
			defer s.Close()
			got[i] = greedyTokens(t, s, toks[i], 12)
		}()
	}
	wg.Wait()
	assert.Equal(t, want, got)
}

// TestConcurrentUseOfOneSession: two goroutines on one session; one of
// them may get ErrBusy, none may race.
func TestConcurrentUseOfOneSession(t *testing.T) {
	m := openStories(t, 2)
	s, err := m.NewSession(SessionParams{NCtx: 256})
	require.NoError(t, err)
	defer s.Close()
	var wg sync.WaitGroup
	var busy, ok int32
	var mu sync.Mutex
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logits := make([]float32, m.Info().VocabSize)
			for i := 0; i < 20; i++ {
				err := s.Decode(int32(300+i), logits)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrBusy):
					busy++
				default:
					t.Errorf("unexpected error %v", err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 40, ok+busy)
	assert.Equal(t, int(ok), s.Pos())
}

func TestDecodeAllocatesNothing(t *testing.T) {
	for _, kvf32 := range []bool{false, true} {
		m := openStories(t, 2)
		s, err := m.NewSession(SessionParams{NCtx: 512, KVF32: kvf32})
		require.NoError(t, err)
		logits := make([]float32, m.Info().VocabSize)
		require.NoError(t, s.Prefill([]int32{1, 403, 407}, logits))
		tok := int32(261)
		allocs := testing.AllocsPerRun(50, func() {
			if err := s.Decode(tok, logits); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "kvf32=%v", kvf32)
		s.Close()
	}
}

func TestGreedyF16AndF32CacheAgreeOnStories(t *testing.T) {
	m := openStories(t, 2)
	prompt := storiesPrompt(t, m)
	a, err := m.NewSession(SessionParams{NCtx: 128})
	require.NoError(t, err)
	defer a.Close()
	b, err := m.NewSession(SessionParams{NCtx: 128, KVF32: true})
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, greedyTokens(t, a, prompt, 20), greedyTokens(t, b, prompt, 20))
}

// TestTruncatedMappingIsIOError truncates the model file under a loaded
// model: touching the vanished pages raises SIGBUS, which must come back
// as ErrIO from the pool's workers and from the calling goroutine alike.
func TestTruncatedMappingIsIOError(t *testing.T) {
	src, err := os.ReadFile(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "stories.gguf")
	require.NoError(t, os.WriteFile(path, src, 0o644))
	for _, threads := range []int{1, 2} {
		m, err := Open(path, ModelParams{Threads: threads})
		require.NoError(t, err)
		s, err := m.NewSession(SessionParams{NCtx: 64})
		require.NoError(t, err)
		require.NoError(t, os.Truncate(path, 4096))
		logits := make([]float32, m.Info().VocabSize)
		err = s.Prefill([]int32{1, 403, 407}, logits)
		require.Error(t, err)
		assert.ErrorIs(t, err, ErrIO, "threads %d: %v", threads, err)
		s.Close()
		require.NoError(t, m.Close())
		require.NoError(t, os.WriteFile(path, src, 0o644))
	}
}
