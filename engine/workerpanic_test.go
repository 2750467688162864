package engine

import (
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A panic on a pool worker goroutine (armed by ModelParams.WorkerPanic,
// once per pool) comes back from Prefill as ErrInternal, and the session and
// model stay usable.
func TestWorkerPanicIsInternal(t *testing.T) {
	path := shareddata.Path(t, "models/stories260K.gguf")
	m, err := Open(path, ModelParams{Threads: 2, WorkerPanic: "a test panic on a worker"})
	require.NoError(t, err)
	defer m.Close()
	s, err := m.NewSession(SessionParams{NCtx: 64})
	require.NoError(t, err)
	defer s.Close()
	toks, err := m.Tokenize("Once upon a time", true, false)
	require.NoError(t, err)
	logits := make([]float32, m.Info().VocabSize)
	err = s.Prefill(toks, logits)
	require.ErrorIs(t, err, ErrInternal)
	assert.Contains(t, err.Error(), "a test panic on a worker")
	assert.Contains(t, err.Error(), "prefill")
	assert.Equal(t, 0, s.Pos(), "a failed prefill leaves the position")
	require.NoError(t, s.Prefill(toks, logits), "the pool works after the panic")
	assert.Equal(t, len(toks), s.Pos())
}
