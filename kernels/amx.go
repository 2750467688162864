package kernels

import (
	"encoding/binary"
	"math"

	"github.com/moonlm/moonlm/gguf"
)

// Encoder products of f16 weights on AMX-BF16 tiles. An f16 value splits
// exactly into two bfloat16 halves, hi (the value rounded to bf16, to
// nearest even) and lo (the rest: at most 3 significant bits, and within
// bf16's range since f16's smallest step is 2^-24, so exact), and
// |lo| <= 2^-8 |value|. Weight times activation is hi*hi + hi*lo + lo*hi
// + lo*lo, every product exact in f32; the tiles add the first three, so
// each product is off by at most 2^-16 of itself, 32 times less than the
// rounding of the activations to f16 that they share with the f16 row
// kernels (and with llama.cpp's f16 products). The engine uses the layout
// for encoders only: a token's result depends on nothing but its own
// activations (as with MatMul), but differs in its last bits from the row
// kernels', so every product of an encoder takes it whatever the batch.

// ActBF16x2 is the activation format of the AMX f16 layout: blocks of 32
// values, each its 32 bf16 hi halves then its 32 lo halves (128 bytes) of
// the values rounded to f16. It is not a GGUF type: only layouts that name
// it in PackedLayout.Act read it.
const ActBF16x2 gguf.Type = 1<<16 + 1

// bytesBF16x2 is one ActBF16x2 block.
const bytesBF16x2 = 128

// amxRows and amxMaxTok are the AMX f16 layout's group of rows (two
// tiles' 16 columns of f32 results) and the most tokens of one Dot call
// (two tiles of 16 rows).
const (
	amxRows   = 32
	amxMaxTok = 32
)

// amxGroupBlockBytes is one 32-value block of a packed group: for rows
// 0-15 the hi tile then the lo tile, then for rows 16-31 the same, each
// tile 16 rows (value pairs) of 64 bytes (the 16 rows' pair, bf16 each):
// the VNNI order the tiles' dot products read.
const amxGroupBlockBytes = 4 * 16 * 64

// splitF16 returns the bf16 halves of f16 value h: f32(h) = hi + lo
// exactly, hi rounded to nearest even.
func splitF16(h uint16) (hi, lo uint16) {
	f := F16ToF32(h)
	u := math.Float32bits(f)
	b := (u + 0x7fff + (u>>16)&1) &^ 0xffff
	hi = uint16(b >> 16)
	lo = uint16(math.Float32bits(f-math.Float32frombits(b)) >> 16)
	return hi, lo
}

// QuantizeBF16x2 converts src (a multiple of 32 values) into ActBF16x2
// blocks.
func QuantizeBF16x2(src []float32, dst []byte) {
	checkRow(gguf.F16, len(src))
	dst = dst[:len(src)/qk32*bytesBF16x2]
	for b := 0; b < len(src)/qk32; b++ {
		y := dst[b*bytesBF16x2 : (b+1)*bytesBF16x2]
		for i, v := range src[b*qk32 : (b+1)*qk32] {
			hi, lo := splitF16(F32ToF16(v))
			binary.LittleEndian.PutUint16(y[2*i:], hi)
			binary.LittleEndian.PutUint16(y[64+2*i:], lo)
		}
	}
}

// packAMXF16 writes 32 f16 rows of cols values (src, GGUF layout) as
// amxGroupBlockBytes per 32 values: in the hi and the lo tile of rows
// 16h..16h+15, row p (value pair p of the block) holds, for each weight
// row 16h+n, values 2p and 2p+1.
func packAMXF16(dst, src []byte, cols int) {
	nb, rb := amxGroup.checkPack(dst, src, cols)
	for b := 0; b < nb; b++ {
		g := dst[b*amxGroupBlockBytes : (b+1)*amxGroupBlockBytes]
		for n := 0; n < amxRows; n++ {
			for k := 0; k < qk32; k++ {
				hi, lo := splitF16(binary.LittleEndian.Uint16(src[n*rb+2*(b*qk32+k):]))
				off := n/16*2048 + (k/2)*64 + n%16*4 + (k%2)*2
				binary.LittleEndian.PutUint16(g[off:], hi)
				binary.LittleEndian.PutUint16(g[1024+off:], lo)
			}
		}
	}
}

// amxGroup is the AMX f16 layout's geometry, for its bounds checks.
var amxGroup = packedGroup{name: "f16 (amx)", rows: amxRows, blockBytes: amxGroupBlockBytes, actBytes: bytesBF16x2, maxTok: amxMaxTok, shift: 5, srcBytes: 64}

// dotAMXF16Generic is the pure-Go twin of the AMX kernel: for each token
// and row, per 32-value block the activation-weight hi*hi, hi*lo and
// lo*hi dot products in turn, each adding its value pairs' two
// products one after the other into the f32 sum (the order of Intel's
// description of TDPBF16PS).
func dotAMXF16Generic(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	amxGroup.check(cols, g, x, xStride, nTok, y, yStride)
	nb := cols / qk32
	bf := func(b []byte, off int) float32 {
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[off:])) << 16)
	}
	for t := 0; t < nTok; t++ {
		xt := x[t*xStride:]
		for n := 0; n < amxRows; n++ {
			var acc float32
			for b := 0; b < nb; b++ {
				gb := g[b*amxGroupBlockBytes+n/16*2048:]
				xb := xt[b*bytesBF16x2:]
				for _, term := range [3][2]int{{0, 0}, {0, 1024}, {64, 0}} {
					for p := 0; p < 16; p++ {
						for j := 0; j < 2; j++ {
							acc += bf(xb, term[0]+4*p+2*j) * bf(gb, term[1]+p*64+n%16*4+2*j)
						}
					}
				}
			}
			y[t*yStride+n] = acc
		}
	}
}

// amxF16 is the AMX f16 layout; its Dot is the AMX kernel where the CPU
// and the OS allow the tiles (amxReady), its twin elsewhere.
var amxF16 = PackedLayout{
	Name: "f16.amx-bf16x3.r32.v1", Type: gguf.F16, Rows: amxRows, MaxTok: amxMaxTok,
	GroupBytes: func(cols int) int { return cols / qk32 * amxGroupBlockBytes },
	Pack:       packAMXF16, Dot: dotAMXF16, DotGeneric: dotAMXF16Generic,
	Act: ActBF16x2, TileBytes: amxTileBytes,
}

// amxTileBytes bounds the activations of one token tile of an AMX f16
// matmul: every group of weights streams from memory once per tile, and
// the layout's weights are twice the f16 file's, so the tile takes most of
// L2 (bge-base, 2048 tokens on 2 threads: 512 KiB gave the ffn_down
// product, 3072 columns, tiles of 32 tokens).
const amxTileBytes = 1 << 20

// EncoderPacked returns the packed layout of the set for an encoder's
// weights of type t (the tile kernels of a CPU with AMX-BF16 whose OS
// grants the tile state), or nil: the encoder then takes Packed(t). It
// serves matrices of whole groups of rows only (the GGUF-layout kernels
// do not read its activations). The decoders never take it: their
// products are the row kernels' bit for bit.
func (s *Set) EncoderPacked(t gguf.Type) *PackedLayout {
	if !s.AMX() || t >= numTypes {
		return nil
	}
	return formats[t].amx
}

// AMX reports whether the set uses AMX tiles (for encoders' f16
// products): the CPU has them, the set was not made WithoutAMX, and the OS
// grants them (asked on the first call).
func (s *Set) AMX() bool { return s.amx && amxReady() }

// WithoutAMX returns a copy of s that does not use AMX tiles (s itself is
// unchanged).
func (s *Set) WithoutAMX() *Set {
	c := *s
	c.amx = false
	return &c
}
