package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/assert"
)

// checkPackedBounds checks that each 32-value-block layout's Dot and Pack
// refuse operands too short for the call (group, activations, output,
// source rows), more than MaxTok or no tokens, and a partial block,
// instead of reading or writing past them.
func checkPackedBounds(t *testing.T, layouts []*PackedLayout) {
	t.Helper()
	const cols = 64
	for _, l := range layouts {
		ab := ActivationBytes(l.Type, cols)
		g := make([]byte, l.GroupBytes(cols))
		x := make([]byte, 2*ab)
		y := make([]float32, 32)
		assert.NotPanics(t, func() { l.Dot(cols, g, x, ab, 2, y, 16) })
		assert.Panics(t, func() { l.Dot(cols, g[:len(g)-1], x, ab, 2, y, 16) }, "%s: short group", l.Name)
		assert.Panics(t, func() { l.Dot(cols, g, x[:2*ab-1], ab, 2, y, 16) }, "%s: short activations", l.Name)
		assert.Panics(t, func() { l.Dot(cols, g, x, ab, 2, y[:31], 16) }, "%s: short output", l.Name)
		assert.Panics(t, func() { l.Dot(cols, g, make([]byte, 9*ab), ab, 9, make([]float32, 9*16), 16) }, "%s: more than MaxTok tokens", l.Name)
		assert.Panics(t, func() { l.Dot(cols, g, x, ab, 0, y, 16) }, "%s: no tokens", l.Name)
		assert.Panics(t, func() { l.Dot(cols+1, g, x, ab, 1, y, 16) }, "%s: partial block", l.Name)
		assert.Panics(t, func() { l.Pack(g, make([]byte, 16*RowBytes(l.Type, cols)-1), cols) }, "%s: short source rows", l.Name)
	}
}

// checkPackedNoAlloc checks that each layout's Dot (every token count) and
// Pack allocate nothing.
func checkPackedNoAlloc(t *testing.T, layouts []*PackedLayout) {
	t.Helper()
	const cols = 256
	for _, l := range layouts {
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
		assert.Zero(t, allocs, "%s", l.Name)
	}
}

// packedBenchMatrix returns a random rows x cols matrix of type t quantized
// from N(0, 0.02²) values (realistic scales), unpacked and packed with the
// current variant's layout (nil when it has none).
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
	l := ks.Packed(t)
	if l == nil {
		return m, nil
	}
	pm := *m
	pm.Layout = l
	pm.Packed = make([]byte, l.PackedSize(rows, cols))
	l.PackRows(m, pm.Packed, 0, rows/l.Rows)
	return m, &pm
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
