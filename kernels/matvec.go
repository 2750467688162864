package kernels

import (
	"fmt"

	"github.com/moonlm/moonlm/gguf"
)

// Matrix is a weight matrix in its GGUF block layout: Rows rows of Cols
// values each, row-major (ggml's ne0 = Cols is the contiguous dimension).
type Matrix struct {
	Type       gguf.Type
	Rows, Cols int
	Data       []byte
	// Packed, when not nil, holds the first Rows/Layout.Rows whole groups
	// of rows repacked in Layout (see PackedLayout); the kernels then read
	// those rows from Packed and only the remaining rows from Data.
	Packed []byte
	Layout *PackedLayout
}

// RowBytes returns the bytes of one row.
func (m *Matrix) RowBytes() int {
	return RowBytes(m.Type, m.Cols)
}

// Row returns the bytes of row r.
func (m *Matrix) Row(r int) []byte {
	rb := m.RowBytes()
	return m.Data[r*rb : (r+1)*rb]
}

// ActivationBytes returns the bytes of n activation values converted to
// VecDotType(t), the size of xq per token for MatVec and MatMul.
func ActivationBytes(t gguf.Type, n int) int {
	return RowBytes(VecDotType(t), n)
}

// TokensDotFunc computes, for one weight row w, y[k*yStride] = dot(w, x[k])
// for k < nTok tokens whose activations lie xStride bytes apart in x. SIMD
// sets may provide it to reuse a weight row across tokens; nil entries
// fall back to a RowDotFunc loop.
type TokensDotFunc func(n int, w, x []byte, xStride, nTok int, y []float32, yStride int)

// TileDotFunc computes y[k*yStride+r] = dot(row r, x[k]) for nRows
// consecutive weight rows of rowBytes bytes each, starting at w, and
// nTok tokens xStride bytes apart in x. SIMD sets may provide it to reuse
// each step's weights across tokens and its activations across rows at
// once (a register tile); nil falls back to TokensDotFunc per row.
type TileDotFunc func(n int, w []byte, rowBytes, nRows int, x []byte, xStride, nTok int, y []float32, yStride int)

// MatVec sets y[r] = dot(row r, xq) for r in [r0, r1), where xq holds the
// activations converted by QuantizeRow(VecDotType(m.Type), x, xq).
func (s *Set) MatVec(m *Matrix, xq []byte, y []float32, r0, r1 int) {
	if m.Packed != nil {
		r0 = splitPacked(m, xq, 1, y, r0, r1)
	}
	if r0 >= r1 {
		return
	}
	t := m.Type
	f := s.dotFor(t, "MatVec")
	rb := m.RowBytes()
	n := m.Cols
	if g := s.types[t].rows; g != nil {
		g(n, m.Data[r0*rb:r1*rb], rb, xq, y[r0:r1])
		return
	}
	y = y[:r1]
	for r := r0; r < r1; r++ {
		y[r] = f(n, m.Data[r*rb:(r+1)*rb], xq)
	}
}

// dotFor returns the dispatched row dot for t, panicking with context for a
// type without one (the engine checks Supported when it loads a model).
func (s *Set) dotFor(t gguf.Type, who string) RowDotFunc {
	if int(t) < numTypes {
		if f := s.types[t].row; f != nil {
			return f
		}
	}
	panic(fmt.Sprintf("kernels: %s: unsupported weight type %v", who, t))
}

// matMulTileBytes bounds the activations of one token tile, so a tile stays
// in L2 while every weight row is streamed over it once.
const matMulTileBytes = 128 << 10

// matMulRowBlockBytes bounds the weights of one block of rows, which stay
// in L1 while a tile's tokens pass over them.
const matMulRowBlockBytes = 16 << 10

// tileTokens is the token grouping of the tile kernels: a token tile of a
// multiple of it leaves none of its tokens to the slower kernels.
const tileTokens = 4

// MatMul computes y[tok*m.Rows + r] = dot(row r, token tok) for tok < nTok
// and r in [r0, r1). xq holds nTok activation rows converted with
// QuantizeRow(VecDotType(m.Type), ...), ActivationBytes(m.Type, m.Cols)
// bytes each, consecutive. Each weight row is read from memory once per
// tile of tokens.
//
// MatMul is batch-invariant: each token's row is computed with the
// arithmetic of the kernel MatVec uses, in the same order, so a token's
// result is bit for bit the same whatever the batch size and its place in
// the batch (batched decoding of several sequences and prefix reuse rely
// on it). Where the set has a multi-token kernel for the type, which
// unpacks each weight block once for several tokens and computes each of
// them as the row kernel does, a row meets the tile's tokens in one call;
// where it has a tile kernel (several rows against four tokens, each
// pair's arithmetic the row kernel's), the rows meet the tile's tokens in
// one call; otherwise each token takes the row kernels over a block of
// rows that stays in L1.
func (s *Set) MatMul(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	if r0 >= r1 || nTok <= 0 {
		return
	}
	if nTok == 1 {
		s.MatVec(m, xq, y, r0, r1)
		return
	}
	if m.Packed != nil {
		if r0 = splitPacked(m, xq, nTok, y, r0, r1); r0 >= r1 {
			return
		}
	}
	t := m.Type
	f := s.dotFor(t, "MatMul")
	rb := m.RowBytes()
	n := m.Cols
	ab := ActivationBytes(t, n)
	_ = xq[nTok*ab-1]
	_ = y[(nTok-1)*m.Rows+r1-1]
	tile := matMulTileBytes / max(ab, 1)
	tile = max(1, min(tile, nTok))
	block := max(1, matMulRowBlockBytes/max(rb, 1))
	rows := s.types[t].rows
	tokens := s.types[t].tokens
	if tk := s.types[t].tile; tk != nil {
		if tile > tileTokens {
			tile -= tile % tileTokens
		}
		for t0 := 0; t0 < nTok; t0 += tile {
			t1 := min(t0+tile, nTok)
			tk(n, m.Data[r0*rb:r1*rb], rb, r1-r0, xq[t0*ab:t1*ab], ab, t1-t0, y[t0*m.Rows+r0:], m.Rows)
		}
		return
	}
	for t0 := 0; t0 < nTok; t0 += tile {
		t1 := min(t0+tile, nTok)
		if tokens != nil {
			for r := r0; r < r1; r++ {
				tokens(n, m.Data[r*rb:(r+1)*rb], xq[t0*ab:t1*ab], ab, t1-t0, y[t0*m.Rows+r:], m.Rows)
			}
			continue
		}
		for b0 := r0; b0 < r1; b0 += block {
			b1 := min(b0+block, r1)
			for k := t0; k < t1; k++ {
				x := xq[k*ab : (k+1)*ab]
				yk := y[k*m.Rows : k*m.Rows+b1]
				if rows != nil {
					rows(n, m.Data[b0*rb:b1*rb], rb, x, yk[b0:b1])
					continue
				}
				for r := b0; r < b1; r++ {
					yk[r] = f(n, m.Data[r*rb:(r+1)*rb], x)
				}
			}
		}
	}
}
