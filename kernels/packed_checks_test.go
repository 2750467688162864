package kernels

import (
	"math/rand/v2"

	"github.com/moonlm/moonlm/gguf"
)

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
