package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// TestSplitF16Exact: every finite f16 value is the sum of its two bf16
// halves, exactly.
func TestSplitF16Exact(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		hi, lo := splitF16(uint16(h))
		require.Equal(t, f, BF16ToF32(hi)+BF16ToF32(lo), "f16 %#04x", h)
	}
}

// amxFixture is a random f16 group of 32 rows of cols values, its AMX
// packing, and nTok tokens as ActBF16x2 (and as f16, for the row kernel).
func amxFixture(r *rand.Rand, cols, nTok int) (w, g, x, x16 []byte) {
	w = make([]byte, amxRows*2*cols)
	for i := 0; i < amxRows*cols; i++ {
		binary.LittleEndian.PutUint16(w[2*i:], F32ToF16(float32(r.NormFloat64()*0.05)))
	}
	g = make([]byte, amxF16.GroupBytes(cols))
	amxF16.Pack(g, w, cols)
	x = make([]byte, nTok*cols/qk32*bytesBF16x2)
	x16 = make([]byte, nTok*2*cols)
	v := make([]float32, cols)
	for k := 0; k < nTok; k++ {
		for i := range v {
			v[i] = float32(r.NormFloat64())
			if i%97 == 5 {
				v[i] *= 1e-6 // values whose lo half is small or zero
			}
		}
		QuantizeBF16x2(v, x[k*cols/qk32*bytesBF16x2:])
		F32RowToF16(v, x16[k*2*cols:])
	}
	return w, g, x, x16
}

// TestAMXF16Dot checks the AMX f16 layout's Dot against its twin and both
// against the exact dot of the f16 weights and activations (float64, to
// within the layout's bound), for
// token counts that fill two tiles, one, and parts of them. The twin adds
// the products in the order of Intel's description of TDPBF16PS; the
// hardware's internal order and rounding differ from it (measured: about
// half of the results differ in their last bits, and no simple model
// matched them all), so the two agree within f32 rounding of the sum, not
// bit for bit.
func TestAMXF16Dot(t *testing.T) {
	if !amxReady() {
		t.Log("no AMX tiles on this CPU or OS: Dot is its twin here")
	}
	r := rand.New(rand.NewPCG(3, 17))
	for _, cols := range []int{32, 96, 768} {
		for _, nTok := range []int{1, 5, 16, 17, 31, 32} {
			w, g, x, x16 := amxFixture(r, cols, nTok)
			ab := cols / qk32 * bytesBF16x2
			ys := 40 // a y stride wider than the group
			got := make([]float32, nTok*ys)
			want := make([]float32, nTok*ys)
			amxF16.Dot(cols, g, x, ab, nTok, got, ys)
			amxF16.DotGeneric(cols, g, x, ab, nTok, want, ys)
			for k := 0; k < nTok; k++ {
				for n := 0; n < amxRows; n++ {
					i := k*ys + n
					var exact, scale float64
					for c := 0; c < cols; c++ {
						a := float64(F16ToF32(binary.LittleEndian.Uint16(w[n*2*cols+2*c:])))
						b := float64(F16ToF32(binary.LittleEndian.Uint16(x16[k*2*cols+2*c:])))
						exact += a * b
						scale += math.Abs(a * b)
					}
					// The dropped lo*lo terms (each at most 2^-16 of its
					// product) and f32 rounding of the sums.
					tol := (0x1p-16 + 1e-6) * scale
					require.InDelta(t, exact, float64(got[i]), tol, "cols %d, %d tokens: token %d row %d", cols, nTok, k, n)
					require.InDelta(t, exact, float64(want[i]), tol, "twin: cols %d, %d tokens: token %d row %d", cols, nTok, k, n)
				}
				for n := amxRows; n < ys; n++ {
					require.Zero(t, got[k*ys+n], "a store past the group's rows")
				}
			}
		}
	}
}

// TestAMXF16MatMul: a matrix in the AMX f16 layout gives through MatMul and
// MatVec what the twin gives (within f32 rounding, TestAMXF16Dot), and a
// token's result is the same bit for bit alone and at any place in a
// batch, with row ranges that split groups; rows past the whole groups are
// refused (the GGUF-layout kernels do not read its activations).
func TestAMXF16MatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	const rows, cols, nTok = 32 * 3, 128, 70
	w := make([]byte, (rows+5)*2*cols)
	for i := 0; i < (rows+5)*cols; i++ {
		binary.LittleEndian.PutUint16(w[2*i:], F32ToF16(float32(r.NormFloat64()*0.05)))
	}
	l := &amxF16
	m := Matrix{Type: gguf.F16, Rows: rows, Cols: cols, Data: w[:rows*2*cols], Layout: l}
	m.Packed = make([]byte, l.PackedSize(rows, cols))
	l.PackRows(&m, m.Packed, 0, rows/l.Rows)
	require.Equal(t, ActBF16x2, ActType(&m))
	ab := ActBytes(&m, cols)
	require.Equal(t, cols*4, ab)
	x := make([]byte, nTok*ab)
	v := make([]float32, cols)
	ks := Detect()
	for k := 0; k < nTok; k++ {
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		ks.QuantizeAct(ActBF16x2, v, x[k*ab:(k+1)*ab])
	}
	y := make([]float32, nTok*rows)
	ks.MatMul(&m, x, nTok, y, 0, 20)
	ks.MatMul(&m, x, nTok, y, 20, rows)
	want := make([]float32, nTok*rows)
	for gi := 0; gi < rows/amxRows; gi++ {
		g := m.Packed[gi*l.GroupBytes(cols):]
		for t0 := 0; t0 < nTok; t0 += amxMaxTok {
			n := min(amxMaxTok, nTok-t0)
			l.DotGeneric(cols, g, x[t0*ab:], ab, n, want[t0*rows+gi*amxRows:], rows)
		}
	}
	for i := range want {
		require.InDelta(t, want[i], y[i], 1e-5, "token %d row %d", i/rows, i%rows)
	}
	for _, k := range []int{0, 17, 69} {
		one := make([]float32, rows)
		ks.MatVec(&m, x[k*ab:(k+1)*ab], one, 0, rows)
		assert.Equal(t, y[k*rows:(k+1)*rows], one, "token %d alone", k)
	}
	odd := m
	odd.Rows, odd.Data = rows+5, w
	assert.Panics(t, func() { ks.MatMul(&odd, x, nTok, make([]float32, nTok*odd.Rows), 0, odd.Rows) })
}

// BenchmarkAMXF16 is one group against 32 tokens, 768 columns.
func BenchmarkAMXF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	_, g, x, _ := amxFixture(r, 768, 32)
	y := make([]float32, 32*amxRows)
	b.SetBytes(int64(len(g)))
	for b.Loop() {
		amxF16.Dot(768, g, x, 768/qk32*bytesBF16x2, 32, y, amxRows)
	}
	b.ReportMetric(float64(b.N)*32*amxRows*768*2/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestQuantizeBF16x2Sets: every set's ActBF16x2 quantizer gives the
// generic one's bytes, on values that round up, down, to subnormal halves
// and past the f16 range.
func TestQuantizeBF16x2Sets(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	src := make([]float32, 32*7)
	for i := range src {
		switch i % 5 {
		case 0:
			src[i] = float32(r.NormFloat64())
		case 1:
			src[i] = float32(r.NormFloat64() * 1e-6)
		case 2:
			src[i] = float32(r.NormFloat64() * 1e4)
		case 3:
			src[i] = float32(r.NormFloat64() * 1e5)
		default:
			src[i] = float32(r.NormFloat64() * 1e-9)
		}
	}
	want := make([]byte, len(src)/qk32*bytesBF16x2)
	QuantizeBF16x2(src, want)
	for _, ks := range testSets(t) {
		got := make([]byte, len(want))
		ks.QuantizeAct(ActBF16x2, src, got)
		assert.Equal(t, want, got, ks.Name())
	}
}

// BenchmarkAMXF16MatMul is bge-base's ffn products (768x3072 and
// 3072x768) for 2048 tokens on one thread, at several token tiles.
func BenchmarkAMXF16MatMul(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	ks := Detect()
	for _, shape := range [][2]int{{3072, 768}, {768, 3072}} {
		rows, cols := shape[0], shape[1]
		const nTok = 2048
		w := make([]byte, rows*2*cols)
		for i := 0; i < rows*cols; i++ {
			binary.LittleEndian.PutUint16(w[2*i:], F32ToF16(float32(r.NormFloat64()*0.05)))
		}
		v := make([]float32, cols)
		ab := cols / qk32 * bytesBF16x2
		x := make([]byte, nTok*ab)
		for k := 0; k < nTok; k++ {
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			ks.QuantizeAct(ActBF16x2, v, x[k*ab:])
		}
		y := make([]float32, nTok*rows)
		for _, tb := range []int{512 << 10, 1 << 20, 3 << 19} {
			l := amxF16
			l.TileBytes = tb
			m := Matrix{Type: gguf.F16, Rows: rows, Cols: cols, Data: w, Layout: &l}
			m.Packed = make([]byte, l.PackedSize(rows, cols))
			l.PackRows(&m, m.Packed, 0, rows/l.Rows)
			b.Run(fmt.Sprintf("%dx%d/tile%dK", rows, cols, tb>>10), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0 := threadCPU()
				for b.Loop() {
					ks.MatMul(&m, x, nTok, y, 0, rows)
				}
				b.ReportMetric(float64(b.N)*nTok*float64(rows*cols)*2/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(float64(b.N)*nTok*float64(rows*cols)*2/(threadCPU()-c0).Seconds()/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// threadCPU is the calling thread's CPU time (user and system), which the
// other processes of a busy machine do not inflate as they do wall time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
