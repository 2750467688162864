package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKVCacheOffHeap checks that the KV arrays are outside the Go heap (a
// 64 MiB cache does not grow the heap) and that growing keeps the used
// positions of keys and of the transposed values.
func TestKVCacheOffHeap(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		const nLayer, kvDim, nCtx = 4, 256, 16384
		heap0 := heapObjectBytes()
		kind := kvF16
		if f32 {
			kind = kvF32
		}
		c, err := newKVCache(nLayer, kvDim, nCtx, kind)
		require.NoError(t, err)
		require.NoError(t, c.ensure(nCtx, 0)) // 4 layers x 2 x 256 x 16384 x 2-4 bytes
		grown := heapObjectBytes() - heap0
		require.Less(t, grown, int64(4<<20), "f32=%v: the cache grew the Go heap by %d bytes", f32, grown)
		c.free()

		c, err = newKVCache(nLayer, kvDim, nCtx, kind)
		require.NoError(t, err)
		used := c.cap - 3
		val := func(il, i, pos int) float32 { return float32((il*7+i*3+pos)%251) - 125 }
		for il := 0; il < nLayer; il++ {
			for pos := 0; pos < used; pos++ {
				for i := 0; i < kvDim; i++ {
					if f32 {
						c.k32[il][pos*kvDim+i] = val(il, i, pos)
						c.v32[il][c.vAt(i)+pos] = -val(il, i, pos)
					} else {
						c.k16[il][pos*kvDim+i] = uint16(val(il, i, pos) + 1000)
						c.v16[il][c.vAt(i)+pos] = uint16(2000 - val(il, i, pos))
					}
				}
			}
		}
		oldCap := c.cap
		require.NoError(t, c.ensure(oldCap+1, used))
		require.Equal(t, 2*oldCap, c.cap)
		for il := 0; il < nLayer; il++ {
			for pos := 0; pos < used; pos++ {
				for i := 0; i < kvDim; i++ {
					if f32 {
						require.Equal(t, val(il, i, pos), c.k32[il][pos*kvDim+i])
						require.Equal(t, -val(il, i, pos), c.v32[il][c.vAt(i)+pos])
					} else {
						require.Equal(t, uint16(val(il, i, pos)+1000), c.k16[il][pos*kvDim+i])
						require.Equal(t, uint16(2000-val(il, i, pos)), c.v16[il][c.vAt(i)+pos])
					}
				}
			}
		}
		c.free()
		c.free() // a second free (Close, then the cleanup) is harmless
	}
}
