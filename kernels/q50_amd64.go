//go:build amd64

package kernels

// AVX-512 VNNI kernels for Q5_0 weights (q50_amd64.s), registered in the
// avx512 set. Same contracts as the q4_0 kernels in simd_amd64.go: the Go
// wrappers in simd_adapter_amd64.go check lengths so the assembly stays
// inside its slices.

//go:noescape
func dotQ5_0RowsAVX512(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)

// AVX2 kernels (q50_avx2_amd64.s), registered in the avx2 set (and so under
// avx512 wherever it has no kernel of its own).

//go:noescape
func dotQ5_0RowsAVX2(w *byte, stride int, nrows int, x *byte, nb int, y *float32, f16 *float32)
