//go:build amd64

package kernels

//go:noescape
func maxAVX512(x *float32, n int) float32

//go:noescape
func chunkSumsAVX512(x *float32, n int) float64

//go:noescape
func scaleAVX512(x *float32, n int, s float32)

// maxVec returns the maximum of the multiple-of-16 head of x and how many
// values that was (0: none, the caller scans everything).
func (s *Set) maxVec(x []float32) (float32, int) {
	n := len(x) &^ 15
	if n == 0 || !s.wide() {
		return 0, 0
	}
	return maxAVX512(&x[0], n), n
}

// chunkSumsVec is chunkSums over the whole 16-value chunks of x; it
// returns how many values it covered.
func (s *Set) chunkSumsVec(x []float32) (float64, int) {
	n := len(x) &^ 15
	if n == 0 || !s.wide() {
		return 0, 0
	}
	return chunkSumsAVX512(&x[0], n), n
}

// scaleVec multiplies the multiple-of-16 head of x by s and returns its
// length.
func (st *Set) scaleVec(x []float32, s float32) int {
	n := len(x) &^ 15
	if n == 0 || !st.wide() {
		return 0
	}
	scaleAVX512(&x[0], n, s)
	return n
}
