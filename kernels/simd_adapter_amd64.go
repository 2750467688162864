//go:build amd64

package kernels

import (
	"fmt"
	"math/bits"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
)

// One adapter turns each assembly row kernel (and four-token kernel) into
// the RowDotFunc, RowsDotFunc and TokensDotFunc the sets hold, with the
// bounds checks that keep the assembly inside its slices and the block
// geometry from gguf's table. The assembly is called directly from a
// switch, not through a func value, so the pointers handed to it do not
// escape and a one-row call keeps its result on the stack.

// runRows runs multi-row kernel k: y[i] = dot(row i, x) for nrows rows
// stride bytes apart, nb blocks (values, for F16 and F32) each.
func runRows(k asmKernel, w *byte, stride, nrows int, x *byte, nb int, y *float32) {
	f16 := &f16Table[0]
	switch k {
	case asmQ8_0RowsAVX2:
		dotQ8_0RowsAVX2(w, stride, nrows, x, nb, y, f16)
	case asmQ4_0RowsAVX2:
		dotQ4_0RowsAVX2(w, stride, nrows, x, nb, y, f16)
	case asmQ4_1RowsAVX2:
		dotQ4_1RowsAVX2(w, stride, nrows, x, nb, y, f16)
	case asmQ5_0RowsAVX2:
		dotQ5_0RowsAVX2(w, stride, nrows, x, nb, y, f16)
	case asmQ4_KRowsAVX2:
		dotQ4_KRowsAVX2(w, stride, nrows, x, nb, y)
	case asmQ6_KRowsAVX2:
		dotQ6_KRowsAVX2(w, stride, nrows, x, nb, y)
	case asmF16RowsAVX2:
		dotF16RowsAVX2(w, stride, nrows, x, nb, y)
	case asmF32RowsAVX2:
		dotF32RowsAVX2(w, stride, nrows, x, nb, y)
	case asmQ8_0RowsAVX512:
		dotQ8_0RowsAVX512(w, stride, nrows, x, nb, y, f16)
	case asmQ4_0RowsAVX512:
		dotQ4_0RowsAVX512(w, stride, nrows, x, nb, y, f16)
	case asmQ5_0RowsAVX512:
		dotQ5_0RowsAVX512(w, stride, nrows, x, nb, y, f16)
	case asmMXFP4RowsAVX2:
		dotMXFP4RowsAVX2(w, stride, nrows, x, nb, y, f16)
	case asmMXFP4RowsAVX512:
		dotMXFP4RowsAVX512(w, stride, nrows, x, nb, y, f16)
	default:
		panic(fmt.Sprintf("kernels: %d is not a multi-row kernel", k))
	}
}

// runTok4 runs four-token kernel k: y[0..3] = dot(w, token t) for four
// tokens xstride bytes apart, nb blocks each.
func runTok4(k asmKernel, w, x *byte, xstride, nb int, y *float32) {
	f16 := &f16Table[0]
	switch k {
	case asmQ8_0Tok4AVX2:
		dotQ8_0Tok4AVX2(w, x, xstride, nb, y, f16)
	case asmQ4_0Tok4AVX2:
		dotQ4_0Tok4AVX2(w, x, xstride, nb, y, f16)
	case asmQ4_1Tok4AVX2:
		dotQ4_1Tok4AVX2(w, x, xstride, nb, y, f16)
	case asmQ4_KTok4AVX2:
		dotQ4_KTok4AVX2(w, x, xstride, nb, y)
	case asmQ6_KTok4AVX2:
		dotQ6_KTok4AVX2(w, x, xstride, nb, y)
	case asmF16Tok4AVX512:
		dotF16Tok4AVX512(w, x, xstride, nb, y)
	case asmF16Tok4AVX2:
		dotF16Tok4AVX2(w, x, xstride, nb, y)
	case asmMXFP4Tok4AVX2:
		dotMXFP4Tok4AVX2(w, x, xstride, nb, y, f16)
	case asmMXFP4Tok4AVX512:
		dotMXFP4Tok4AVX512(w, x, xstride, nb, y, f16)
	default:
		panic(fmt.Sprintf("kernels: %d is not a four-token kernel", k))
	}
}

// runTile runs tile kernel k: three rows wstride bytes apart against
// 4*ntok4 tokens xstride bytes apart, y[t*ystride+4*r] (bytes).
func runTile(k asmKernel, w *byte, wstride int, x *byte, xstride, ntok4, nb int, y *float32, ystride int) {
	switch k {
	case asmF16Tile3x4AVX512:
		dotF16Tile3x4AVX512(w, wstride, x, xstride, ntok4, nb, y, ystride)
	case asmF16Tile3x4AVX2:
		dotF16Tile3x4AVX2(w, wstride, x, xstride, ntok4, nb, y, ystride)
	default:
		panic(fmt.Sprintf("kernels: %d is not a tile kernel", k))
	}
}

// asmGeom is what the adapters need of a weight type: blocks per row as
// a shift (block sizes are powers of two), and block bytes of the weights
// and of their activations.
type asmGeom struct {
	name   string
	shift  uint
	wb, ab int
}

func geomFor(t gguf.Type) asmGeom {
	bs := t.BlockSize()
	if bs == 0 || bs&(bs-1) != 0 {
		panic(fmt.Sprintf("kernels: %v blocks of %d values are not a power of two", t, bs))
	}
	vt := VecDotType(t)
	return asmGeom{name: t.String(), shift: uint(bits.TrailingZeros(uint(bs))), wb: t.BlockBytes(), ab: vt.BlockBytes() * bs / vt.BlockSize()}
}

// rowKernels adapts multi-row kernel k for weights of type t.
func rowKernels(t gguf.Type, k asmKernel) (RowDotFunc, RowsDotFunc) {
	g := geomFor(t)
	one := func(n int, w, x []byte) float32 {
		var y [1]float32
		nb := n >> g.shift
		checkRows(g.name, len(w), 0, 1, nb*g.wb, len(x), nb*g.ab)
		runRows(k, unsafe.SliceData(w), 0, 1, unsafe.SliceData(x), nb, &y[0])
		return y[0]
	}
	many := func(n int, w []byte, rowBytes int, x []byte, y []float32) {
		nb := n >> g.shift
		checkRows(g.name, len(w), rowBytes, len(y), nb*g.wb, len(x), nb*g.ab)
		runRows(k, unsafe.SliceData(w), rowBytes, len(y), unsafe.SliceData(x), nb, unsafe.SliceData(y))
	}
	return one, many
}

// tokKernel adapts four-token kernel tok4 for weights of type t: groups of
// four tokens, then the last nTok%4 through multi-row kernel row.
func tokKernel(t gguf.Type, tok4, row asmKernel) TokensDotFunc {
	g := geomFor(t)
	return func(n int, w, x []byte, xStride, nTok int, y []float32, yStride int) {
		nb := n >> g.shift
		checkTokens(g.name, len(w), nb*g.wb, len(x), xStride, nTok, nb*g.ab, len(y), yStride)
		if nb == 0 {
			for k := range nTok {
				y[k*yStride] = 0
			}
			return
		}
		xp := unsafe.Pointer(unsafe.SliceData(x))
		var out [4]float32
		k := 0
		for ; k+4 <= nTok; k += 4 {
			runTok4(tok4, &w[0], (*byte)(unsafe.Add(xp, k*xStride)), xStride, nb, &out[0])
			y[k*yStride], y[(k+1)*yStride], y[(k+2)*yStride], y[(k+3)*yStride] = out[0], out[1], out[2], out[3]
		}
		for ; k < nTok; k++ {
			runRows(row, &w[0], 0, 1, (*byte)(unsafe.Add(xp, k*xStride)), nb, &y[k*yStride])
		}
	}
}

// The tile kernels' shape: rows by tokens, and the block count (values,
// for F16) they need a multiple of.
const (
	tileRows  = 3
	tileBlock = 8
)

// tileKernel adapts tile kernel k for weights of type t: the rows in
// groups of three against the tokens in groups of four; the last
// nRows%3 rows take tokens (the four-token kernel), the last nTok%4
// tokens rows (the multi-row kernel), and rows of other lengths tokens.
// All compute a (row, token) pair as the row kernel does.
func tileKernel(t gguf.Type, k asmKernel, rows RowsDotFunc, tokens TokensDotFunc) TileDotFunc {
	if rows == nil || tokens == nil {
		panic(fmt.Sprintf("kernels: the %v tile kernel needs the rows and four-token kernels of its level", t))
	}
	g := geomFor(t)
	return func(n int, w []byte, rowBytes, nRows int, x []byte, xStride, nTok int, y []float32, yStride int) {
		if nRows <= 0 || nTok <= 0 {
			return
		}
		nb := n >> g.shift
		r3, t4 := 0, nTok-nTok%tileTokens
		if nb%tileBlock == 0 && t4 > 0 {
			r3 = nRows - nRows%tileRows
		}
		if r3 > 0 {
			checkRows(g.name, len(w), rowBytes, nRows, nb*g.wb, len(x), 0)
			checkTokens(g.name, rowBytes, 0, len(x), xStride, nTok, nb*g.ab, len(y), yStride)
			if nRows-1 >= len(y) || (nTok-1)*yStride+nRows-1 >= len(y) {
				panic(fmt.Sprintf("kernels: %s tile dot: %d rows of %d tokens (y stride %d) do not fit %d results", g.name, nRows, nTok, yStride, len(y)))
			}
			for r := 0; r < r3; r += tileRows {
				runTile(k, &w[r*rowBytes], rowBytes, &x[0], xStride, t4/tileTokens, nb, &y[r], 4*yStride)
			}
		}
		for r := r3; r < nRows; r++ {
			tokens(n, w[r*rowBytes:], x, xStride, t4, y[r:], yStride)
		}
		for kk := t4; kk < nTok; kk++ {
			rows(n, w, rowBytes, x[kk*xStride:], y[kk*yStride:kk*yStride+nRows])
		}
	}
}

// apply puts the kernels k names over tk, the kernels of type t so far;
// rows is the rows kernel of this level or the nearest below, which a
// four-token kernel's last tokens take. A multi-token kernel must compute
// each token exactly as that rows kernel does (MatMul is batch-invariant),
// so a level that replaces the rows kernel without a multi-token kernel
// of its own drops the one below.
func (k simdKernels) apply(t gguf.Type, tk *typeKernels, rows asmKernel) {
	if k.rows != 0 {
		tk.row, tk.rows = rowKernels(t, k.rows)
		tk.tokens, tk.tile = nil, nil
	}
	if k.tok4 != 0 {
		tk.tokens = tokKernel(t, k.tok4, rows)
	}
	if k.tile != 0 {
		tk.tile = tileKernel(t, k.tile, tk.rows, tk.tokens)
	}
}
