package sample

import (
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cachedVocab is fakeVocab with a breaker cache, counting the token texts
// read (each resolution reads every token's).
type cachedVocab struct {
	fakeVocab
	cache *BreakerCache
	reads *atomic.Int64
}

func (v cachedVocab) TokenText(id int32) []byte {
	v.reads.Add(1)
	return v.fakeVocab.TokenText(id)
}

func (v cachedVocab) DRYBreakerCache() *BreakerCache { return v.cache }

func dryParams(breakers ...string) Params {
	return Params{DRYMultiplier: 1, DRYBase: 2, DRYPenaltyLastN: -1, DRYSequenceBreakers: breakers}
}

// TestDRYBreakerCacheReuses: a second sampler with the same breakers takes
// the first one's resolution (no token text read, the same map), which
// equals what an uncached vocabulary resolves; another list is resolved
// anew.
func TestDRYBreakerCacheReuses(t *testing.T) {
	words := fakeVocab{"a", "b", "\n", "x\n", "Q", "Qu", "ote", "Quo", "te", "e", "u"}
	v := cachedVocab{words, NewBreakerCache(4), new(atomic.Int64)}

	first := mustNew(t, dryParams("\n", "Quote"))
	require.NoError(t, first.SetVocab(v))
	readsFirst := v.reads.Load()
	require.Positive(t, readsFirst)

	second := mustNew(t, dryParams("\n", "Quote"))
	require.NoError(t, second.SetVocab(v))
	assert.Equal(t, readsFirst, v.reads.Load(), "the second sampler resolved again")
	assert.Equal(t, reflect.ValueOf(first.dry.breakers).Pointer(), reflect.ValueOf(second.dry.breakers).Pointer(), "not the cached resolution")
	assert.False(t, second.NeedsVocab())

	plain := mustNew(t, dryParams("\n", "Quote"))
	require.NoError(t, plain.SetVocab(words))
	assert.Equal(t, plain.dry.breakers, second.dry.breakers)

	other := mustNew(t, dryParams("\n"))
	require.NoError(t, other.SetVocab(v))
	assert.Greater(t, v.reads.Load(), readsFirst, "another list shares a resolution")
	assert.NotEqual(t, other.dry.breakers, second.dry.breakers)
	assert.Equal(t, 2, v.cache.Len())
}

// TestDRYBreakerCacheBounded: the cache holds at most its capacity, the
// least recently used list leaving first.
func TestDRYBreakerCacheBounded(t *testing.T) {
	v := cachedVocab{fakeVocab{"a", "b", "c", "d"}, NewBreakerCache(2), new(atomic.Int64)}
	resolve := func(b string) int64 {
		before := v.reads.Load()
		require.NoError(t, mustNew(t, dryParams(b)).SetVocab(v))
		return v.reads.Load() - before
	}
	assert.Positive(t, resolve("a"))
	assert.Positive(t, resolve("b"))
	assert.Zero(t, resolve("a"), "a is held")
	assert.Positive(t, resolve("c"), "c pushes out b, the least recently used")
	assert.Equal(t, 2, v.cache.Len())
	assert.Zero(t, resolve("a"), "a stays")
	assert.Positive(t, resolve("b"), "b was pushed out")
}

// TestDRYBreakerKeys: lists that differ give different keys, also when
// their concatenations agree; breakers longer than resolution reads share
// a key with their cut.
func TestDRYBreakerKeys(t *testing.T) {
	assert.NotEqual(t, breakerKey([]string{"ab"}), breakerKey([]string{"a", "b"}))
	assert.NotEqual(t, breakerKey([]string{"1:a"}), breakerKey([]string{"1", "a"}))
	long := string(make([]byte, maxBreakerBytes+5))
	assert.Equal(t, breakerKey([]string{long[:maxBreakerBytes]}), breakerKey([]string{long}))
}

// TestDRYBreakerCacheConcurrent: samplers resolving at once (run with
// -race) end up with equal resolutions and one cache entry.
func TestDRYBreakerCacheConcurrent(t *testing.T) {
	v := cachedVocab{fakeVocab{"a", "b", "\n", "x\n", "Q", "Qu", "ote", "u"}, NewBreakerCache(4), new(atomic.Int64)}
	samplers := make([]*Sampler, 8)
	var wg sync.WaitGroup
	for i := range samplers {
		samplers[i] = mustNew(t, dryParams("\n", "Quote"))
		wg.Add(1)
		go func(s *Sampler) {
			defer wg.Done()
			assert.NoError(t, s.SetVocab(v))
		}(samplers[i])
	}
	wg.Wait()
	for _, s := range samplers[1:] {
		assert.Equal(t, samplers[0].dry.breakers, s.dry.breakers)
	}
	assert.Equal(t, 1, v.cache.Len())
}
