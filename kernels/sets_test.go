package kernels

import (
	"testing"

	"github.com/stretchr/testify/require"
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
