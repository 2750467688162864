package pool

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// PanicOnce makes worker goroutine 1 panic in its next task, once: Run
// reports it as a *PanicError with the option's value and the pool keeps
// working.
func TestDebugPanicWorker(t *testing.T) {
	const value = "a test panic on a pool worker"
	p := New(2, PanicOnce(value))
	defer p.Close()
	var calls atomic.Int32
	err := p.Run(func(i, n int) { calls.Add(1) })
	var pe *PanicError
	require.True(t, errors.As(err, &pe), "Run returned %v", err)
	assert.ErrorIs(t, err, ErrPanic)
	assert.Equal(t, value, pe.Value)
	assert.False(t, pe.Fault)
	assert.Equal(t, int32(1), calls.Load(), "the caller's share ran, worker 1's panicked")
	calls.Store(0)
	require.NoError(t, p.Run(func(i, n int) { calls.Add(1) }), "the hook fires once")
	assert.Equal(t, int32(2), calls.Load())
}

// Without the option nothing panics, whatever the environment says (the
// pool reads none); a one-thread pool has no worker share to panic.
func TestDebugPanicOff(t *testing.T) {
	t.Setenv("MOONLM_DEBUG_PANIC", "worker")
	p := New(2)
	defer p.Close()
	require.NoError(t, p.Run(func(i, n int) {}))
	one := New(1, PanicOnce("never"))
	defer one.Close()
	require.NoError(t, one.Run(func(i, n int) {}))
}
