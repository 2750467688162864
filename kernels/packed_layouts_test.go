package kernels

import (
	"fmt"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests every packed layout shares, table-driven over the layout
// families; the per-type files keep what is particular to a format (its
// byte layout read back by hand, exact integer sums, extreme scales).

// packedSpec is what the shared tests know of one layout family.
type packedSpec struct {
	typ  gguf.Type
	base *PackedLayout // the pure-Go form, which runs everywhere
	name string        // the avx512 set's layout name, with its version
	// maxTok is the tokens per Dot call the layout promises (0: not fixed
	// by the test).
	maxTok int
	// cols are column counts whose group sizes are checked.
	cols []int
	// slack bounds a group's bytes against the GGUF rows it replaces: 0
	// means exactly as big (decode streams the same bytes), else at most
	// that fraction bigger.
	slack float64
}

var packedSpecs = []packedSpec{
	{typ: gguf.Q4_1, base: &packedQ41Base, name: "q4_1.r16.v1", maxTok: 8, cols: []int{32, 96, 576, 8192}},
	{typ: gguf.Q5_0, base: &packedQ50Base, name: "q5_0.r16.v1", maxTok: 8, cols: []int{32, 96, 640, 8192}},
	{typ: gguf.Q8_0, base: &packedQ80Base, name: "q8_0.r16.v1", cols: []int{32, 96, 2048, 8192}},
	{typ: gguf.Q4_K, base: &packedQ4KBase, name: "q4_K.r16.v1", cols: []int{256, 2048, 8192}, slack: 0.03},
	{typ: gguf.Q6_K, base: &packedQ6KBase, name: "q6_K.r16.v2", cols: []int{256, 2048, 8192}},
}

// forPackedSpecs runs f per layout family as a subtest.
func forPackedSpecs(t *testing.T, f func(t *testing.T, sp packedSpec)) {
	for _, sp := range packedSpecs {
		t.Run(sp.typ.String(), func(t *testing.T) { f(t, sp) })
	}
}

// TestPackedRegistered checks that the avx512 set brings each layout, under
// its name and shape, that its tile fits matMulPacked's scratch, and that a
// packed group is as big as the GGUF rows it replaces (q4_K: within 3%).
func TestPackedRegistered(t *testing.T) {
	forPackedSpecs(t, func(t *testing.T, sp packedSpec) {
		found := registeredPacked(t, sp.typ)
		assert.Equal(t, sp.name, found.Name)
		assert.Equal(t, 16, found.Rows)
		if sp.maxTok != 0 {
			assert.Equal(t, sp.maxTok, found.MaxTok)
		}
		assert.LessOrEqual(t, found.Rows*found.MaxTok, maxPackedTile)
		for _, cols := range sp.cols {
			g, rows := found.GroupBytes(cols), found.Rows*RowBytes(sp.typ, cols)
			if sp.slack == 0 {
				assert.Equal(t, rows, g, "%d cols", cols)
			} else {
				assert.LessOrEqual(t, float64(g), (1+sp.slack)*float64(rows), "%d cols: packed %d bytes vs %d", cols, g, rows)
			}
		}
	})
}

// TestPackedBounds checks that every layout's Dot and Pack (the pure-Go
// twin and each set's SIMD form) refuse operands too short for the call
// (group, activations, output, source rows), more than MaxTok or no
// tokens, and a partial block, instead of reading or writing past them.
func TestPackedBounds(t *testing.T) {
	forPackedSpecs(t, func(t *testing.T, sp packedSpec) {
		sets, layouts := packedLayoutsOf(t, sp.typ, sp.base)
		cols := 2 * sp.typ.BlockSize()
		for i, l := range layouts {
			what := fmt.Sprintf("%s (%s)", l.Name, sets[i].Name())
			ab := ActivationBytes(l.Type, cols)
			g := make([]byte, l.GroupBytes(cols))
			n := min(2, l.MaxTok)
			x := make([]byte, n*ab)
			y := make([]float32, n*16)
			require.NotPanics(t, func() { l.Dot(cols, g, x, ab, n, y, 16) }, what)
			assert.Panics(t, func() { l.Dot(cols, g[:len(g)-1], x, ab, n, y, 16) }, "%s: short group", what)
			assert.Panics(t, func() { l.Dot(cols, g, x[:n*ab-1], ab, n, y, 16) }, "%s: short activations", what)
			assert.Panics(t, func() { l.Dot(cols, g, x, ab, n, y[:n*16-1], 16) }, "%s: short output", what)
			more := l.MaxTok + 1
			assert.Panics(t, func() { l.Dot(cols, g, make([]byte, more*ab), ab, more, make([]float32, more*16), 16) }, "%s: more than MaxTok tokens", what)
			assert.Panics(t, func() { l.Dot(cols, g, x, ab, 0, y, 16) }, "%s: no tokens", what)
			assert.Panics(t, func() { l.Dot(cols+1, g, x, ab, 1, y, 16) }, "%s: partial block", what)
			assert.Panics(t, func() { l.Pack(g, make([]byte, 16*RowBytes(l.Type, cols)-1), cols) }, "%s: short source rows", what)
		}
	})
}

// TestPackedNoAlloc checks that every layout's Dot (every token count) and
// Pack allocate nothing.
func TestPackedNoAlloc(t *testing.T) {
	forPackedSpecs(t, func(t *testing.T, sp packedSpec) {
		sets, layouts := packedLayoutsOf(t, sp.typ, sp.base)
		const cols = 512
		for i, l := range layouts {
			ab := ActivationBytes(l.Type, cols)
			g := make([]byte, l.GroupBytes(cols))
			src := make([]byte, 16*RowBytes(l.Type, cols))
			x := make([]byte, l.MaxTok*ab)
			y := make([]float32, l.MaxTok*16)
			allocs := testing.AllocsPerRun(10, func() {
				l.Pack(g, src, cols)
				for k := 1; k <= l.MaxTok; k++ {
					l.Dot(cols, g, x, ab, k, y, 16)
				}
			})
			assert.Zero(t, allocs, "%s (%s)", l.Name, sets[i].Name())
		}
	})
}
