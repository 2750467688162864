package sample

import (
	"strconv"
	"strings"
	"sync"
)

// BreakerCache keeps DRY sequence breakers resolved against one
// vocabulary, keyed by the breaker list, so that the samplers made for one
// model share one resolution: resolving reads every token's text (about a
// millisecond on a 50k-token vocabulary), which would otherwise be paid by
// every new sampler. It holds the most recently used lists, at most its
// capacity; it is safe for concurrent use.
//
// A Vocab that also has a method DRYBreakerCache() *BreakerCache has
// SetVocab look there first.
type BreakerCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]breakerMap
	order   []string // keys, least recently used first
}

// breakerMap is a resolution: head token -> tails (empty: a one-token
// breaker). It is never written after it is made, so samplers share it.
type breakerMap = map[int32][][]int32

// NewBreakerCache makes a cache of at most n breaker lists (at least 1).
func NewBreakerCache(n int) *BreakerCache {
	return &BreakerCache{max: max(n, 1), entries: map[string]breakerMap{}}
}

// Len is the number of breaker lists held.
func (c *BreakerCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// breakerKey is the cache key of a breaker list: each breaker as it is
// resolved (cut to maxBreakerBytes), length-prefixed so that no two lists
// share a key.
func breakerKey(breakers []string) string {
	var b strings.Builder
	for _, s := range breakers {
		if len(s) > maxBreakerBytes {
			s = s[:maxBreakerBytes]
		}
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

func (c *BreakerCache) get(key string) (breakerMap, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	br, ok := c.entries[key]
	if ok {
		c.touch(key)
	}
	return br, ok
}

func (c *BreakerCache) put(key string, br breakerMap) breakerMap {
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.entries[key]; ok {
		// Another sampler resolved the same list meanwhile: keep one.
		c.touch(key)
		return have
	}
	if len(c.entries) >= c.max {
		delete(c.entries, c.order[0])
		c.order = append(c.order[:0], c.order[1:]...)
	}
	c.entries[key] = br
	c.order = append(c.order, key)
	return br
}

// touch moves key to the most recently used end of the order.
func (c *BreakerCache) touch(key string) {
	for i, k := range c.order {
		if k == key {
			copy(c.order[i:], c.order[i+1:])
			c.order[len(c.order)-1] = key
			return
		}
	}
}
