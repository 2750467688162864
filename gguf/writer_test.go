package gguf

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTripValues covers every value type, arrays of each, empty and
// nested arrays.
var roundTripValues = []struct {
	key string
	v   any
	typ ValueType
}{
	{"t.u8", uint8(200), ValueUint8},
	{"t.i8", int8(-100), ValueInt8},
	{"t.u16", uint16(65000), ValueUint16},
	{"t.i16", int16(-30000), ValueInt16},
	{"t.u32", uint32(4000000000), ValueUint32},
	{"t.i32", int32(-2000000000), ValueInt32},
	{"t.f32", float32(3.25), ValueFloat32},
	{"t.bool.true", true, ValueBool},
	{"t.bool.false", false, ValueBool},
	{"t.str", "héllo, 世界", ValueString},
	{"t.str.empty", "", ValueString},
	{"t.u64", uint64(math.MaxUint64), ValueUint64},
	{"t.i64", int64(math.MinInt64), ValueInt64},
	{"t.f64", math.Pi, ValueFloat64},
	{"t.f32.inf", float32(math.Inf(-1)), ValueFloat32},
	{"a.u8", []uint8{0, 1, 255}, ValueArray},
	{"a.i8", []int8{-128, 0, 127}, ValueArray},
	{"a.u16", []uint16{1, 65535}, ValueArray},
	{"a.i16", []int16{-32768, 32767}, ValueArray},
	{"a.u32", []uint32{7, 1 << 31}, ValueArray},
	{"a.i32", []int32{-1, 2, -3}, ValueArray},
	{"a.f32", []float32{0.5, -1.5, 1e30}, ValueArray},
	{"a.bool", []bool{true, false, true}, ValueArray},
	{"a.str", []string{"a", "", "ünïcode", "with\x00nul"}, ValueArray},
	{"a.u64", []uint64{math.MaxUint64, 0}, ValueArray},
	{"a.i64", []int64{math.MinInt64, math.MaxInt64}, ValueArray},
	{"a.f64", []float64{math.SmallestNonzeroFloat64, -2}, ValueArray},
	{"a.empty", []string{}, ValueArray},
	{"a.nested", []any{[]int32{1, 2}, []string{"x", "y"}, []any{[]uint8{9}}, []float32{}}, ValueArray},
	{"a.nested2", [][]uint16{{1}, {2, 3}, {}}, ValueArray},
}

func writeFile(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	return buf.Bytes()
}

// normalize turns [][]T into []any of []T, the form Interface returns.
func normalize(v any) any {
	if x, ok := v.([][]uint16); ok {
		out := make([]any, len(x))
		for i := range x {
			out[i] = x[i]
		}
		return out
	}
	return v
}

func TestWriterRoundTrip(t *testing.T) {
	for _, version := range []uint32{2, 3} {
		for _, align := range []int{0, 1, 8, 64, 4096} {
			w := NewWriter()
			w.Version = version
			if align != 0 {
				require.NoError(t, w.SetAlignment(align))
			}
			for _, c := range roundTripValues {
				require.NoError(t, w.Set(c.key, c.v), c.key)
			}
			rng := rand.New(rand.NewPCG(1, uint64(align)))
			type tt struct {
				name  string
				typ   Type
				shape []int64
				data  []byte
			}
			var want []tt
			for i, typ := range Types() {
				shape := []int64{int64(typ.BlockSize() * (1 + i%3)), int64(1 + i%4)}
				if i%5 == 0 {
					shape = append(shape, 2)
				}
				if i%7 == 0 {
					shape = append(shape, 3)
				}
				rb, err := typ.RowBytes(shape[0])
				require.NoError(t, err)
				n := rb
				for _, d := range shape[1:] {
					n *= d
				}
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				name := "blk." + typ.String() + ".weight"
				require.NoError(t, w.AddTensor(name, typ, shape, data))
				want = append(want, tt{name, typ, shape, data})
			}
			file := writeFile(t, w)
			f, err := Parse(file)
			require.NoError(t, err, "version %d align %d", version, align)
			assert.Equal(t, version, f.Version)
			wantAlign := int64(align)
			if align == 0 {
				wantAlign = DefaultAlignment
			}
			assert.Equal(t, wantAlign, f.Alignment)

			var keys []string
			if align != 0 {
				keys = append(keys, KeyAlignment)
			}
			for _, c := range roundTripValues {
				keys = append(keys, c.key)
				v, ok := f.Lookup(c.key)
				require.True(t, ok, c.key)
				assert.Equal(t, c.typ, v.Type(), c.key)
				got, err := v.Interface()
				require.NoError(t, err, c.key)
				assert.Equal(t, normalize(c.v), got, c.key)
			}
			assert.Equal(t, keys, f.Keys())

			require.Len(t, f.Tensors(), len(want))
			for i, w := range want {
				got := f.Tensors()[i]
				assert.Equal(t, w.name, got.Name)
				assert.Equal(t, w.typ, got.Type)
				assert.Equal(t, w.shape, got.Shape)
				assert.Equal(t, w.data, got.Data, w.name)
				assert.Zero(t, got.Offset%wantAlign, w.name)
				byName, ok := f.Tensor(w.name)
				require.True(t, ok)
				assert.Same(t, got, byName)
			}
		}
	}
}

func TestWriterSetReplacesInPlace(t *testing.T) {
	w := NewWriter()
	require.NoError(t, w.Set("a", uint32(1)))
	require.NoError(t, w.Set("b", "x"))
	require.NoError(t, w.Set("a", "now a string"))
	f, err := Parse(writeFile(t, w))
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, f.Keys())
	v, _ := f.Lookup("a")
	s, err := v.String()
	require.NoError(t, err)
	assert.Equal(t, "now a string", s)
}

func TestWriterRejects(t *testing.T) {
	w := NewWriter()
	assert.Error(t, w.Set("k", 5), "plain int has no definite width")
	assert.Error(t, w.Set("k", map[string]int{}))
	assert.Error(t, w.Set("k", nil))
	assert.Error(t, w.Set("k", []any{uint8(1)}), "array of arrays with a scalar element")
	assert.Error(t, w.Set(KeyAlignment, uint32(3)))
	assert.Error(t, w.Set(KeyAlignment, int32(-32)))
	assert.Error(t, w.Set(KeyAlignment, "32"))
	assert.Error(t, w.SetAlignment(0))
	assert.Error(t, w.SetAlignment(48))
	assert.Error(t, w.AddTensor("t", F32, []int64{4}, make([]byte, 15)))
	assert.Error(t, w.AddTensor("t", Q4_0, []int64{16}, make([]byte, 9)), "row not a multiple of the block")
	assert.Error(t, w.AddTensor("t", F32, []int64{}, nil))
	assert.Error(t, w.AddTensor("t", F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)))
	assert.Error(t, w.AddTensor("t", F32, []int64{0}, nil))
	assert.Error(t, w.AddTensor("t", F32, []int64{-1}, nil))
	assert.Error(t, w.AddTensor("t", Type(4), []int64{32}, make([]byte, 18)))
	assert.Error(t, w.AddTensor("t", F32, []int64{1 << 40, 1 << 40}, nil))
	require.NoError(t, w.AddTensor("t", F32, []int64{4}, make([]byte, 16)))
	assert.Error(t, w.AddTensor("t", F32, []int64{4}, make([]byte, 16)), "duplicate")
}

// TestWriterCopiesRealModel re-writes stories260K through Set(Value) and
// AddTensor and checks the copy reads back the same.
func TestWriterCopiesRealModel(t *testing.T) {
	src, err := Open(shareddata.Path(t, "models/stories260K.gguf"))
	require.NoError(t, err)
	defer src.Close()
	w := NewWriter()
	for _, k := range src.Keys() {
		v, _ := src.Lookup(k)
		require.NoError(t, w.Set(k, v))
	}
	for _, tn := range src.Tensors() {
		require.NoError(t, w.AddTensor(tn.Name, tn.Type, tn.Shape, tn.Data))
	}
	dst, err := Parse(writeFile(t, w))
	require.NoError(t, err)
	assert.Equal(t, src.Keys(), dst.Keys())
	for _, k := range src.Keys() {
		a, _ := src.Lookup(k)
		b, _ := dst.Lookup(k)
		assert.Equal(t, a.Type(), b.Type(), k)
		assert.Equal(t, a.Raw(), b.Raw(), k)
		av, err := a.Interface()
		require.NoError(t, err, k)
		bv, err := b.Interface()
		require.NoError(t, err, k)
		assert.Equal(t, av, bv, k)
	}
	require.Len(t, dst.Tensors(), len(src.Tensors()))
	for i, a := range src.Tensors() {
		b := dst.Tensors()[i]
		assert.Equal(t, a.Name, b.Name)
		assert.Equal(t, a.Type, b.Type)
		assert.Equal(t, a.Shape, b.Shape)
		assert.Equal(t, a.Offset, b.Offset, "same layout rules give the same offsets")
		assert.True(t, bytes.Equal(a.Data, b.Data), a.Name)
	}
}
