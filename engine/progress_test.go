package engine

import (
	"errors"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

func TestOpenProgressRisesToOne(t *testing.T) {
	path := shareddata.Path(t, "models/stories260K.gguf")
	for _, pack := range []PackMode{PackOn, PackOff} {
		var got []float32
		m, err := Open(path, ModelParams{Threads: 1, Pack: pack, Progress: func(f float32) bool {
			got = append(got, f)
			return true
		}})
		require.NoError(t, err)
		require.NoError(t, m.Close())
		require.GreaterOrEqual(t, len(got), 3, "pack %v: %v", pack, got)
		require.Equal(t, float32(0), got[0])
		require.Equal(t, float32(1), got[len(got)-1])
		for i := 1; i < len(got); i++ {
			require.Greater(t, got[i], got[i-1], "pack %v: not rising: %v", pack, got)
		}
		require.LessOrEqual(t, len(got), int(1/progressStep)+2, "too many calls: %v", got)
	}
}

func TestOpenProgressCancels(t *testing.T) {
	path := shareddata.Path(t, "models/stories260K.gguf")
	// Count the calls of a whole open, then stop at each one in turn.
	n := 0
	m, err := Open(path, ModelParams{Threads: 1, Pack: PackOn, Progress: func(float32) bool { n++; return true }})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	for stop := 1; stop <= n; stop++ {
		calls := 0
		m, err := Open(path, ModelParams{Threads: 1, Pack: PackOn, Progress: func(float32) bool {
			calls++
			return calls < stop
		}})
		require.True(t, m == nil, "stop at call %d: got a model", stop)
		require.True(t, errors.Is(err, ErrCancelled), "stop at call %d: %v", stop, err)
		require.Equal(t, stop, calls, "no call after the one that stopped the open")
	}
}

func TestProgressHoldsBackSmallSteps(t *testing.T) {
	var got []float32
	p := &progress{fn: func(f float32) bool { got = append(got, f); return true }}
	for _, f := range []float32{0, 0.001, 0.02, 0.015, 0.025, 0.5, 2} {
		require.NoError(t, p.report(f))
	}
	require.Equal(t, []float32{0, 0.02, 0.5, 1}, got)
	var nilProgress *progress
	require.NoError(t, nilProgress.report(0.5))
}

// A packed model: most of the fractions come from packing, and stopping
// there leaves nothing behind.
func TestOpenProgressWhilePacking(t *testing.T) {
	path := smolLM2Path(t)
	var got []float32
	m, err := Open(path, ModelParams{Threads: 1, Pack: PackOn, Progress: func(f float32) bool {
		got = append(got, f)
		return true
	}})
	require.NoError(t, err)
	st := m.OpenStats()
	require.NoError(t, m.Close())
	require.Equal(t, PackSourcePacked, st.PackSource)
	var packing int
	for i, f := range got {
		if f > progressTensors && f < 1 {
			packing++
		}
		if i > 0 {
			require.Greater(t, f, got[i-1])
		}
	}
	require.Greater(t, packing, 10, "fractions while packing: %v", got)
	require.LessOrEqual(t, len(got), int(1/progressStep)+2)
	require.Equal(t, float32(1), got[len(got)-1])

	calls := 0
	m, err = Open(path, ModelParams{Threads: 1, Pack: PackOn, Progress: func(f float32) bool {
		calls++
		return f < 0.5
	}})
	require.True(t, m == nil, "a cancelled open returned a model")
	require.ErrorIs(t, err, ErrCancelled)
}
