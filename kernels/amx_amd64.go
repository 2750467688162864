//go:build amd64

package kernels

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// amxDotF16 (amx_amd64.s) computes one group of 32 rows (nb 32-value
// blocks at w, the AMX f16 layout) against two blocks of tokens, x0 and
// x1 (ActBF16x2, xstride bytes a token), into y0 and y1 (32 f32 a token,
// ystride bytes apart), with the tile configuration at cfg: palette 1,
// tiles 0, 1, 4 of block 0's token count in rows, tiles 2, 3, 5 of block
// 1's, tiles 6 and 7 16 rows, every tile 64 bytes a row. Block 1 may be
// block 0 again (x1 = x0, y1 = y0), which stores the same results twice.
//
//go:noescape
func amxDotF16(cfg *byte, w *byte, nb int, x0, x1 *byte, xstride int, y0, y1 *float32, ystride int)

// amxCPU reports the AMX tiles and bf16 tile dot products (and the
// AVX-512 the quantizer of their activations uses).
func amxCPU() bool { return cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && hasAVX512() }

// amxReady reports, once, whether the AMX kernels may run: the CPU has
// them and the OS grants this process the tile state (amxGrant). It is
// asked when an encoder would take them, not when a set is made: once
// granted, Linux refuses any thread a signal stack too small for the tile
// state, which a host process need not pay for otherwise.
var amxReady = sync.OnceValue(func() bool { return amxCPU() && amxGrant() })

// dotAMXF16 is the AMX f16 layout's Dot: the AMX kernel where amxReady,
// else its twin.
func dotAMXF16(cols int, g, x []byte, xStride, nTok int, y []float32, yStride int) {
	if !amxReady() {
		dotAMXF16Generic(cols, g, x, xStride, nTok, y, yStride)
		return
	}
	amxGroup.check(cols, g, x, xStride, nTok, y, yStride)
	n0 := min(nTok, 16)
	n1, x1, y1 := n0, 0, 0
	if nTok > 16 {
		n1, x1, y1 = nTok-16, 16*xStride, 16*yStride
	}
	var cfg [64]byte
	cfg[0] = 1
	for i := 0; i < 8; i++ {
		cfg[16+2*i] = 64
	}
	for i, r := range [8]int{n0, n0, n1, n1, n0, n1, 16, 16} {
		cfg[48+i] = byte(r)
	}
	amxDotF16(&cfg[0], &g[0], cols/qk32, &x[0], &x[x1], xStride, &y[0], &y[y1], 4*yStride)
}

// splitBF16x2AVX512 is QuantizeBF16x2 of nb blocks of 32 values.
//
//go:noescape
func splitBF16x2AVX512(dst *byte, src *float32, nb int)

// quantizeBF16x2Vec converts src into ActBF16x2 on the AVX-512 kernel and
// reports whether it did (the set has no AVX-512, or src no whole block).
func (s *Set) quantizeBF16x2Vec(src []float32, dst []byte) bool {
	nb := len(src) / qk32
	if !s.wide() || nb == 0 || len(src)%qk32 != 0 {
		return false
	}
	_ = dst[nb*bytesBF16x2-1]
	splitBF16x2AVX512(&dst[0], &src[0], nb)
	return true
}
