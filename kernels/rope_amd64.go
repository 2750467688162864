//go:build amd64

package kernels

// ropeNormAVX2 rotates pairs (2i, 2i+1) of the first nDims values (a
// multiple of 8) of nHeads heads headDim apart.
//
//go:noescape
func ropeNormAVX2(x *float32, headDim, nHeads int, cache *float32, nDims int)

// ropeNeoxAVX2 rotates pairs (i, i+nDims/2), nDims/2 a multiple of 4.
//
//go:noescape
func ropeNeoxAVX2(x *float32, headDim, nHeads int, cache *float32, nDims int)

// ropeVec runs RoPEApply on the vector kernels where the sizes allow (every
// SIMD set here implies AVX2 and FMA) and reports whether it did.
func (s *Set) ropeVec(x []float32, headDim, nHeads int, cache []float32, neox bool) bool {
	nDims := len(cache)
	if !s.vec() || nHeads == 0 || nDims == 0 {
		return false
	}
	if neox {
		if nDims%8 != 0 {
			return false
		}
		ropeNeoxAVX2(&x[0], headDim, nHeads, &cache[0], nDims)
		return true
	}
	if nDims%8 != 0 {
		return false
	}
	ropeNormAVX2(&x[0], headDim, nHeads, &cache[0], nDims)
	return true
}
