package kernels

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/require"
)

// quantvec is reference/quantvec.gguf: ggml's own quantizations, dequantizations
// and dot products of 8 rows x 1024 (see the test data README).
type quantvec struct {
	f          *gguf.File
	rows, cols int
}

func openQuantvec(t *testing.T) *quantvec {
	t.Helper()
	path := shareddata.Path(t, "reference/quantvec.gguf")
	if gguf.Q8_1.BlockBytes() != gguf.BytesQ8_1 {
		t.Fatalf("gguf.Q8_1.BlockBytes() = %d but ggml's block_q8_1 (two halves d, s and 32 quants) is %d bytes: quantvec.gguf's x.q8_1 cannot be read", gguf.Q8_1.BlockBytes(), gguf.BytesQ8_1)
	}
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return &quantvec{f: f, rows: 8, cols: 1024}
}

func (q *quantvec) tensor(t *testing.T, name string) *gguf.Tensor {
	t.Helper()
	tt, ok := q.f.Tensor(name)
	require.True(t, ok, "tensor %s missing", name)
	return tt
}

func (q *quantvec) f32(t *testing.T, name string) []float32 {
	t.Helper()
	tt := q.tensor(t, name)
	require.Equal(t, gguf.F32, tt.Type, name)
	out := make([]float32, len(tt.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(tt.Data[4*i:]))
	}
	return out
}

// quantvecTypes are the weight types the file holds, by ggml name.
var quantvecTypes = []string{"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"}

func parseType(t *testing.T, name string) gguf.Type {
	t.Helper()
	typ, ok := gguf.ParseType(name)
	require.True(t, ok, "unknown type %s", name)
	return typ
}

func ulpDiff(a, b float32) int64 {
	ia, ib := int64(int32(math.Float32bits(a))), int64(int32(math.Float32bits(b)))
	if ia < 0 {
		ia = math.MinInt32 - ia
	}
	if ib < 0 {
		ib = math.MinInt32 - ib
	}
	d := ia - ib
	if d < 0 {
		d = -d
	}
	return d
}

func TestQuantvecDequantize(t *testing.T) {
	q := openQuantvec(t)
	for _, name := range quantvecTypes {
		t.Run(name, func(t *testing.T) {
			typ := parseType(t, name)
			wq := q.tensor(t, name+".q")
			require.Equal(t, typ, wq.Type)
			want := q.f32(t, name+".deq")
			rb := len(wq.Data) / q.rows
			got := make([]float32, q.cols)
			bad, maxULP := 0, int64(0)
			for r := range q.rows {
				DequantizeRow(typ, wq.Data[r*rb:(r+1)*rb], got)
				for i, v := range got {
					w := want[r*q.cols+i]
					if math.Float32bits(v) != math.Float32bits(w) {
						if bad < 5 {
							t.Errorf("row %d [%d]: got %v (%08x), want %v (%08x)", r, i, v, math.Float32bits(v), w, math.Float32bits(w))
						}
						bad++
						maxULP = max(maxULP, ulpDiff(v, w))
					}
				}
			}
			require.Zero(t, bad, "%d of %d values differ from ggml's dequantization (max %d ulp)", bad, q.rows*q.cols, maxULP)
		})
	}
}

func TestQuantvecActivations(t *testing.T) {
	q := openQuantvec(t)
	x := q.f32(t, "x")
	for _, name := range []string{"f16", "bf16", "q8_0", "q8_1", "q8_K"} {
		t.Run(name, func(t *testing.T) {
			typ := parseType(t, name)
			want := q.tensor(t, "x."+name)
			require.Equal(t, typ, want.Type)
			got := make([]byte, len(want.Data))
			QuantizeRow(typ, x, got)
			_, bs := blockGeom(typ)
			bad := 0
			for b := 0; b < len(got)/bs; b++ {
				if string(got[b*bs:(b+1)*bs]) != string(want.Data[b*bs:(b+1)*bs]) {
					if bad < 3 {
						t.Errorf("block %d differs:\n got %x\nwant %x", b, got[b*bs:(b+1)*bs], want.Data[b*bs:(b+1)*bs])
					}
					bad++
				}
			}
			require.Zero(t, bad, "%d of %d blocks differ", bad, len(got)/bs)
		})
	}
}

func TestQuantvecDot(t *testing.T) {
	q := openQuantvec(t)
	x := q.f32(t, "x")
	for _, name := range quantvecTypes {
		t.Run(name, func(t *testing.T) {
			typ := parseType(t, name)
			v, ok := q.f.Lookup("quantvec.vec_dot_type." + name)
			require.True(t, ok)
			vtName, err := v.String()
			require.NoError(t, err)
			vt := parseType(t, vtName)
			require.Equal(t, vt, VecDotType(typ), "VecDotType(%v)", typ)
			xq := make([]byte, ActivationBytes(typ, q.cols))
			QuantizeRow(vt, x, xq)
			wq := q.tensor(t, name+".q")
			want := q.f32(t, name+".dot")
			want64 := q.f32(t, name+".dot_f64")
			deq := q.f32(t, name+".deq")
			rb := len(wq.Data) / q.rows
			for _, ks := range testSets(t) {
				variant := ks.Name()
				for r := range q.rows {
					w := wq.Data[r*rb : (r+1)*rb]
					got := ks.DotRow(typ, w, xq, q.cols)
					require.InEpsilon(t, want[r], got, 1e-4, "%s row %d variant %s", name, r, variant)
					// The exact dot of the dequantized row with unconverted x differs
					// only by the activation rounding (bounded per term) and float32
					// accumulation.
					tol := activationErrBound(vt, deq[r*q.cols:(r+1)*q.cols], x)*1.01 + 1e-5*absDot(deq[r*q.cols:(r+1)*q.cols], x)
					require.InDelta(t, want64[r], got, tol, "%s row %d vs dot_f64, variant %s", name, r, variant)
				}
			}
		})
	}
}

// absDot returns sum |a_i x_i| (a bound's scale for rounding errors).
func absDot(a, x []float32) float64 {
	var s float64
	for i, v := range a {
		s += math.Abs(float64(v) * float64(x[i]))
	}
	return s
}

// activationErrBound bounds |dot(w, x) - dot(w, convert(x))| for the
// activation type vt: half a quantization step of each block's scale for the
// 8-bit types (plus the f16 rounding of that scale), half an ulp for f16/bf16.
func activationErrBound(vt gguf.Type, w, x []float32) float64 {
	var s float64
	switch vt {
	case gguf.F16:
		return absDot(w, x) * 0x1p-11
	case gguf.BF16:
		return absDot(w, x) * 0x1p-8
	}
	blk, _ := blockGeom(vt)
	for b := 0; b < len(x)/blk; b++ {
		var amax, sw float64
		for i := b * blk; i < (b+1)*blk; i++ {
			amax = max(amax, math.Abs(float64(x[i])))
			sw += math.Abs(float64(w[i]))
		}
		// Half a step of amax/127, plus up to 127 steps times the relative
		// error of an f16-rounded scale.
		s += sw * amax / 127 * (0.5 + 127*0x1p-11)
	}
	return s
}
