package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
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
					g := make([]byte, l.GroupBytes(cols))
					l.Pack(g, src, cols)
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
