package engine

// PackMode says whether Open repacks weight matrices into a kernel's packed
// layout (interleaved rows that the kernels read faster than GGUF blocks).
type PackMode int

const (
	// PackDefault packs every matrix whose type has a packed layout, unless
	// the environment sets MOONLM_PACK=0.
	PackDefault PackMode = iota
	// PackOn packs wherever a layout exists, whatever the environment says.
	PackOn
	// PackOff keeps every matrix in its GGUF layout.
	PackOff
)

// CacheMode says whether packed weights are kept in the on-disk cache.
type CacheMode int

const (
	// CacheDefault follows the environment: on unless MOONLM_PACKED_CACHE=0.
	CacheDefault CacheMode = iota
	// CacheOn uses the cache whatever the environment says.
	CacheOn
	// CacheOff never reads or writes the cache (packing happens in memory
	// at every open).
	CacheOff
)

// PackedCacheParams configure the packed-weight cache. Zero values take the
// environment's settings (MOONLM_PACKED_CACHE, MOONLM_PACKED_CACHE_DIR,
// MOONLM_PACKED_CACHE_BYTES), and without those the defaults: on, in
// $XDG_CACHE_HOME/moonlm/packed or ~/.cache/moonlm/packed, 8 GiB.
type PackedCacheParams struct {
	Mode     CacheMode
	Dir      string // the cache's own folder; "" = from the environment
	MaxBytes int64  // eviction budget in bytes; <= 0 = from the environment
}
