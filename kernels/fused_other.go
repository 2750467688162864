//go:build !amd64

package kernels

// fusedTilesQ41 has no kernel on this architecture.
func fusedTilesQ41(m *Matrix, xq []byte, nTok int, y []float32, r0, r1 int) (rowsDone, toksDone int, ok bool) {
	return 0, 0, false
}

func expSubVec(x []float32, sub float32) int { return 0 }

func swigluVec(dst, g, u []float32) int { return 0 }

func f16EncodeVec(dst []uint16, src []float32) int { return 0 }

func quantizeQ8Vec(sum bool, src []float32, dst []byte) bool { return false }
