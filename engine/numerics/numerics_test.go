package numerics

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var refModes = []Mode{LlamaCpp, LlamaCppNoRepack, Ik}

// TestReferenceLayoutsKeepGGUFBytes: the layouts the reference modes read
// in place (Layout's inPlace) pack rows to the same bytes, so reading the
// mapping instead of a packed copy computes the same.
func TestReferenceLayoutsKeepGGUFBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	set := kernels.Detect()
	for _, n := range refModes {
		for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.Q5_0, gguf.Q4_K, gguf.Q6_K, gguf.F32} {
			const rows, cols = 16, 512
			src := make([]byte, rows*kernels.RowBytes(typ, cols))
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			mt := &kernels.Matrix{Type: typ, Rows: rows, Cols: cols, Data: src}
			l, inPlace := n.Layout(set, mt)
			if !inPlace {
				continue
			}
			require.Equal(t, len(src), l.PackedSize(rows, cols), "%v %v", n, typ)
			dst := make([]byte, len(src))
			l.PackRows(mt, dst, 0, rows/l.Rows)
			assert.Equal(t, src, dst, "%v: %s packs %v rows to other bytes", n, l.Name, typ)
		}
	}
}

// TestFastModeTakesTheSetsLayouts: the fast mode never reads in place; it
// takes the kernel set's layout.
func TestFastModeTakesTheSetsLayouts(t *testing.T) {
	set := kernels.Detect()
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.Q4_K, gguf.Q6_K} {
		mt := &kernels.Matrix{Type: typ, Rows: 16, Cols: 256}
		l, inPlace := Fast.Layout(set, mt)
		assert.False(t, inPlace, "%v", typ)
		assert.Equal(t, set.Packed(typ), l, "%v", typ)
	}
}

// TestChecks: what each mode refuses, with arch.ErrUnsupported and a
// message naming it.
func TestChecks(t *testing.T) {
	for _, n := range append([]Mode{Fast}, refModes...) {
		require.NoError(t, n.CheckModel(Features{HeadDim: 64}), "%v", n)
		require.NoError(t, n.CheckSession(false), "%v", n)
		for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_K, gguf.Q6_K} {
			assert.NoError(t, n.CheckMatrix("w", &kernels.Matrix{Type: typ, Rows: 8, Cols: 256}), "%v %v", n, typ)
		}
	}
	for _, c := range []struct {
		f    Features
		says string
	}{
		{Features{HeadDim: 8}, "head size 8"},
		{Features{HeadDim: 64, NonCausal: true}, "encoders"},
		{Features{HeadDim: 64, LayerNorm: true}, "layer norms"},
		{Features{HeadDim: 64, AttnSoftcap: true}, "attention soft-capping"},
		{Features{HeadDim: 64, AttnSinks: true}, "attention sinks"},
	} {
		err := Ik.CheckModel(c.f)
		assert.True(t, errors.Is(err, arch.ErrUnsupported), "%v", err)
		assert.ErrorContains(t, err, c.says)
		for _, n := range []Mode{Fast, LlamaCpp, LlamaCppNoRepack} {
			assert.NoError(t, n.CheckModel(c.f), "%v %+v", n, c.f)
		}
	}
	err := Ik.CheckSession(true)
	assert.True(t, errors.Is(err, arch.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "f32 KV cache")
	for _, n := range []Mode{Fast, LlamaCpp, LlamaCppNoRepack} {
		assert.NoError(t, n.CheckSession(true), "%v", n)
	}
	// q4_1 is followed by the llama.cpp modes, not by ik; q5_1 by none.
	q41 := &kernels.Matrix{Type: gguf.Q4_1, Rows: 8, Cols: 256}
	assert.NoError(t, LlamaCpp.CheckMatrix("w", q41))
	err = Ik.CheckMatrix("blk.0.attn_q.weight", q41)
	assert.True(t, errors.Is(err, arch.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "blk.0.attn_q.weight is q4_1")
	q51 := &kernels.Matrix{Type: gguf.Q5_1, Rows: 8, Cols: 256}
	assert.NoError(t, Fast.CheckMatrix("w", q51))
	for _, n := range refModes {
		assert.True(t, errors.Is(n.CheckMatrix("w", q51), arch.ErrUnsupported), "%v", n)
	}
	for _, n := range []Mode{Fast, LlamaCpp, LlamaCppNoRepack} {
		assert.NoError(t, n.CheckPositions(1<<20), "%v", n)
	}
	for _, n := range []Mode{Fast, LlamaCpp, LlamaCppNoRepack} {
		assert.NoError(t, n.CheckBatch(512), "%v", n)
	}
	assert.NoError(t, Ik.CheckBatch(ikMaxBatch))
	err = Ik.CheckBatch(32)
	assert.True(t, errors.Is(err, arch.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "a batch of 32 tokens")
	assert.NoError(t, Ik.CheckPositions(ikKStep))
	err = Ik.CheckPositions(ikKStep + 1)
	assert.True(t, errors.Is(err, arch.ErrUnsupported), "%v", err)
	assert.Contains(t, err.Error(), "129 positions")
	assert.False(t, Mode(4).Valid())
	assert.False(t, Mode(-1).Valid())
	assert.Equal(t, "llamacpp-norepack", LlamaCppNoRepack.String())
	assert.Equal(t, "Numerics(9)", Mode(9).String())
}

// TestOps: the ik mode brings its own attention (f16 cache), norm and
// scale placement; the others leave attention to the engine, and the
// reference modes chunk prompts as their engines do.
func TestOps(t *testing.T) {
	set := kernels.Detect()
	o := Fast.Ops(set, SessionShape{HeadDim: 64})
	assert.Nil(t, o.Attend)
	assert.True(t, o.GroupAttention)
	assert.False(t, o.GGMLDecode)
	assert.Zero(t, o.Batch)
	assert.True(t, Fast.Ops(set, SessionShape{HeadDim: 64, GGMLDecode: true}).GGMLDecode)
	assert.False(t, Fast.Ops(set, SessionShape{HeadDim: 64, KVF32: true}).GroupAttention)
	o = LlamaCpp.Ops(set, SessionShape{HeadDim: 64})
	assert.Nil(t, o.Attend)
	assert.True(t, o.GGMLDecode)
	assert.Equal(t, RefUbatch, o.Batch)
	o = Ik.Ops(set, SessionShape{HeadDim: 64})
	require.NotNil(t, o.Attend)
	assert.True(t, o.QScaleInAttention)
	assert.False(t, o.GroupAttention)
	assert.GreaterOrEqual(t, o.AttendScratch, ikKStep)
}

// TestAttendIk checks AttendIk against attention computed in float64 (it
// differs only by float32 rounding), over several 128-key blocks, a
// window that starts mid-block and keys and values strided as in the
// cache.
func TestAttendIk(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const hd, kvHeads, cells = 32, 2, 300
	kStride := kvHeads * hd
	K := make([]uint16, cells*kStride)
	V := make([]uint16, kStride*cells)
	for i := range K {
		K[i] = kernels.F32ToF16(float32(r.NormFloat64()))
		V[i] = kernels.F32ToF16(float32(r.NormFloat64()))
	}
	q := make([]float32, hd)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	for _, win := range [][2]int{{0, 0}, {0, 5}, {0, 299}, {150, 299}, {131, 260}} {
		g := 1
		h := Head{
			Q: q, Out: make([]float32, hd),
			K: K[g*hd:], KStride: kStride, V: V[g*hd*cells:], VStride: cells,
			First: win[0], Pos: win[1], Scale: 0.25, Scores: make([]float32, ikKStep),
		}
		AttendIk(h)
		// float64 softmax attention over cells First..Pos.
		var w []float64
		mx := math.Inf(-1)
		for c := win[0]; c <= win[1]; c++ {
			var d float64
			for i := range q {
				d += float64(q[i]) * float64(kernels.F16ToF32(K[c*kStride+g*hd+i]))
			}
			w = append(w, 0.25*d)
			mx = max(mx, 0.25*d)
		}
		var sum float64
		for i := range w {
			w[i] = math.Exp(w[i] - mx)
			sum += w[i]
		}
		for d := range hd {
			var want float64
			for i, c := 0, win[0]; c <= win[1]; i, c = i+1, c+1 {
				want += w[i] / sum * float64(kernels.F16ToF32(V[(g*hd+d)*cells+c]))
			}
			assert.InDelta(t, want, h.Out[d], 1e-4, "window %v dim %d", win, d)
		}
	}
}
