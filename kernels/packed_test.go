package kernels

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// packedSets returns every kernel set this CPU runs, and for a CPU with
// GFNI the avx512 set a second time without it, so that both forms of the
// packed q4_1 and q4_K kernels are tested.
func packedSets(t testing.TB) []*Set {
	t.Helper()
	sets := testSets(t)
	if hasSet("avx512") && hasGFNI() {
		s, err := newSet("avx512", false)
		require.NoError(t, err)
		sets = append(sets, s)
	}
	return sets
}

// packedCases lists every packed layout of the kernel sets packedSets
// returns, each once with the first set that has it, skipping when there
// are none.
func packedCases(t *testing.T) (sets []*Set, layouts []*PackedLayout) {
	t.Helper()
	for _, ks := range packedSets(t) {
		for _, tk := range ks.types {
			if l := tk.packed; l != nil && !slices.Contains(layouts, l) {
				sets = append(sets, ks)
				layouts = append(layouts, l)
			}
		}
	}
	if len(layouts) == 0 {
		t.Skipf("no packed weight layout for the kernel sets of this CPU (%v)", Available())
	}
	return sets, layouts
}

// packedFixture is a random matrix of l.Type (two whole groups and some
// remainder rows), its packed form, and nTok quantized tokens.
type packedFixture struct {
	m, p   Matrix
	xq     []byte
	ab     int
	nTok   int
	bounds []float64 // per (token, row): the scale of the dot, for tolerances
}

func newPackedFixture(t *testing.T, r *rand.Rand, l *PackedLayout, cols, extraRows, nTok int) *packedFixture {
	t.Helper()
	rows := 2*l.Rows + extraRows
	rb := RowBytes(l.Type, cols)
	m := Matrix{Type: l.Type, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	for i := 0; i < rows; i++ {
		simdRandomRow(r, l.Type, m.Data[i*rb:(i+1)*rb])
	}
	vt := VecDotType(l.Type)
	ab := ActivationBytes(l.Type, cols)
	xq := make([]byte, nTok*ab)
	src := make([]float32, cols)
	for k := 0; k < nTok; k++ {
		for j := range src {
			src[j] = float32(r.NormFloat64())
		}
		QuantizeRow(vt, src, xq[k*ab:(k+1)*ab])
	}
	p := m
	p.Packed = make([]byte, l.PackedSize(rows, cols))
	p.Layout = l
	l.PackRows(&m, p.Packed, 0, rows/l.Rows)
	f := &packedFixture{m: m, p: p, xq: xq, ab: ab, nTok: nTok}
	for k := 0; k < nTok; k++ {
		for i := 0; i < rows; i++ {
			f.bounds = append(f.bounds, simdDotBound(t, l.Type, cols, m.Row(i), xq[k*ab:(k+1)*ab]))
		}
	}
	return f
}

// check compares got (nTok x Rows, rows [r0, r1)) with want within tol
// relative to each dot's bound.
func (f *packedFixture) check(t *testing.T, what string, got, want []float32, r0, r1, nTok int, tol float64) {
	t.Helper()
	for k := 0; k < nTok; k++ {
		for i := r0; i < r1; i++ {
			j := k*f.m.Rows + i
			d := math.Abs(float64(got[j]) - float64(want[j]))
			if d > tol*f.bounds[j]+1e-6 {
				t.Fatalf("%s: token %d row %d: got %g want %g (diff %g, bound %g)", what, k, i, got[j], want[j], d, f.bounds[j])
			}
		}
	}
}

// TestPackedLayouts checks every registered layout: its pure-Go twin
// against the generic row kernels of the unpacked rows, its SIMD kernel
// against the twin for every token count, packing determinism, and MatVec /
// MatMul on a packed matrix (unaligned row ranges, remainder rows in the
// GGUF layout) against the unpacked matrix.
func TestPackedLayouts(t *testing.T) {
	sets, layouts := packedCases(t)
	for i, l := range layouts {
		require.Same(t, l, sets[i].Packed(l.Type), "layout %s is installed by its set", l.Name)
		checkPackedLayout(t, sets[i], l)
	}
}

// identityLayout "packs" groups of 4 Q8_0 rows by copying them and computes
// with the generic row kernel: it checks the packed dispatch (ranges,
// partial groups, remainder rows, token tiles) independently of any SIMD
// layout.
func identityLayout() *PackedLayout {
	dot := func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
		rb := RowBytes(gguf.Q8_0, cols)
		ab := ActivationBytes(gguf.Q8_0, cols)
		for k := 0; k < nTok; k++ {
			for r := 0; r < 4; r++ {
				y[k*yStride+r] = dotQ8_0Generic(cols, g[r*rb:(r+1)*rb], x[k*xStride:k*xStride+ab])
			}
		}
	}
	return &PackedLayout{
		Name: "test.identity", Type: gguf.Q8_0, Rows: 4, MaxTok: 3,
		GroupBytes: func(cols int) int { return 4 * RowBytes(gguf.Q8_0, cols) },
		Pack:       func(dst, src []byte, cols int) { copy(dst, src) },
		Dot:        dot, DotGeneric: dot,
	}
}

func TestPackedDispatch(t *testing.T) {
	for _, ks := range testSets(t) {
		checkPackedLayout(t, ks, identityLayout())
	}
}

// checkPackedLayout runs layout l with the other kernels of set ks.
func checkPackedLayout(t *testing.T, ks *Set, l *PackedLayout) {
	t.Helper()
	{
		for _, cols := range []int{256, 512, 2048} {
			r := rand.New(rand.NewPCG(uint64(cols), uint64(l.Type)))
			nTok := 2*l.MaxTok + 1
			f := newPackedFixture(t, r, l, cols, 5, nTok)
			rows := f.m.Rows

			// Pack is a pure function of the bytes.
			again := make([]byte, len(f.p.Packed))
			l.PackRows(&f.m, again, 0, rows/l.Rows)
			require.True(t, bytes.Equal(again, f.p.Packed), "%s: packing twice gives the same bytes", l.Name)

			// Reference: generic row dots of the unpacked rows.
			want := make([]float32, nTok*rows)
			gen := genericSet.RowDot(l.Type)
			for k := 0; k < nTok; k++ {
				for i := 0; i < rows; i++ {
					want[k*rows+i] = gen(cols, f.m.Row(i), f.xq[k*f.ab:(k+1)*f.ab])
				}
			}
			gb := l.GroupBytes(cols)
			for nt := 1; nt <= l.MaxTok; nt++ {
				for _, dot := range []struct {
					name string
					fn   func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
				}{{"DotGeneric", l.DotGeneric}, {"Dot", l.Dot}} {
					got := make([]float32, nTok*rows)
					for g := 0; g < rows/l.Rows; g++ {
						dot.fn(cols, f.p.Packed[g*gb:(g+1)*gb], f.xq, f.ab, nt, got[g*l.Rows:], rows)
					}
					f.check(t, l.Name+" "+dot.name, got, want, 0, rows/l.Rows*l.Rows, nt, 1e-5)
				}
			}

			// Matrix paths: unaligned ranges, remainder rows, token counts
			// that are not multiples of MaxTok.
			for _, rg := range [][2]int{{0, rows}, {3, rows - 2}, {l.Rows + 1, l.Rows + 7}, {2*l.Rows - 1, rows}} {
				for _, nt := range []int{1, 2, l.MaxTok + 1, nTok} {
					got := make([]float32, nTok*rows)
					if nt == 1 {
						ks.MatVec(&f.p, f.xq, got, rg[0], rg[1])
					} else {
						ks.MatMul(&f.p, f.xq, nt, got, rg[0], rg[1])
					}
					ref := make([]float32, nTok*rows)
					if nt == 1 {
						ks.MatVec(&f.m, f.xq, ref, rg[0], rg[1])
					} else {
						ks.MatMul(&f.m, f.xq, nt, ref, rg[0], rg[1])
					}
					f.check(t, l.Name+" MatMul", got, ref, rg[0], rg[1], nt, 1e-5)
					// Rows outside the range are untouched.
					for k := 0; k < nt; k++ {
						for i := 0; i < rows; i++ {
							if i < rg[0] || i >= rg[1] {
								require.Zero(t, got[k*rows+i], "%s: row %d outside [%d,%d) written", l.Name, i, rg[0], rg[1])
							}
						}
					}
				}
			}
			got := make([]float32, nTok*rows)
			ks.MatMulTiled(&f.p, f.xq, nTok, got, 0, rows)
			f.check(t, l.Name+" MatMulTiled", got, want, 0, rows, nTok, 1e-5)

			allocs := testing.AllocsPerRun(5, func() {
				ks.MatVec(&f.p, f.xq, got, 1, rows)
				ks.MatMul(&f.p, f.xq, nTok, got, 1, rows)
			})
			require.Zero(t, allocs, "%s: packed MatVec/MatMul allocate", l.Name)
		}
	}
}

// packedLayoutsOf returns base (the pure-Go form of a layout, which runs on
// every machine) with the generic set, and each distinct layout of type
// typ of the sets packedSets returns, with the first set that has it.
func packedLayoutsOf(t testing.TB, typ gguf.Type, base *PackedLayout) (sets []*Set, layouts []*PackedLayout) {
	sets, layouts = []*Set{genericSet}, []*PackedLayout{base}
	for _, ks := range packedSets(t) {
		if l := ks.Packed(typ); l != nil && !slices.Contains(layouts, l) {
			sets, layouts = append(sets, ks), append(layouts, l)
		}
	}
	return sets, layouts
}

// registeredPacked returns the avx512 set's layout for typ, skipping where
// this CPU has no avx512 set and failing when the set lacks the layout.
func registeredPacked(t *testing.T, typ gguf.Type) *PackedLayout {
	t.Helper()
	if !hasSet("avx512") {
		t.Skipf("no avx512 kernel set on this machine (sets %v): no %v layout is offered", Available(), typ)
	}
	l := mustSet(t, "avx512").Packed(typ)
	require.NotNil(t, l, "the avx512 set has no %v layout", typ)
	return l
}
