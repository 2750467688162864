package engine

import (
	"fmt"
)

// kvCache holds every layer's keys and values. Keys are position-major:
// the row of position j is kvDim values (all KV heads). Values are stored
// transposed, as ggml does without flash attention: row i (KV head g,
// dimension d, i = g*headDim+d) holds that value for every position, with a
// stride of cap, so the attention output is one dot product per dimension
// between the softmax weights and a contiguous row. The cache starts small
// and doubles up to the session's context size, so short conversations on
// long-context models do not reserve gigabytes.
type kvCache struct {
	f32      bool
	nLayer   int
	kvDim    int
	cap      int // positions allocated
	max      int // positions allowed (the session's NCtx)
	k16, v16 [][]uint16
	k32, v32 [][]float32
}

// initialPositions is the capacity a cache starts with (or NCtx if smaller).
const initialPositions = 512

func newKVCache(nLayer, kvDim, nCtx int, f32 bool) (*kvCache, error) {
	c := &kvCache{f32: f32, nLayer: nLayer, kvDim: kvDim, max: nCtx}
	if f32 {
		c.k32, c.v32 = make([][]float32, nLayer), make([][]float32, nLayer)
	} else {
		c.k16, c.v16 = make([][]uint16, nLayer), make([][]uint16, nLayer)
	}
	if err := c.grow(min(initialPositions, nCtx), 0); err != nil {
		return nil, err
	}
	return c, nil
}

// ensure makes room for n positions, keeping the first used ones.
func (c *kvCache) ensure(n, used int) error {
	if n <= c.cap {
		return nil
	}
	if n > c.max {
		return fmt.Errorf("%w: %d positions needed, context is %d", ErrContextFull, n, c.max)
	}
	newCap := max(c.cap, 1)
	for newCap < n {
		newCap *= 2
	}
	return c.grow(min(newCap, c.max), used)
}

// vAt is the offset of value row i (KV head and dimension) in a layer.
func (c *kvCache) vAt(i int) int { return i * c.cap }

// grow reallocates every layer to newCap positions, copying the first used.
func (c *kvCache) grow(newCap, used int) (err error) {
	defer func() {
		// A failed allocation of a large cache is reported, not fatal,
		// where the runtime lets us see it.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: KV cache of %d positions x %d values x %d layers: %v", ErrOutOfMemory, newCap, c.kvDim, c.nLayer, r)
		}
	}()
	n := newCap * c.kvDim
	keep := used * c.kvDim
	used = min(used, c.cap)
	for il := 0; il < c.nLayer; il++ {
		if c.f32 {
			k, v := make([]float32, n), make([]float32, n)
			copy(k, c.k32[il][:min(keep, len(c.k32[il]))])
			for i := 0; i < c.kvDim && used > 0; i++ {
				copy(v[i*newCap:i*newCap+used], c.v32[il][i*c.cap:i*c.cap+used])
			}
			c.k32[il], c.v32[il] = k, v
		} else {
			k, v := make([]uint16, n), make([]uint16, n)
			copy(k, c.k16[il][:min(keep, len(c.k16[il]))])
			for i := 0; i < c.kvDim && used > 0; i++ {
				copy(v[i*newCap:i*newCap+used], c.v16[il][i*c.cap:i*c.cap+used])
			}
			c.k16[il], c.v16[il] = k, v
		}
	}
	c.cap = newCap
	return nil
}
