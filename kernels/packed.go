package kernels

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/moonlm/moonlm/gguf"
)

// PackedLayout is a repacked weight layout for one weight type: groups of
// Rows consecutive rows stored interleaved so that a SIMD kernel keeps one
// row per vector lane. The activations of a token are then broadcast once
// for all the rows of a group and no horizontal sums are needed, which is
// what makes prefill fast on VNNI (VPDPBUSD with a broadcast operand).
//
// A layout is a pure function of the original bytes: packing the same rows
// always gives the same bytes, so packed data can be cached on disk under
// Name.
type PackedLayout struct {
	// Name identifies the byte layout, including its version (for example
	// "q4_K.r16.v1"); a change to the bytes must change the name.
	Name string
	// Type is the GGUF weight type the layout packs.
	Type gguf.Type
	// Rows is the number of rows per group.
	Rows int
	// MaxTok is the largest token count one Dot call takes.
	MaxTok int
	// GroupBytes returns the size of one packed group of Rows rows of cols
	// values (cols a multiple of the type's block size).
	GroupBytes func(cols int) int
	// Pack writes the packed form of Rows consecutive rows, src (Rows *
	// RowBytes(Type, cols) bytes in the GGUF layout), to dst
	// (GroupBytes(cols) bytes).
	Pack func(dst, src []byte, cols int)
	// Dot sets y[t*yStride+r] = dot(row r of group g, token t) for r <
	// Rows and t < nTok (1 <= nTok <= MaxTok), where the tokens'
	// activations (VecDotType(Type), ActivationBytes(Type, cols) bytes each)
	// lie xStride bytes apart in x.
	Dot func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
	// DotGeneric is the pure-Go twin of Dot that tests compare against.
	DotGeneric func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)
	// Act is the activation format Dot reads when it is not
	// VecDotType(Type) (zero): ActQ8_2 or ActBF16x2.
	Act gguf.Type
	// TileBytes, when not zero, bounds the activations of one token tile
	// of a matmul instead of packedTileBytes.
	TileBytes int
}

// ActType returns the activation format m's products read: its layout's
// Act, else VecDotType of its type.
func ActType(m *Matrix) gguf.Type {
	if m.Layout != nil && m.Layout.Act != 0 {
		return m.Layout.Act
	}
	return VecDotType(m.Type)
}

// ActBytes returns the bytes of one token's activations for m (n values
// converted to ActType(m)).
func ActBytes(m *Matrix, n int) int {
	switch ActType(m) {
	case ActQ8_2:
		return n / qk32 * bytesQ8_2
	case ActBF16x2:
		return n / qk32 * bytesBF16x2
	}
	return ActivationBytes(m.Type, n)
}

// QuantizeAct converts src into activation format at (an ActType), with the
// fastest quantizer for it.
func (s *Set) QuantizeAct(at gguf.Type, src []float32, dst []byte) {
	switch at {
	case ActQ8_2:
		QuantizeQ8_2(src, dst)
		return
	case ActBF16x2:
		if !s.quantizeBF16x2Vec(src, dst) {
			QuantizeBF16x2(src, dst)
		}
		return
	}
	s.FastQuantizeRow(at, src, dst)
}

// maxPackedTile bounds Rows*MaxTok of every layout (the scratch tile of a
// partial group, packedScratch).
const maxPackedTile = amxRows * amxMaxTok

// q4kTile is the tile of the packed q4_K kernels (Rows*MaxTok).
const q4kTile = 128

// packedGroup is a packed layout's group geometry as its Dot kernels see
// it: rows per group, values per block (1<<shift, a shift so that the
// per-call arithmetic has no division), bytes of one block of all the
// group's rows, activation bytes per block and the most tokens per call.
type packedGroup struct {
	name                               string // the weight type, for messages
	rows, blockBytes, actBytes, maxTok int
	shift                              uint
	srcBytes                           int // one GGUF block of one row
}

// blockShift is log2 of block size n (32 or 256).
func blockShift(n int) uint { return uint(bits.TrailingZeros(uint(n))) }

// layout returns the layout of this geometry named name, of weight type
// typ, packing with pack and with dot as its Dot and DotGeneric (the SIMD
// sets copy it and set their own Dot).
func (p packedGroup) layout(name string, typ gguf.Type, pack func(dst, src []byte, cols int), dot func(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int)) PackedLayout {
	return PackedLayout{
		Name: name, Type: typ, Rows: p.rows, MaxTok: p.maxTok,
		GroupBytes: func(cols int) int { return (cols >> p.shift) * p.blockBytes },
		Pack:       pack, Dot: dot, DotGeneric: dot,
	}
}

// checkPack panics unless a Pack call's operands are in bounds (whole
// blocks, src holding the group's GGUF rows and dst their packed form) and
// returns the blocks per row and the GGUF row bytes.
func (p *packedGroup) checkPack(dst, src []byte, cols int) (nb, rb int) {
	nb = cols >> p.shift
	rb = nb * p.srcBytes
	if cols&(1<<p.shift-1) != 0 || len(src) < p.rows*rb || len(dst) < nb*p.blockBytes {
		panic(fmt.Sprintf("kernels: packing %s: %d cols need %d source and %d packed bytes, have %d and %d",
			p.name, cols, p.rows*rb, nb*p.blockBytes, len(src), len(dst)))
	}
	return nb, rb
}

// check panics unless one Dot call's operands are in bounds: whole blocks,
// 1..maxTok tokens, and slices that hold them (the whole extent, checked
// once: subslices could otherwise reach into capacity past len).
func (p *packedGroup) check(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	nb := cols >> p.shift
	if cols&(1<<p.shift-1) != 0 || nTok < 1 || nTok > p.maxTok ||
		len(g) < nb*p.blockBytes ||
		(nb > 0 && len(x) < (nTok-1)*xStride+nb*p.actBytes) ||
		len(y) < (nTok-1)*yStride+p.rows {
		p.outOfBounds(cols, len(g), len(x), xStride, nTok, len(y), yStride)
	}
}

// outOfBounds is check's panic, kept out of line so that check inlines
// into the kernels' wrappers.
//
//go:noinline
func (p *packedGroup) outOfBounds(cols, g, x, xStride, nTok, y, yStride int) {
	panic(fmt.Sprintf("kernels: packed %s dot: %d cols, %d tokens: group %d bytes, x %d bytes (stride %d), y %d (stride %d) out of bounds",
		p.name, cols, nTok, g, x, xStride, y, yStride))
}

// checkLayout reports whether l can serve weights of type t: its tile must
// fit matMulPacked's scratch, which only a partial group uses (a one-row
// layout has none).
func checkLayout(t gguf.Type, l *PackedLayout) error {
	if l.Type != t || l.Rows <= 0 || l.MaxTok <= 0 || (l.Rows > 1 && l.Rows*l.MaxTok > maxPackedTile) {
		return fmt.Errorf("kernels: packed layout %s (type %v, %d rows x %d tokens) cannot serve %v within the %d-value tile", l.Name, l.Type, l.Rows, l.MaxTok, t, maxPackedTile)
	}
	return nil
}

// Packed returns the packed layout the set offers for weights of type t,
// or nil: weights without one are used as mapped.
func (s *Set) Packed(t gguf.Type) *PackedLayout {
	if t >= numTypes {
		return nil
	}
	return s.types[t].packed
}

// WithPacked returns a copy of s whose packed layout for weight type t is
// l (nil: none), for a caller that packs with a layout of its own or wants
// a type left unpacked; s itself is unchanged.
func (s *Set) WithPacked(t gguf.Type, l *PackedLayout) (*Set, error) {
	if t >= numTypes {
		return nil, fmt.Errorf("kernels: WithPacked: type %v out of range", t)
	}
	if l != nil {
		if err := checkLayout(t, l); err != nil {
			return nil, err
		}
	}
	c := *s
	c.types[t].packed = l
	return &c, nil
}

// PackedSize returns the bytes of the packed form of a rows x cols matrix:
// its whole groups; the last rows%l.Rows rows stay in the GGUF layout.
func (l *PackedLayout) PackedSize(rows, cols int) int {
	return rows / l.Rows * l.GroupBytes(cols)
}

// PackRows packs groups [g0, g1) of m into dst, which holds the whole packed
// matrix (PackedSize(m.Rows, m.Cols) bytes): group g lands at
// g*GroupBytes. Ranges let callers pack in parallel.
func (l *PackedLayout) PackRows(m *Matrix, dst []byte, g0, g1 int) {
	if m.Type != l.Type {
		panic(fmt.Sprintf("kernels: packing %v rows with the %s layout", m.Type, l.Name))
	}
	rb := m.RowBytes()
	gb := l.GroupBytes(m.Cols)
	for g := g0; g < g1; g++ {
		l.Pack(dst[g*gb:(g+1)*gb], m.Data[g*l.Rows*rb:(g+1)*l.Rows*rb], m.Cols)
	}
}

// packedRows returns how many leading rows of m are served by its packed
// data (0 when it has none).
func (m *Matrix) packedRows() int {
	if m.Packed == nil {
		return 0
	}
	return m.Rows / m.Layout.Rows * m.Layout.Rows
}

// matMulPacked computes rows [r0, r1) (all within the packed rows) for nTok
// tokens from the packed data. Groups are the outer loop inside a token
// tile, so a group's weights stay in L1/L2 while the tile's tokens pass.
func matMulPacked(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) {
	l := m.Layout
	R := l.Rows
	gb := l.GroupBytes(m.Cols)
	ab := ActBytes(m, m.Cols)
	_ = xq[nTok*ab-1]
	_ = y[(nTok-1)*m.Rows+r1-1]
	tb := packedTileBytes
	if l.TileBytes != 0 {
		tb = l.TileBytes
	}
	tile := max(l.MaxTok, min(nTok, tb/max(ab, 1)/l.MaxTok*l.MaxTok))
	var tmp *[maxPackedTile]float32 // for partial groups only
	for t0 := 0; t0 < nTok; t0 += tile {
		t1 := min(t0+tile, nTok)
		for g := r0 / R; g*R < r1; g++ {
			rs, re := max(r0, g*R), min(r1, (g+1)*R)
			gd := m.Packed[g*gb : (g+1)*gb]
			for t := t0; t < t1; t += l.MaxTok {
				k := min(l.MaxTok, t1-t)
				if rs == g*R && re == (g+1)*R {
					l.Dot(m.Cols, gd, xq[t*ab:], ab, k, y[t*m.Rows+g*R:], m.Rows)
					continue
				}
				if tmp == nil {
					tmp = packedScratch.Get().(*[maxPackedTile]float32)
				}
				l.Dot(m.Cols, gd, xq[t*ab:], ab, k, tmp[:], R)
				for j := 0; j < k; j++ {
					copy(y[(t+j)*m.Rows+rs:(t+j)*m.Rows+re], tmp[j*R+rs-g*R:j*R+re-g*R])
				}
			}
		}
	}
	if tmp != nil {
		packedScratch.Put(tmp)
	}
}

// packedTileBytes bounds the activations of one token tile of a packed
// matmul. A group's weights sit in L1 while the tile's tokens pass, so the
// tile can take most of L2: with 128 KiB an 8192-column matrix got only 8
// tokens per tile and was streamed from memory every 8 tokens (packed q6_K
// 8192x2048 on 512 tokens: 161 -> 295 GFLOP/s with 512 KiB).
const packedTileBytes = 512 << 10

// packedScratch holds the tiles of partial groups: a stack array would
// escape through the Dot function value and allocate on every call.
var packedScratch = sync.Pool{New: func() any { return new([maxPackedTile]float32) }}

// splitPacked runs the packed part of rows [r0, r1) of m and returns the
// first row left for the GGUF-layout kernels (r1 when all were packed).
func splitPacked(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) int {
	pr := m.packedRows()
	if pr == 0 {
		return r0
	}
	if r0 < pr {
		e := min(r1, pr)
		matMulPacked(m, xq, nTok, y, r0, e)
		r0 = e
	}
	if r0 < r1 && m.Layout.Act == ActBF16x2 {
		panic("kernels: rows past the whole groups of an ActBF16x2 layout (the GGUF-layout kernels do not read its activations)")
	}
	return r0
}
