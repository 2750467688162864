package sample

import (
	"math"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A penalty window beyond MaxPenaltyLastN is refused, and the largest one
// allowed costs nothing until tokens fill it (INT32_MAX allocated 8 GiB
// up front, and aborted under an address-space limit).
func TestPenaltyWindowBoundedAndLazy(t *testing.T) {
	for _, n := range []int{MaxPenaltyLastN + 1, math.MaxInt32, math.MaxInt64} {
		_, err := New(Params{RepeatPenalty: 1.1, PenaltyLastN: n})
		require.ErrorIs(t, err, ErrInvalidParams, "window %d", n)
	}
	for _, n := range []int{MaxPenaltyLastN, -1} {
		runtime.GC()
		before := heapAllocs()
		s, err := New(Params{RepeatPenalty: 2, PenaltyLastN: n})
		require.NoError(t, err)
		assert.Less(t, heapAllocs()-before, uint64(64<<10), "New with window %d", n)
		for i := 0; i < 10; i++ {
			s.Accept(int32(i % 3))
		}
		// The penalty applies to what was accepted: token 0 was seen, so
		// its logit 2 is halved below token 3's 1.5.
		assert.Equal(t, int32(3), s.Sample([]float32{2, -5, -5, 1.5}))
	}
}

// A window that has filled keeps the latest tokens: with a window of 2,
// after 0, 0, 1, 2 only 1 and 2 are penalized.
func TestPenaltyWindowRing(t *testing.T) {
	s, err := New(Params{RepeatPenalty: 100, PenaltyLastN: 2})
	require.NoError(t, err)
	for _, tok := range []int32{0, 0, 1, 2} {
		s.Accept(tok)
	}
	assert.Equal(t, int32(0), s.Sample([]float32{1, 1.5, 1.5}))
	s.Reset()
	assert.Equal(t, int32(1), s.Sample([]float32{1, 1.5, 1.5}))
}
