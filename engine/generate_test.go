package engine

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerateGreedyGolden(t *testing.T) {
	m := openStories(t, 2)
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	s, err := m.NewSession(SessionParams{NCtx: 512})
	require.NoError(t, err)
	defer s.Close()
	var sb strings.Builder
	st, err := s.Generate([]int32{m.Info().BOS}, GenerateParams{MaxTokens: 100}, func(p string) bool {
		sb.WriteString(p)
		return true
	})
	require.NoError(t, err)
	assert.Equal(t, StopMaxTokens, st.Reason)
	assert.Equal(t, 100, st.Tokens)
	assert.Len(t, st.Generated, 100)
	assert.Equal(t, 1+99, s.Pos(), "all generated tokens but the last are cached")
	text := strings.TrimPrefix(sb.String(), " ")
	assert.True(t, strings.HasPrefix(string(golden), text), "generated %q", text)
	assert.Equal(t, m.Detokenize(append([]int32{m.Info().BOS}, st.Generated...)), sb.String())
}

func TestGenerateStopStringAndCallback(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 512})
	require.NoError(t, err)
	defer s.Close()
	var sb strings.Builder
	st, err := s.Generate([]int32{1}, GenerateParams{MaxTokens: 200, Stop: []string{"Lily"}}, func(p string) bool {
		sb.WriteString(p)
		return true
	})
	require.NoError(t, err)
	assert.Equal(t, StopString, st.Reason)
	assert.Equal(t, " Once upon a time, there was a little girl named ", sb.String())

	require.NoError(t, s.Rewind(0))
	n := 0
	st, err = s.Generate([]int32{1}, GenerateParams{}, func(p string) bool {
		n++
		return n < 3
	})
	require.NoError(t, err)
	assert.Equal(t, StopCallback, st.Reason)
	assert.Equal(t, 3, n)
}

func TestGenerateSeedReproducible(t *testing.T) {
	m := openStories(t, 1)
	run := func(seed uint64) []int32 {
		s, err := m.NewSession(SessionParams{NCtx: 256})
		require.NoError(t, err)
		defer s.Close()
		st, err := s.Generate([]int32{1, 403}, GenerateParams{MaxTokens: 30, Sampler: sample.Params{Temperature: 1, TopK: 40, TopP: 0.95, Seed: seed}}, nil)
		require.NoError(t, err)
		return st.Generated
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c, "different seeds should (almost surely) differ over 30 tokens at temperature 1")
}

func TestGenerateContextFull(t *testing.T) {
	m := openStories(t, 1)
	s, err := m.NewSession(SessionParams{NCtx: 10})
	require.NoError(t, err)
	defer s.Close()
	st, err := s.Generate([]int32{1, 403, 407}, GenerateParams{}, nil)
	require.NoError(t, err)
	assert.Equal(t, StopContext, st.Reason)
	assert.Equal(t, 10, s.Pos())
	assert.Equal(t, 8, st.Tokens)
	_, err = s.Generate([]int32{1}, GenerateParams{}, nil)
	assert.ErrorIs(t, err, ErrContextFull)
}

// TestGenerateCancelAndCloseWhileRunning cancels a generation from another
// goroutine, then closes a session while it generates. The first emitted
// piece waits until the cancel (or close) was issued, so the generation
// cannot finish first.
func TestGenerateCancelAndCloseWhileRunning(t *testing.T) {
	m := openStories(t, 2)
	s, err := m.NewSession(SessionParams{NCtx: 2048})
	require.NoError(t, err)
	run := func(seed uint64, issued func() bool) chan error {
		started := make(chan struct{})
		done := make(chan error, 1)
		first := true
		go func() {
			_, err := s.Generate([]int32{1}, GenerateParams{Sampler: sample.Params{Temperature: 1, Seed: seed}}, func(string) bool {
				if first {
					first = false
					close(started)
					for !issued() {
						time.Sleep(50 * time.Microsecond)
					}
				}
				return true
			})
			done <- err
		}()
		<-started
		return done
	}

	done := run(1, func() bool { return s.cancel.Load() })
	s.Cancel()
	assert.ErrorIs(t, <-done, ErrCancelled)

	done = run(2, func() bool { return s.closed.Load() && s.cancel.Load() })
	s.Close() // cancels the running call and waits for it
	assert.ErrorIs(t, <-done, ErrCancelled)
	_, err = s.Generate([]int32{1}, GenerateParams{}, nil)
	assert.ErrorIs(t, err, ErrInvalidArgument, "a closed session refuses calls")
}
