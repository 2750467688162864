//go:build amd64

package kernels

// Constant tables the assembly loads by name (·name(SB)), each written
// once as the formula it follows rather than as DATA lines.
var (
	// q4kMask: for each of the eight pairs of q4_K sub-blocks, 32 bytes of
	// VPSHUFB indices that broadcast the pair's two scale bytes (2c, 2c+1)
	// to every word (dot_avx2_amd64.s).
	q4kMask = func() (t [256]byte) {
		for i := range t {
			t[i] = byte(2*(i/32) + i%2)
		}
		return
	}()
	// transpose4x4 is the dword permutation that transposes a 4x4 matrix
	// of dwords, index 4*(i%4) + i/4 (attn_multi_amd64.s,
	// fused_q8k_amd64.s).
	transpose4x4 = func() (t [16]uint32) {
		for i := range t {
			t[i] = uint32(4*(i%4) + i/4)
		}
		return
	}()
	// q8sBias is 128 in each byte: XORed into signed quants it gives
	// them plus 128 as unsigned bytes (attn_multi_amd64.s).
	q8sBias = uint32(0x80808080)
	// ropeSign flips the sign of the even lanes of 8 floats (rope_amd64.s).
	ropeSign = func() (t [8]uint32) {
		for i := 0; i < len(t); i += 2 {
			t[i] = 0x80000000
		}
		return
	}()
	// p80Perm: two VPERMT2D index vectors, the even dwords of a pair of
	// registers and then the odd ones (packed_q80_amd64.s).
	p80Perm = func() (t [32]uint32) {
		for i := range t {
			t[i] = uint32(2*(i%16) + i/16)
		}
		return
	}()
)

// e8m0HalfTable is e8m0Half of every E8M0 byte, the MXFP4 kernels' scale
// lookup (mxfp4_amd64.s).
var e8m0HalfTable = func() (t [256]float32) {
	for e := range t {
		t[e] = e8m0Half(uint8(e))
	}
	return
}()
