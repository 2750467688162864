package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests here compare with ggml's own outputs (fused_exp_data_test.go,
// made by fused_exp_gen.py from the CPU functions libggml-cpu exports), on
// every kernel set: each must reproduce ggml's AVX-512 results bit for bit.

func f32s(b []uint32) []float32 {
	out := make([]float32, len(b))
	for i, v := range b {
		out[i] = math.Float32frombits(v)
	}
	return out
}

func forVariants(t *testing.T, f func(t *testing.T)) {
	for _, ks := range testSets(t) {
		v := ks.Name()
		t.Run(v, f)
	}
}

// TestExpGGML checks ExpGGML and the vector exp against ggml_v_expf, and
// the 16-value chunk sum against the sum ggml's softmax returns.
func TestExpGGML(t *testing.T) {
	for _, r := range ggmlExpRows {
		x, want := f32s(r.x[:]), f32s(r.y[:])
		var chunk [16]float32
		for i, v := range x {
			chunk[i] = ExpGGML(v)
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(chunk[i]), "ExpGGML(%v)", v)
		}
		if s := math.Float64frombits(r.sum); !math.IsInf(s, 0) {
			require.Equal(t, s, float64(sum16(&chunk)), "sum of exp(%v)", x)
		}
	}
	forSets(t, func(t *testing.T, ks *Set) {
		for _, r := range ggmlExpRows {
			x := f32s(r.x[:])
			done := ks.expSubVec(x, 0)
			for i := range done {
				require.Equal(t, r.y[i], math.Float32bits(x[i]), "exp(%v)", math.Float32frombits(r.x[i]))
			}
		}
	})
}

// TestFastSoftmaxGGML checks whole attention rows against ggml's softmax.
func TestFastSoftmaxGGML(t *testing.T) {
	forSets(t, func(t *testing.T, ks *Set) {
		for _, r := range ggmlSoftmax {
			x := f32s(r.x)
			ks.FastSoftmax(x)
			assert.Equal(t, f32s(r.y), x, "row of %d", len(x))
		}
	})
}

// TestFastSwiGLUGGML checks 52 values (48 through ggml's vector path, the
// last 4 through libm's expf) against ggml_vec_swiglu_f32.
func TestFastSwiGLUGGML(t *testing.T) {
	forSets(t, func(t *testing.T, ks *Set) {
		for _, r := range ggmlSwiGLU {
			g, u := f32s(r.g), f32s(r.u)
			ks.FastSwiGLU(g, g, u)
			assert.Equal(t, f32s(r.y), g)
		}
	})
}

// TestAttnDotF16RowsSingleGGML checks the one-token attention dot against
// ggml_vec_dot_f16: whole vectors (a multiple of 64 or not) and vectors
// zero past their first values (rows over padded KV cells).
func TestAttnDotF16RowsSingleGGML(t *testing.T) {
	forSets(t, func(t *testing.T, ks *Set) {
		for _, r := range ggmlDotF16 {
			pad := len(r.x) < r.n
			y := make([]float32, 1)
			ks.AttnDotF16RowsSingle(r.x, r.y, len(r.y), y, pad)
			assert.Equal(t, r.dot, math.Float32bits(y[0]), "n %d of %d", len(r.x), r.n)
		}
	})
}

// TestAttnDotF16RowsVariants checks that every kernel set computes the
// attention dots (tinyBLAS order, and ggml_vec_dot_f16/f32 order with and
// without padding; f16 and f32 vectors) bit for bit as the pure-Go
// definitions, over lengths around the 16- and 64-value steps and strided
// rows.
func TestAttnDotF16RowsVariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	forSets(t, func(t *testing.T, ks *Set) {
		for _, n := range []int{1, 5, 15, 16, 17, 33, 63, 64, 65, 100, 128, 129, 200, 256} {
			const m = 7
			stride := n + 3
			x, rows := make([]uint16, n), make([]uint16, (m-1)*stride+n)
			fillNormal(r, F32ToF16, x, rows)
			checkAttnDots(t, ks, attnDotsF16, x, rows, stride, m)
			// The same for float32 vectors (the F32 KV cache).
			x32, rows32 := make([]float32, len(x)), make([]float32, len(rows))
			fillNormal(r, func(v float32) float32 { return v }, x32, rows32)
			checkAttnDots(t, ks, attnDotsF32, x32, rows32, stride, m)
		}
	})
}

// attnDots is one KV element type's attention dots: the Set's two entry
// points and the pure-Go definitions they must match bit for bit.
type attnDots[T uint16 | float32] struct {
	prefix     string // for messages
	rows       func(ks *Set, x, rows []T, stride int, y []float32)
	single     func(ks *Set, x, rows []T, stride int, y []float32, pad bool)
	want       func(a, b []T) float32
	wantSingle func(a, b []T, pad bool) float32
}

var (
	attnDotsF16 = attnDots[uint16]{"", (*Set).AttnDotF16Rows, (*Set).AttnDotF16RowsSingle, attnDotF16Generic, attnDotF16SingleGeneric}
	attnDotsF32 = attnDots[float32]{"f32 ", (*Set).AttnDotF32Rows, (*Set).AttnDotF32RowsSingle, attnDotF32Generic, attnDotF32SingleGeneric}
)

// checkAttnDots compares ks's tinyBLAS-order and vec_dot-order (with and
// without padding) dots of x with m rows at stride against their
// definitions.
func checkAttnDots[T uint16 | float32](t *testing.T, ks *Set, d attnDots[T], x, rows []T, stride, m int) {
	n := len(x)
	got := make([]float32, m)
	d.rows(ks, x, rows, stride, got)
	for i := range got {
		require.Equal(t, d.want(x, rows[i*stride:i*stride+n]), got[i], "%stinyBLAS order, n %d row %d", d.prefix, n, i)
	}
	for _, pad := range []bool{false, true} {
		d.single(ks, x, rows, stride, got, pad)
		for i := range got {
			require.Equal(t, d.wantSingle(x, rows[i*stride:i*stride+n], pad), got[i], "%svec_dot order, pad %v, n %d row %d", d.prefix, pad, n, i)
		}
	}
}

// fillNormal fills each of vs, in turn, with standard normal values
// converted by conv.
func fillNormal[T any](r *rand.Rand, conv func(float32) T, vs ...[]T) {
	for _, v := range vs {
		for i := range v {
			v[i] = conv(float32(r.NormFloat64()))
		}
	}
}

// TestAttnDotF32RowsSingleGGML checks the one-token f32 attention dot
// against ggml_vec_dot_f32.
func TestAttnDotF32RowsSingleGGML(t *testing.T) {
	forSets(t, func(t *testing.T, ks *Set) {
		for _, r := range ggmlDotF32 {
			pad := len(r.x) < r.n
			y := make([]float32, 1)
			ks.AttnDotF32RowsSingle(f32s(r.x), f32s(r.y), len(r.y), y, pad)
			assert.Equal(t, r.dot, math.Float32bits(y[0]), "n %d of %d", len(r.x), r.n)
		}
	})
}

// TestSoftmaxSinkAndRow checks the two variants of FastSoftmax: with a
// sink of -Inf FastSoftmaxSink is FastSoftmax bit for bit, with a finite
// one it is the float64 softmax over the row and the sink (the sink's
// share left out); SoftmaxRow is FastSoftmax on whole 16-value chunks and
// ggml's scalar tail (libm's expf, float64 sum) past them.
func TestSoftmaxSinkAndRow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	forSets(t, func(t *testing.T, ks *Set) {
		for _, n := range []int{1, 4, 8, 15, 16, 17, 40, 64, 100} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(3 * r.NormFloat64())
			}
			a, b := append([]float32(nil), x...), append([]float32(nil), x...)
			ks.FastSoftmax(a)
			ks.FastSoftmaxSink(b, float32(math.Inf(-1)))
			require.Equal(t, a, b, "sink -Inf, n %d", n)

			for _, sink := range []float32{-2, 0.5, 9} {
				got := append([]float32(nil), x...)
				ks.FastSoftmaxSink(got, sink)
				mx := float64(sink)
				for _, v := range x {
					mx = math.Max(mx, float64(v))
				}
				sum := math.Exp(float64(sink) - mx)
				for _, v := range x {
					sum += math.Exp(float64(v) - mx)
				}
				for i, v := range x {
					assert.InDelta(t, math.Exp(float64(v)-mx)/sum, float64(got[i]), 2e-7, "sink %v, n %d, value %d", sink, n, i)
				}
			}

			row := append([]float32(nil), x...)
			ks.SoftmaxRow(row)
			want := softmaxGGMLRef(x, true)
			require.Equal(t, want, row, "SoftmaxRow, n %d", n)
		}
	})
}
