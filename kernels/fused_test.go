package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/stretchr/testify/require"
)

// TestMatMulQ4_1 checks every set's MatMul against the
// generic kernels' MatMul, within rounding, on shapes with leftover rows
// and tokens, odd block counts and row sub-ranges.
func TestMatMulQ4_1(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{64, 96, 576, 1536} {
		for _, rows := range []int{4, 7, 33} {
			for _, nTok := range []int{1, 4, 6, 13} {
				for _, rng := range [][2]int{{0, rows}, {1, rows}, {rows / 2, rows}} {
					name := fmt.Sprintf("cols=%d/rows=%d/tok=%d/r=%d-%d", cols, rows, nTok, rng[0], rng[1])
					t.Run(name, func(t *testing.T) {
						m, xq := tiledCase(r, cols, rows, nTok)
						want := make([]float32, nTok*rows)
						genericSet.MatMul(m, xq, nTok, want, rng[0], rng[1])
						for _, ks := range testSets(t) {
							v := ks.Name()
							got := make([]float32, nTok*rows)
							ks.MatMul(m, xq, nTok, got, rng[0], rng[1])
							for k := range nTok {
								for i := range rows {
									w, g := want[k*rows+i], got[k*rows+i]
									if i < rng[0] {
										require.Zero(t, g, "%s wrote row %d outside the range", v, i)
										continue
									}
									tol := 1e-4 * (1 + math.Abs(float64(w)))
									require.InDelta(t, w, g, tol, "%s: token %d row %d", v, k, i)
								}
							}
						}
					})
				}
			}
		}
	}
}

// tiledCase makes a random Q4_1 matrix and nTok q8_1 activation rows.
func tiledCase(r *rand.Rand, cols, rows, nTok int) (*Matrix, []byte) {
	rb := RowBytes(gguf.Q4_1, cols)
	m := &Matrix{Type: gguf.Q4_1, Rows: rows, Cols: cols, Data: make([]byte, rows*rb)}
	x := make([]float32, cols)
	for i := range rows {
		for j := range x {
			x[j] = float32(r.NormFloat64()) + 0.3
		}
		QuantizeRow(gguf.Q4_1, x, m.Data[i*rb:(i+1)*rb])
	}
	ab := ActivationBytes(gguf.Q4_1, cols)
	xq := make([]byte, nTok*ab)
	for k := range nTok {
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		QuantizeRow(VecDotType(gguf.Q4_1), x, xq[k*ab:(k+1)*ab])
	}
	return m, xq
}

// q8kBlockKinds fill one 256-value block each with a case quantizeQ8K
// treats specially; q8kRow draws a row of them at random.
var q8kBlockKinds = []struct {
	name string
	fill func(r *rand.Rand, x []float32)
}{
	{"normal", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
	}},
	{"wide-range", func(r *rand.Rand, x []float32) {
		// magnitudes from about 1e-38 to 1e38 in one block
		for i := range x {
			v := float32(math.Exp(r.Float64()*170 - 85))
			if r.IntN(2) == 0 {
				v = -v
			}
			x[i] = v
		}
	}},
	{"zero", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = 0
			if r.IntN(2) == 0 {
				x[i] = float32(math.Copysign(0, -1))
			}
		}
	}},
	{"max-negative", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		x[r.IntN(len(x))] = -3
	}},
	{"max-positive", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		x[r.IntN(len(x))] = 3
	}},
	{"tie-neg-first", func(r *rand.Rand, x []float32) {
		// the first of -m and +m sets the sign of the scale
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		i := r.IntN(len(x) - 1)
		x[i] = -2.5
		x[i+1+r.IntN(len(x)-1-i)] = 2.5
	}},
	{"tie-pos-first", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		i := r.IntN(len(x) - 1)
		x[i] = 2.5
		x[i+1+r.IntN(len(x)-1-i)] = -2.5
	}},
	{"halves", func(r *rand.Rand, x []float32) {
		// max ±127 or ±254 makes iscale ∓1 or ∓0.5 exactly, so these
		// scale to k+0.5 and round to even
		m := []float32{127, -127, 254, -254}[r.IntN(4)]
		step := float32(math.Abs(float64(m)) / 127)
		for i := range x {
			x[i] = (float32(r.IntN(254)-127) + 0.5) * step
		}
		x[r.IntN(len(x))] = m
	}},
	{"denormal", func(r *rand.Rand, x []float32) {
		// iscale = -127/max overflows to -Inf
		for i := range x {
			x[i] = math.Float32frombits(uint32(r.IntN(1 << 23)))
			if r.IntN(2) == 0 {
				x[i] = -x[i]
			}
		}
	}},
	{"denormal-mixed", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = math.Float32frombits(uint32(r.IntN(1 << 23)))
			if r.IntN(4) == 0 {
				x[i] = float32(r.NormFloat64() * 1e-36)
			}
		}
	}},
	{"huge", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64() * 1e37)
		}
		x[r.IntN(len(x))] = -math.MaxFloat32
	}},
	{"inf", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		x[r.IntN(len(x))] = float32(math.Inf(1 - 2*r.IntN(2)))
		x[r.IntN(len(x))] = 0
	}},
	{"nan", func(r *rand.Rand, x []float32) {
		// NaNs never win the max; their payload bits reach the quants
		// through nearestInt's mantissa arithmetic, beyond the clamp
		for i := range x {
			x[i] = float32(r.NormFloat64())
			if r.IntN(8) == 0 {
				x[i] = math.Float32frombits(0x7f800000 | uint32(1+r.IntN(1<<23-1)) | uint32(r.IntN(2))<<31)
			}
		}
	}},
	{"all-nan", func(r *rand.Rand, x []float32) {
		for i := range x {
			x[i] = math.Float32frombits(0x7fc00000 | uint32(r.IntN(1<<22)))
		}
	}},
}

func q8kRow(r *rand.Rand, n int, kinds []int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n/qkK; b++ {
		q8kBlockKinds[kinds[b]].fill(r, x[b*qkK:(b+1)*qkK])
	}
	return x
}

// TestFastQuantizeQ8K compares FastQuantizeRow for Q8_K with the pure-Go
// quantizeQ8K byte for byte on every kernel set: each block kind alone, and
// rows of randomly mixed kinds at lengths 256 to 8192. The output buffer
// starts as garbage so a byte the kernel fails to write shows up.
func TestFastQuantizeQ8K(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 256))
	check := func(t *testing.T, ks *Set, x []float32) {
		want := make([]byte, RowBytes(gguf.Q8_K, len(x)))
		got := make([]byte, len(want))
		for i := range got {
			got[i] = 0xa5
		}
		quantizeQ8K(x, want)
		ks.FastQuantizeRow(gguf.Q8_K, x, got)
		for b := 0; b < len(x)/qkK; b++ {
			w, g := want[b*gguf.BytesQ8_K:(b+1)*gguf.BytesQ8_K], got[b*gguf.BytesQ8_K:(b+1)*gguf.BytesQ8_K]
			require.Equal(t, w, g, "block %d", b)
		}
	}
	for _, ks := range testSets(t) {
		v := ks.Name()
		for k, kind := range q8kBlockKinds {
			t.Run(fmt.Sprintf("%s/%s", v, kind.name), func(t *testing.T) {
				for range 20 {
					kinds := []int{k, k, k, k}
					check(t, ks, q8kRow(r, 4*qkK, kinds))
				}
			})
		}
		for _, n := range []int{256, 512, 1536, 2048, 4096, 5632, 8192} {
			t.Run(fmt.Sprintf("%s/mixed/n=%d", v, n), func(t *testing.T) {
				for range 10 {
					kinds := make([]int, n/qkK)
					for i := range kinds {
						kinds[i] = r.IntN(len(q8kBlockKinds))
					}
					check(t, ks, q8kRow(r, n, kinds))
				}
			})
		}
	}
}

// TestFastQuantizeQ8KUsesVector makes sure the avx512 set really runs
// the vector kernel (else TestFastQuantizeQ8K compares Go with itself) and
// that it does not allocate.
func TestFastQuantizeQ8KUsesVector(t *testing.T) {
	if !hasSet("avx512") {
		t.Skip("the avx512 kernel set is not available on this CPU/arch")
	}
	ks := mustSet(t, "avx512")
	x := q8kRow(rand.New(rand.NewPCG(1, 2)), 2048, []int{0, 1, 2, 3, 4, 5, 6, 7})
	dst := make([]byte, RowBytes(gguf.Q8_K, len(x)))
	require.True(t, ks.quantizeQ8KVec(x, dst))
	allocs := testing.AllocsPerRun(100, func() { ks.FastQuantizeRow(gguf.Q8_K, x, dst) })
	require.Zero(t, allocs)
}

// BenchmarkQuantizeQ8K compares the pure-Go quantizer with the AVX-512 one
// on rows of the 1B models' widths.
func BenchmarkQuantizeQ8K(b *testing.B) {
	for _, n := range []int{2048, 8192} {
		x := make([]float32, n)
		r := rand.New(rand.NewPCG(3, 4))
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		dst := make([]byte, RowBytes(gguf.Q8_K, n))
		b.Run(fmt.Sprintf("go/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				quantizeQ8K(x, dst)
			}
		})
		if !hasSet("avx512") {
			continue
		}
		ks := mustSet(b, "avx512")
		b.Run(fmt.Sprintf("avx512/n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				ks.FastQuantizeRow(gguf.Q8_K, x, dst)
			}
		})
	}
}

// TestFastQuantizeRow compares FastQuantizeRow with QuantizeRow byte for
// byte for the Q8_0 and Q8_1 activation types with every kernel set: random
// rows at several scales, an all-zero block, and halfway cases (a block
// whose largest magnitude is 127 makes the scale 1, so k+0.5 values round
// to even).
func TestFastQuantizeRow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, ks := range testSets(t) {
		v := ks.Name()
		for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q8_1} {
			for _, n := range []int{32, 64, 576, 1536} {
				t.Run(fmt.Sprintf("%s/%v/n=%d", v, typ, n), func(t *testing.T) {
					for _, scale := range []float64{1e-3, 1, 50} {
						x := make([]float32, n)
						for i := range x {
							x[i] = float32(r.NormFloat64() * scale)
						}
						if n >= 64 {
							clear(x[32:64]) // an all-zero block
						}
						if n >= 96 {
							x[64] = 127
							for i := 65; i < 96; i++ {
								x[i] = float32(r.IntN(200)-100) + 0.5
							}
						}
						want := make([]byte, RowBytes(typ, n))
						got := make([]byte, len(want))
						QuantizeRow(typ, x, want)
						ks.FastQuantizeRow(typ, x, got)
						require.Equal(t, want, got)
					}
				})
			}
		}
	}
}

// TestMatMulF16 checks every set's MatMul on F16 matrices against the
// generic MatMul (within float32 summation-order rounding) on shapes with
// and without whole 4x4 tiles and 16-column steps (leftover rows, tokens
// and columns, row sub-ranges), and that rows outside the range stay
// untouched.
func TestMatMulF16(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, cols := range []int{8, 16, 40, 768} {
		for _, rows := range []int{4, 7, 33} {
			for _, nTok := range []int{1, 4, 6, 13} {
				for _, rng := range [][2]int{{0, rows}, {1, rows}, {rows / 2, rows}} {
					name := fmt.Sprintf("cols=%d/rows=%d/tok=%d/r=%d-%d", cols, rows, nTok, rng[0], rng[1])
					t.Run(name, func(t *testing.T) {
						m := &Matrix{Type: gguf.F16, Rows: rows, Cols: cols, Data: make([]byte, rows*2*cols)}
						xq := make([]byte, nTok*2*cols)
						v := make([]float32, cols)
						for i := range rows {
							for j := range v {
								v[j] = float32(r.NormFloat64())
							}
							F32RowToF16(v, m.Data[i*2*cols:(i+1)*2*cols])
						}
						for k := range nTok {
							for j := range v {
								v[j] = float32(r.NormFloat64())
							}
							F32RowToF16(v, xq[k*2*cols:(k+1)*2*cols])
						}
						want := make([]float32, nTok*rows)
						genericSet.MatMul(m, xq, nTok, want, rng[0], rng[1])
						for _, ks := range testSets(t) {
							got := make([]float32, nTok*rows)
							ks.MatMul(m, xq, nTok, got, rng[0], rng[1])
							for k := range nTok {
								for i := range rows {
									w, g := want[k*rows+i], got[k*rows+i]
									if i < rng[0] {
										require.Zero(t, g, "%s wrote row %d outside the range", ks.Name(), i)
										continue
									}
									require.InDelta(t, w, g, 1e-4*(1+math.Sqrt(float64(cols))), "%s: token %d row %d", ks.Name(), k, i)
								}
							}
						}
					})
				}
			}
		}
	}
}
