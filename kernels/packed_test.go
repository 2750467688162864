package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
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
				for _, dot := range packedDots(l) {
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
			ks.MatMul(&f.p, f.xq, nTok, got, 0, rows)
			f.check(t, l.Name+" MatMul", got, want, 0, rows, nTok, 1e-5)

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

// packedBenchMatrix returns a random rows x cols matrix of type t quantized
// from N(0, 0.02²) values (realistic scales), unpacked and packed with the
// detected set's layout (nil when it has none).
func packedBenchMatrix(t gguf.Type, rows, cols int) (m, p *Matrix) {
	ks := Detect()
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	rb := RowBytes(t, cols)
	m = &Matrix{Type: t, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	src := make([]float32, cols)
	for i := range rows {
		for j := range src {
			src[j] = float32(r.NormFloat64() * 0.02)
		}
		QuantizeRow(t, src, m.Data[i*rb:(i+1)*rb])
	}
	return m, packedCopy(ks, m)
}

// packedCopy returns m packed with ks's layout for its type, nil when the
// set has none.
func packedCopy(ks *Set, m *Matrix) *Matrix {
	l := ks.Packed(m.Type)
	if l == nil {
		return nil
	}
	pm := *m
	pm.Layout = l
	pm.Packed = make([]byte, l.PackedSize(m.Rows, m.Cols))
	l.PackRows(m, pm.Packed, 0, m.Rows/l.Rows)
	return &pm
}

// packedBenchTokens returns nTok random activation rows for weights of
// type t (VecDotType(t)), seeded by seed and cols.
func packedBenchTokens(t gguf.Type, cols, nTok int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(cols)))
	ab := ActivationBytes(t, cols)
	xq := make([]byte, nTok*ab)
	src := make([]float32, cols)
	for k := range nTok {
		for j := range src {
			src[j] = float32(r.NormFloat64())
		}
		QuantizeRow(VecDotType(t), src, xq[k*ab:(k+1)*ab])
	}
	return xq
}

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
	// scales, for the 32-value formats, drives TestPackedScales.
	scales *scaleSpec
}

// scaleSpec says how TestPackedScales sets a format's f16 fields.
type scaleSpec struct {
	seed uint64
	cols []int
	// wFields and xFields are the offsets of the f16 fields set in each
	// weight and activation block (scales, and q4_1's offset and sum).
	wFields, xFields []int
	// genericBits: DotGeneric must equal the generic row dot bit for bit.
	genericBits bool
	// bound is the float rounding scale of one row's dot: the sum of the
	// absolute values of its terms.
	bound func(w, x []byte, nb int) float64
}

var packedSpecs = []packedSpec{
	{typ: gguf.Q4_1, base: &packedQ41Base, name: "q4_1.r16.v1", maxTok: 8, cols: []int{32, 96, 576, 8192},
		scales: &scaleSpec{seed: 43, cols: []int{32, 8192}, wFields: []int{0, 2}, xFields: []int{0, 2}, bound: q41Bound}},
	{typ: gguf.Q5_0, base: &packedQ50Base, name: "q5_0.r16.v1", maxTok: 8, cols: []int{32, 96, 640, 8192},
		scales: &scaleSpec{seed: 53, cols: []int{32, 8192}, wFields: []int{0}, xFields: []int{0}, genericBits: true, bound: q50Bound}},
	{typ: gguf.Q8_0, base: &packedQ80Base, name: "q8_0.r16.v1", cols: []int{32, 96, 2048, 8192},
		scales: &scaleSpec{seed: 42, cols: []int{8192}, wFields: []int{0}, xFields: []int{0}, bound: q80Bound}},
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

// TestPackedScales compares the packed kernels of the 32-value formats with
// the generic row dot on rows of many blocks (8192 columns) and, for q4_1
// and q5_0, of one block, with extreme and unusual scales (and q4_1
// offsets and sums): the largest f16, subnormals, zero, negative, and
// random ones, every pair for weights and activations; within 1e-5 of the
// sum of |terms|, and for q5_0 the pure-Go twin bit for bit.
func TestPackedScales(t *testing.T) {
	for _, sp := range packedSpecs {
		if sp.scales != nil {
			t.Run(sp.typ.String(), func(t *testing.T) { checkPackedScales(t, sp) })
		}
	}
}

// checkPackedScales is TestPackedScales for one format.
func checkPackedScales(t *testing.T, sp packedSpec) {
	sc := sp.scales
	_, layouts := packedLayoutsOf(t, sp.typ, sp.base)
	r := rand.New(rand.NewPCG(sc.seed, 3))
	scales := []struct {
		name string
		f    func() uint16
	}{
		{"max", func() uint16 { return 0x7bff }},
		{"subnormal", func() uint16 { return uint16(1 + r.IntN(0x3ff)) }},
		{"zero", func() uint16 { return 0 }},
		{"negative", func() uint16 { return F32ToF16(-float32(r.ExpFloat64())) }},
		{"random", func() uint16 { return F32ToF16(float32(r.NormFloat64() * 0.01)) }},
	}
	wbb, xbb := sp.typ.BlockBytes(), VecDotType(sp.typ).BlockBytes()
	generic := formats[sp.typ].dot
	for _, l := range layouts {
		for _, cols := range sc.cols {
			nb := cols / 32
			rb, ab := RowBytes(sp.typ, cols), ActivationBytes(sp.typ, cols)
			for _, ws := range scales {
				for _, xs := range scales {
					src := make([]byte, 16*rb)
					for i := range src {
						src[i] = byte(r.Uint32())
					}
					for row := range 16 {
						for b := range nb {
							for _, off := range sc.wFields {
								binary.LittleEndian.PutUint16(src[row*rb+wbb*b+off:], ws.f())
							}
						}
					}
					nTok := l.MaxTok
					x := make([]byte, nTok*ab)
					for i := range x {
						x[i] = byte(r.Uint32())
					}
					for tok := range nTok {
						for b := range nb {
							for _, off := range sc.xFields {
								binary.LittleEndian.PutUint16(x[tok*ab+xbb*b+off:], xs.f())
							}
						}
					}
					g := packedGroupOf(l, src, cols)
					y := make([]float32, nTok*16)
					l.Dot(cols, g, x, ab, nTok, y, 16)
					yg := make([]float32, nTok*16)
					l.DotGeneric(cols, g, x, ab, nTok, yg, 16)
					for tok := range nTok {
						xt := x[tok*ab : (tok+1)*ab]
						for row := range 16 {
							w := src[row*rb : (row+1)*rb]
							want := generic(cols, w, xt)
							if sc.genericBits {
								require.Equal(t, math.Float32bits(want), math.Float32bits(yg[tok*16+row]), "DotGeneric %d cols, scales %s x %s: token %d row %d: got %g want %g", cols, ws.name, xs.name, tok, row, yg[tok*16+row], want)
							}
							diff := math.Abs(float64(y[tok*16+row]) - float64(want))
							require.LessOrEqual(t, diff, 1e-5*sc.bound(w, xt, nb), "%s %d cols, scales %s x %s: token %d row %d: got %g want %g", l.Name, cols, ws.name, xs.name, tok, row, y[tok*16+row], want)
						}
					}
				}
			}
		}
	}
}

// q41Bound is the sum of |terms| of a q4_1 row dot: |d*d_a| * sum
// |q*x| and |m*s_a| per block.
func q41Bound(w, x []byte, nb int) float64 {
	var bound float64
	for b := range nb {
		wb, xb := w[20*b:], x[36*b:]
		var s float64
		for j := range 16 {
			s += float64(wb[4+j]&0xf) * math.Abs(float64(int8(xb[4+j])))
			s += float64(wb[4+j]>>4) * math.Abs(float64(int8(xb[20+j])))
		}
		bound += math.Abs(float64(f16At(wb))*float64(f16At(xb)))*s +
			math.Abs(float64(f16At(wb[2:]))*float64(f16At(xb[2:])))
	}
	return bound
}

// q50Bound is the sum of |terms| of a q5_0 row dot.
func q50Bound(w, x []byte, nb int) float64 {
	var bound float64
	for b := range nb {
		wb, xb := w[22*b:], x[34*b:]
		qh := binary.LittleEndian.Uint32(wb[2:])
		var s float64
		for j := range 16 {
			lo := float64(int32(wb[6+j]&0xf) | int32(qh>>j&1)<<4 - 16)
			hi := float64(int32(wb[6+j]>>4) | int32(qh>>(j+16)&1)<<4 - 16)
			s += math.Abs(lo) * math.Abs(float64(int8(xb[2+j])))
			s += math.Abs(hi) * math.Abs(float64(int8(xb[18+j])))
		}
		bound += math.Abs(float64(f16At(wb))*float64(f16At(xb))) * s
	}
	return bound
}

// q80Bound is the sum of |products| of a q8_0 row dot.
func q80Bound(w, x []byte, nb int) float64 {
	var bound float64
	for b := range nb {
		dw, dx := float64(f16At(w[34*b:])), float64(f16At(x[34*b:]))
		var s float64
		for j := 2; j < 34; j++ {
			s += math.Abs(float64(int8(w[34*b+j])) * float64(int8(x[34*b+j])))
		}
		bound += math.Abs(dw*dx) * s
	}
	return bound
}

// packedBenchShapes are the matrices (rows x cols) each packed layout is
// benchmarked on: 1B-model shapes larger than L2, and the default models'
// shapes of the type.
var packedBenchShapes = []struct {
	typ    gguf.Type
	shapes [][2]int
}{
	{gguf.Q4_1, [][2]int{{2048, 8192}, {1536, 576}, {576, 1536}, {576, 576}, {192, 576}, {49152, 576}}},
	{gguf.Q5_0, [][2]int{{2048, 8192}, {1024, 640}, {2048, 640}}},
	{gguf.Q8_0, [][2]int{{8192, 2048}, {2048, 8192}}},
	{gguf.Q4_K, [][2]int{{8192, 2048}, {2048, 8192}}},
	{gguf.Q6_K, [][2]int{{8192, 2048}, {2048, 8192}}},
}

// BenchmarkPacked compares, per layout of the detected set and shape, the
// packed matrix against its GGUF rows: MatMul (64 and 512 tokens; the
// unpacked side takes the set's tile or multi-token kernels) and MatVec,
// which for matrices of 8 Mi values or more also streams from memory
// (copies rotated past the last-level cache, one and two goroutines); and
// it measures Pack. Run with -benchtime 20x.
func BenchmarkPacked(b *testing.B) {
	ks := Detect()
	for _, tc := range packedBenchShapes {
		if ks.Packed(tc.typ) == nil {
			continue
		}
		for _, shape := range tc.shapes {
			b.Run(fmt.Sprintf("%v/%dx%d", tc.typ, shape[0], shape[1]), func(b *testing.B) {
				benchPackedShape(b, ks, tc.typ, shape[0], shape[1])
			})
		}
	}
}

func benchPackedShape(b *testing.B, ks *Set, typ gguf.Type, rows, cols int) {
	m, p := packedBenchMatrix(typ, rows, cols)
	forms := []struct {
		name string
		m    *Matrix
	}{{"unpacked", m}, {"packed", p}}
	big := rows*cols >= 8<<20
	for _, nTok := range []int{64, 512} {
		if big && nTok > 64 {
			continue // keep the big shapes short
		}
		xq := packedBenchTokens(typ, cols, nTok, 5)
		y := make([]float32, nTok*rows)
		for _, f := range forms {
			b.Run(fmt.Sprintf("MatMul/tok%d/%s", nTok, f.name), func(b *testing.B) {
				for b.Loop() {
					ks.MatMul(f.m, xq, nTok, y, 0, rows)
				}
				b.ReportMetric(2*float64(rows*cols*nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
	xq := packedBenchTokens(typ, cols, 1, 5)
	y := make([]float32, rows)
	for _, f := range forms {
		b.Run("MatVec/"+f.name, func(b *testing.B) {
			b.SetBytes(int64(len(m.Data))) // weight bytes streamed
			for b.Loop() {
				ks.MatVec(f.m, xq, y, 0, rows)
			}
		})
	}
	b.Run("Pack", func(b *testing.B) {
		b.SetBytes(int64(len(m.Data)))
		for b.Loop() {
			p.Layout.PackRows(m, p.Packed, 0, rows/p.Layout.Rows)
		}
	})
	if !big {
		return
	}
	copies := max(2, (320<<20)/len(m.Data))
	for _, f := range forms {
		ms := make([]*Matrix, copies)
		for i := range copies {
			c := *f.m
			c.Data, c.Packed = slices.Clone(c.Data), slices.Clone(c.Packed)
			ms[i] = &c
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("MatVecDRAM/thr%d/%s", threads, f.name), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data)))
				var wg sync.WaitGroup
				i := 0
				for b.Loop() {
					mm := ms[i%copies]
					i++
					for th := range threads {
						// Thread shares aligned to the 16-row groups.
						r0, r1 := rows*th/threads/16*16, rows*(th+1)/threads/16*16
						wg.Go(func() { ks.MatVec(mm, xq, y, r0, r1) })
					}
					wg.Wait()
				}
			})
		}
		// Eight tokens (a batched decode step of eight sequences) against
		// the same streamed copies: what sharing the weight reads buys.
		xq8 := packedBenchTokens(typ, cols, 8, 5)
		y8 := make([]float32, 8*rows)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("MatMulDRAM/tok8/thr%d/%s", threads, f.name), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data)))
				var wg sync.WaitGroup
				i := 0
				for b.Loop() {
					mm := ms[i%copies]
					i++
					for th := range threads {
						r0, r1 := rows*th/threads/16*16, rows*(th+1)/threads/16*16
						wg.Go(func() { ks.MatMul(mm, xq8, 8, y8, r0, r1) })
					}
					wg.Wait()
				}
			})
		}
	}
}

// BenchmarkPackedDot runs each packed layout's Dot alone (every GFNI form
// of the detected set) on four groups that stay in L2, per token count:
// the kernel's compute rate.
func BenchmarkPackedDot(b *testing.B) {
	ks := Detect()
	forms := []*Set{ks}
	if hasGFNI() {
		plain, err := newSet(ks.Name(), false)
		require.NoError(b, err)
		forms = append(forms, plain)
	}
	for _, tc := range packedBenchShapes {
		for _, cols := range []int{576, 2048} {
			if cols%tc.typ.BlockSize() != 0 {
				continue
			}
			const groups = 4
			_, p := packedBenchMatrix(tc.typ, 16*groups, cols)
			if p == nil {
				continue
			}
			l := p.Layout
			ab := ActivationBytes(tc.typ, cols)
			xq := packedBenchTokens(tc.typ, cols, l.MaxTok, 5)
			y := make([]float32, l.MaxTok*16*groups)
			gb := l.GroupBytes(cols)
			for _, s := range forms {
				l := s.Packed(tc.typ)
				for _, k := range []int{1, 2, 4, 8} {
					if k > l.MaxTok {
						continue
					}
					b.Run(fmt.Sprintf("%v/%d/tok%d/gfni=%v", tc.typ, cols, k, s.gfni), func(b *testing.B) {
						for b.Loop() {
							for g := range groups {
								l.Dot(cols, p.Packed[g*gb:(g+1)*gb], xq, ab, k, y[16*g:], 16*groups)
							}
						}
						b.ReportMetric(2*float64(k*16*groups*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					})
				}
			}
		}
	}
}

// packRandomGroup fills 16 GGUF rows of typ (cols values each) with random
// bytes from r and packs them with l into a group whose bytes start as
// 0x5a, so a test can check that every byte is written.
func packRandomGroup(r *rand.Rand, l *PackedLayout, typ gguf.Type, cols int) (src, dst []byte, rb int) {
	rb = RowBytes(typ, cols)
	src = make([]byte, 16*rb)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst = make([]byte, l.GroupBytes(cols))
	for i := range dst {
		dst[i] = 0x5a
	}
	l.Pack(dst, src, cols)
	return src, dst, rb
}

// exact32Case is one case of a 32-value-block layout's exact test (every
// scale 1, so every dot is an integer float32 holds).
type exact32Case struct {
	name string
	rows func(cols int) []byte // the 16 GGUF rows
	x    func(tok, i int) int8 // the activation quants
	s    float32               // every q8_1 activation block's sum s_a
	// want is the exact dot of row and token.
	want func(row, tok, cols int) int64
}

// checkPacked32Exact runs every layout's Dot and DotGeneric on each case,
// for the block counts nbs and every token count, with a token stride that
// misaligns the activations and a y stride past the group's rows: the dots
// must be want's integers and y past the rows untouched.
func checkPacked32Exact(t *testing.T, layouts []*PackedLayout, typ gguf.Type, nbs []int, cases []exact32Case) {
	one := F32ToF16(1)
	act := VecDotType(typ)
	q0 := 2 // the quants' offset in an activation block
	if act == gguf.Q8_1 {
		q0 = 4
	}
	abk := act.BlockBytes()
	for _, l := range layouts {
		for _, nb := range nbs {
			cols := 32 * nb
			ab := ActivationBytes(typ, cols)
			for _, c := range cases {
				g := make([]byte, l.GroupBytes(cols))
				l.Pack(g, c.rows(cols), cols)
				for nTok := 1; nTok <= l.MaxTok; nTok++ {
					xStride := ab + 3 // misaligned tokens
					x := make([]byte, nTok*xStride)
					for tok := range nTok {
						for b := range nb {
							blk := x[tok*xStride+abk*b:]
							binary.LittleEndian.PutUint16(blk, one)
							if act == gguf.Q8_1 {
								binary.LittleEndian.PutUint16(blk[2:], F32ToF16(c.s))
							}
							for j := range 32 {
								blk[q0+j] = byte(c.x(tok, 32*b+j))
							}
						}
					}
					const yStride = 21
					for _, dot := range []func(int, []byte, []byte, int, int, []float32, int){l.Dot, l.DotGeneric} {
						y := make([]float32, nTok*yStride)
						for i := range y {
							y[i] = float32(math.NaN())
						}
						dot(cols, g, x, xStride, nTok, y, yStride)
						for tok := range nTok {
							for row := range 16 {
								require.Equal(t, float32(c.want(row, tok, cols)), y[tok*yStride+row], "%s %s: %d blocks, %d tokens: token %d row %d", l.Name, c.name, nb, nTok, tok, row)
							}
							for i := tok*yStride + 16; i < (tok+1)*yStride && i < len(y); i++ {
								require.True(t, math.IsNaN(float64(y[i])), "%s: y[%d] past the group's rows written", l.Name, i)
							}
						}
					}
				}
			}
		}
	}
}

// namedDot is one of a packed layout's kernels, named for test messages.
type namedDot struct {
	name string
	fn   func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
}

// packedDots is the layout's pure-Go twin and its kernel, which every
// packed test holds to the same results.
func packedDots(l *PackedLayout) []namedDot {
	return []namedDot{{"DotGeneric", l.DotGeneric}, {"Dot", l.Dot}}
}

// packedGroupOf packs src (one group of rows of cols values) with l into
// a new buffer.
func packedGroupOf(l *PackedLayout, src []byte, cols int) []byte {
	g := make([]byte, l.GroupBytes(cols))
	l.Pack(g, src, cols)
	return g
}
