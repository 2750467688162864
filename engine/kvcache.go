package engine

import (
	"fmt"
	"slices"
	"unsafe"
)

// kvCache holds every layer's keys and values. Keys are position-major:
// the row of position j is the layer's kvDim values (all KV heads; a
// model whose layers differ in shape has a width per layer, and its
// layers that share another's cache have none of their own). Values are stored
// transposed, as ggml does without flash attention: row i (KV head g,
// dimension d, i = g*headDim+d) holds that value for every position, with a
// stride of cap, so the attention output is one dot product per dimension
// between the softmax weights and a contiguous row. The cache starts small
// and doubles up to the session's context size, so short conversations on
// long-context models do not reserve gigabytes.
//
// A Q8_0 cache (q8) keeps keys and values both position-major, each
// position's row of kvDim values in Q8_0 blocks of 32 (a block never spans
// two KV heads: the head dimension is a multiple of 32), as llama.cpp's
// flash attention reads a quantized cache.
//
// The arrays live in anonymous mappings outside the Go heap: the collector
// sizes its heap goal from the live heap, so a cache of hundreds of MiB on
// the heap would let as much garbage accumulate again before a collection,
// and the arrays a doubling replaces would linger until then. free (at
// Session.Close, or by the session's cleanup) unmaps them.
type kvCache struct {
	f32   bool
	q8    bool
	rowQ8 int // q8: bytes of one position's row (kvDim values)
	// q8: the Walsh-Hadamard rotation sizes of keys (and queries) and of
	// values, 0 for none (see attn_q8.go)
	rotK, rotV int
	nLayer     int
	dims       []int // per layer, its width (kvDim)
	cap        int   // positions allocated
	max        int   // positions allowed (the session's NCtx)
	k16, v16   [][]uint16
	k32, v32   [][]float32
	kq8, vq8   [][]byte
	maps       [][]byte // the mappings behind the arrays above
	// unused marks the layers that never store keys and values (a hybrid
	// model's recurrent layers): their mappings stay untouched, never
	// copied, so they cost address space only.
	unused []bool
}

// mapKV returns a zeroed anonymous mapping of n bytes (at least one page).
func mapKV(n int) ([]byte, error) {
	return anonMap(max(n, 1))
}

// mapped views b as elements of type T.
func mapped[T uint16 | float32](b []byte, n int) []T {
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// free unmaps every array; the cache must not be used afterwards.
func (c *kvCache) free() {
	unmapAll(c.maps)
	c.maps = nil
	c.k16, c.v16, c.k32, c.v32, c.kq8, c.vq8 = nil, nil, nil, nil, nil, nil
}

func unmapAll(maps [][]byte) {
	for _, b := range maps {
		_ = unmap(b)
	}
}

// initialPositions is the capacity a cache starts with (or NCtx if smaller).
const initialPositions = 512

// kvKind is a KV cache's element type.
type kvKind int

const (
	kvF16 kvKind = iota
	kvF32
	kvQ8
)

// q8Block is the size of a Q8_0 block: an f16 scale and 32 int8 values.
const q8Block = 34

// newKVCache is a cache of nLayer layers of kvDim values per position.
func newKVCache(nLayer, kvDim, nCtx int, kind kvKind) (*kvCache, error) {
	dims := make([]int, nLayer)
	for i := range dims {
		dims[i] = kvDim
	}
	return newKVCacheDims(dims, nCtx, kind)
}

// newKVCacheDims is a cache of one layer per entry of dims, each of that
// many values per position. A Q8_0 cache needs them all equal.
func newKVCacheDims(dims []int, nCtx int, kind kvKind) (*kvCache, error) {
	nLayer := len(dims)
	c := &kvCache{f32: kind == kvF32, q8: kind == kvQ8, nLayer: nLayer, dims: dims, max: nCtx}
	switch kind {
	case kvF32:
		c.k32, c.v32 = make([][]float32, nLayer), make([][]float32, nLayer)
	case kvQ8:
		kvDim := dims[0]
		if kvDim%32 != 0 || slices.ContainsFunc(dims, func(d int) bool { return d != kvDim }) {
			return nil, fmt.Errorf("%w: a Q8_0 KV cache needs rows of whole blocks of 32, the same in every layer, got %v values", ErrUnsupported, dims)
		}
		c.rowQ8 = kvDim / 32 * q8Block
		c.kq8, c.vq8 = make([][]byte, nLayer), make([][]byte, nLayer)
	default:
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
// On failure the cache is unchanged.
func (c *kvCache) grow(newCap, used int) (err error) {
	used = min(used, c.cap)
	maps := make([][]byte, 0, 2*c.nLayer)
	for i := range 2 * c.nLayer {
		bytes := newCap * c.dims[i/2] * c.elemBytes()
		if c.q8 {
			bytes = newCap * c.rowQ8
		}
		b, err := mapKV(bytes)
		if err != nil {
			unmapAll(maps)
			return fmt.Errorf("%w: KV cache of %d positions x %d values x %d layers: %w", ErrOutOfMemory, newCap, c.dims[i/2], c.nLayer, err)
		}
		maps = append(maps, b)
	}
	for il := 0; il < c.nLayer; il++ {
		kvDim := c.dims[il]
		n, keep := newCap*kvDim, used*kvDim
		kb, vb := maps[2*il], maps[2*il+1]
		used, keep := used, keep
		if c.isUnused(il) {
			used, keep = 0, 0 // nothing stored: nothing to copy
		}
		if c.q8 {
			if c.kq8[il] != nil {
				copy(kb, c.kq8[il][:used*c.rowQ8])
				copy(vb, c.vq8[il][:used*c.rowQ8])
			}
			c.kq8[il], c.vq8[il] = kb, vb
			continue
		}
		if c.f32 {
			k, v := mapped[float32](kb, n), mapped[float32](vb, n)
			if c.k32[il] != nil {
				copy(k, c.k32[il][:min(keep, len(c.k32[il]))])
				for i := 0; i < kvDim && used > 0; i++ {
					copy(v[i*newCap:i*newCap+used], c.v32[il][i*c.cap:i*c.cap+used])
				}
			}
			c.k32[il], c.v32[il] = k, v
		} else {
			k, v := mapped[uint16](kb, n), mapped[uint16](vb, n)
			if c.k16[il] != nil {
				copy(k, c.k16[il][:min(keep, len(c.k16[il]))])
				for i := 0; i < kvDim && used > 0; i++ {
					copy(v[i*newCap:i*newCap+used], c.v16[il][i*c.cap:i*c.cap+used])
				}
			}
			c.k16[il], c.v16[il] = k, v
		}
	}
	unmapAll(c.maps)
	c.maps = maps
	c.cap = newCap
	return nil
}

// isUnused reports whether layer il never stores keys and values.
func (c *kvCache) isUnused(il int) bool { return il < len(c.unused) && c.unused[il] }

// elemBytes is the size of one cached value.
func (c *kvCache) elemBytes() int {
	if c.f32 {
		return 4
	}
	return 2
}

// keyBytes is layer il's keys of the first n positions, as bytes.
func (c *kvCache) keyBytes(il, n int) []byte {
	if c.q8 {
		return c.maps[2*il][:n*c.rowQ8]
	}
	return c.maps[2*il][:n*c.dims[il]*c.elemBytes()]
}

// layerChunks calls f with layer il's bytes for the first n positions in
// the saved-state order: the keys, then the values (one row per KV head
// dimension for f16 and f32, which store them transposed; position-major
// for Q8_0).
func (c *kvCache) layerChunks(il, n int, f func([]byte)) {
	f(c.keyBytes(il, n))
	if c.q8 {
		f(c.maps[2*il+1][:n*c.rowQ8])
		return
	}
	for i := 0; i < c.dims[il]; i++ {
		f(c.valueRowBytes(il, i, n))
	}
}

// valueRowBytes is value row i (one KV head's dimension) of layer il for
// the first n positions, as bytes.
func (c *kvCache) valueRowBytes(il, i, n int) []byte {
	e := c.elemBytes()
	off := c.vAt(i) * e
	return c.maps[2*il+1][off : off+n*e]
}

// totalDim is the sum of the layers' widths.
func (c *kvCache) totalDim() int {
	n := 0
	for _, d := range c.dims {
		n += d
	}
	return n
}

// copyFrom copies the first n positions of src, a cache of the same shape
// and element type, into c, which must already hold n positions. It costs
// what it copies: n positions of every layer.
func (c *kvCache) copyFrom(src *kvCache, n int) {
	for il := 0; il < c.nLayer; il++ {
		if c.isUnused(il) {
			continue
		}
		var chunks [][]byte
		src.layerChunks(il, n, func(b []byte) { chunks = append(chunks, b) })
		i := 0
		c.layerChunks(il, n, func(b []byte) { copy(b, chunks[i]); i++ })
	}
}
