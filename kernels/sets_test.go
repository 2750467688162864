package kernels

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// genericSet is the pure-Go kernel set, the reference the SIMD sets are
// compared against.
var genericSet = func() *Set {
	s, err := New("generic")
	if err != nil {
		panic(err)
	}
	return s
}()

// testSets returns every kernel set this CPU runs, generic first.
func testSets(t testing.TB) []*Set {
	t.Helper()
	var out []*Set
	for _, name := range Available() {
		out = append(out, mustSet(t, name))
	}
	return out
}

// mustSet returns the named kernel set, failing the test if this CPU
// cannot run it (callers check Available first where that is expected).
func mustSet(t testing.TB, name string) *Set {
	t.Helper()
	s, err := New(name)
	require.NoError(t, err)
	return s
}

// forSets runs f as a subtest per kernel set this CPU runs.
func forSets(t *testing.T, f func(t *testing.T, ks *Set)) {
	for _, ks := range testSets(t) {
		t.Run(ks.Name(), func(t *testing.T) { f(t, ks) })
	}
}

// hasSet reports whether this CPU runs the named kernel set.
func hasSet(name string) bool {
	for _, v := range Available() {
		if v == name {
			return true
		}
	}
	return false
}

// TestPackedFromFormatTable: a set's packed layouts are the format table's
// (the highest level up to the set's that names one, in its GFNI form when
// the set uses GFNI): none in the generic and avx2 sets; in the avx512 set
// q8_0, q5_0, q4_1, q4_K and q6_K, q4_1 and q4_K in the form its GFNI
// setting asks for.
func TestPackedFromFormatTable(t *testing.T) {
	for _, ks := range packedSets(t) {
		for typ := range formats {
			var want *PackedLayout
			for level := isaGeneric + 1; level <= ks.isa; level++ {
				if p := formats[typ].simd[level].packedFor(ks.gfni); p != 0 {
					want = packedLayout(p)
				}
			}
			require.Same(t, want, ks.Packed(gguf.Type(typ)), "%s gfni=%v: %v", ks.Name(), ks.gfni, gguf.Type(typ))
		}
		n := 0
		for typ := range formats {
			if ks.Packed(gguf.Type(typ)) != nil {
				n++
			}
		}
		if ks.isa < isaAVX512 {
			require.Zero(t, n, "%s has packed layouts", ks.Name())
			continue
		}
		require.Equal(t, 5, n, "%s: q8_0, q5_0, q4_1, q4_K and q6_K", ks.Name())
		for _, typ := range []gguf.Type{gguf.Q4_1, gguf.Q4_K} {
			gfni := formats[typ].simd[isaAVX512].packedGFNI
			require.Equal(t, ks.gfni, ks.Packed(typ) == packedLayout(gfni), "%s gfni=%v: %v", ks.Name(), ks.gfni, typ)
		}
	}
}
