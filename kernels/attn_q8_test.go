package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/gguf"
)

// q8Cache returns n rows of nb Q8_0 blocks each, rowBytes apart (as a
// cache interleaving several heads lays them out), with random values.
func q8Cache(rng *rand.Rand, n, nb, rowBytes int) []byte {
	v := make([]byte, (n-1)*rowBytes+nb*q8Bytes)
	row := make([]float32, nb*32)
	for j := range n {
		for i := range row {
			row[i] = float32(rng.NormFloat64())
		}
		QuantizeRow(gguf.Q8_0, row, v[j*rowBytes:j*rowBytes+nb*q8Bytes])
	}
	return v
}

// TestAttnValuesQ8 checks AttnValuesQ8 on every kernel set bit for bit
// against the generic kernel, and the generic kernel against the sum in
// float64, for block counts 1-4 and position counts around the kernels'
// pairs.
func TestAttnValuesQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, nb := range []int{1, 2, 3, 4} {
		for _, n := range []int{1, 2, 3, 4, 7, 64, 257} {
			rowBytes := 3*nb*q8Bytes + 6 // two other heads and some padding
			v := q8Cache(rng, n, nb, rowBytes)
			w := make([]float32, n)
			for j := range w {
				w[j] = rng.Float32()
			}
			want := make([]float32, nb*32)
			genericSet.AttnValuesQ8(want, v, rowBytes, w)
			// The float64 sum of the dequantized rows.
			for d := range want {
				b, i := d/32, d%32
				var sum float64
				for j := range n {
					blk := v[j*rowBytes+b*q8Bytes:]
					sum += float64(w[j]) * float64(F16ToF32(uint16(blk[0])|uint16(blk[1])<<8)) * float64(int8(blk[2+i]))
				}
				require.InDelta(t, sum, want[d], 1e-5*math.Sqrt(float64(n))*4, "nb %d n %d d %d", nb, n, d)
			}
			forSets(t, func(t *testing.T, ks *Set) {
				got := make([]float32, nb*32)
				for i := range got {
					got[i] = float32(math.NaN()) // overwritten, not added to
				}
				ks.AttnValuesQ8(got, v, rowBytes, w)
				for d := range got {
					require.Equal(t, math.Float32bits(want[d]), math.Float32bits(got[d]), "nb %d n %d value %d: %v vs %v", nb, n, d, got[d], want[d])
				}
			})
		}
	}
	assert.Panics(t, func() { genericSet.AttnValuesQ8(make([]float32, 32), make([]byte, 33), 34, []float32{1}) })
	assert.Panics(t, func() { genericSet.AttnValuesQ8(make([]float32, 31), make([]byte, 34), 34, []float32{1}) })
}

// TestDotRowsStrided checks DotRows over rows further apart than a row
// against DotRow row by row, bit for bit, on every kernel set.
func TestDotRowsStrided(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, nb := range []int{1, 2, 4} {
		n := nb * 32
		for _, rows := range []int{1, 3, 16, 33} {
			rowBytes := 4*nb*q8Bytes + 2
			w := q8Cache(rng, rows, nb, rowBytes)
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			xq := make([]byte, RowBytes(gguf.Q8_0, n))
			QuantizeRow(gguf.Q8_0, x, xq)
			forSets(t, func(t *testing.T, ks *Set) {
				y := make([]float32, rows)
				ks.DotRows(gguf.Q8_0, n, w, rowBytes, xq, y)
				for i := range y {
					want := ks.DotRow(gguf.Q8_0, w[i*rowBytes:i*rowBytes+nb*q8Bytes], xq, n)
					require.Equal(t, math.Float32bits(want), math.Float32bits(y[i]), "nb %d row %d of %d", nb, i, rows)
				}
			})
		}
	}
	assert.Panics(t, func() { genericSet.DotRows(gguf.Q8_0, 32, make([]byte, 60), 30, make([]byte, 34), make([]float32, 2)) })
}

func BenchmarkAttnValuesQ8(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, nb, rowBytes = 4096, 2, 8 * 2 * q8Bytes
	v := q8Cache(rng, n, nb, rowBytes)
	w := make([]float32, n)
	for j := range w {
		w[j] = rng.Float32() / n
	}
	out := make([]float32, nb*32)
	for _, ks := range []*Set{genericSet, Detect()} {
		b.Run(ks.Name(), func(b *testing.B) {
			for b.Loop() {
				ks.AttnValuesQ8(out, v, rowBytes, w)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
		})
	}
}

func BenchmarkDotRowsQ8Keys(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, nb, rowBytes = 4096, 2, 8 * 2 * q8Bytes
	k := q8Cache(rng, n, nb, rowBytes)
	x := make([]float32, nb*32)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	xq := make([]byte, nb*q8Bytes)
	QuantizeRow(gguf.Q8_0, x, xq)
	y := make([]float32, n)
	for _, ks := range []*Set{genericSet, Detect()} {
		b.Run(ks.Name(), func(b *testing.B) {
			for b.Loop() {
				ks.DotRows(gguf.Q8_0, nb*32, k, rowBytes, xq, y)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
		})
	}
}

// TestAttnValuesQ8Heads checks AttnValuesQ8Heads on every kernel set bit
// for bit against the generic AttnValuesQ8 head by head (its twin), over
// head counts 1-8 (the AVX-512 kernels take 4, 2, then 1 at a time), head
// dimensions 64, 128 and 256 and position counts around the kernels'
// pairs.
func TestAttnValuesQ8Heads(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, hd := range []int{64, 128, 256} {
		nb := hd / 32
		for _, G := range []int{1, 2, 3, 4, 5, 8} {
			for _, n := range []int{1, 2, 3, 7, 64, 257} {
				rowBytes := 2*nb*q8Bytes + 6 // another head and some padding
				v := q8Cache(rng, n, nb, rowBytes)
				wStride := n + 3
				w := make([]float32, (G-1)*wStride+n)
				for j := range w {
					w[j] = rng.Float32()
				}
				want := make([]float32, G*hd)
				for h := range G {
					genericSet.AttnValuesQ8(want[h*hd:(h+1)*hd], v, rowBytes, w[h*wStride:h*wStride+n])
				}
				forSets(t, func(t *testing.T, ks *Set) {
					got := make([]float32, G*hd+1)
					for i := range got {
						got[i] = float32(math.NaN()) // overwritten, not added to
					}
					ks.AttnValuesQ8Heads(got, hd, G, v, rowBytes, w, wStride, n)
					for d := range want {
						require.Equal(t, math.Float32bits(want[d]), math.Float32bits(got[d]), "hd %d G %d n %d value %d: %v vs %v", hd, G, n, d, got[d], want[d])
					}
					require.True(t, math.IsNaN(float64(got[G*hd])), "wrote past its heads")
				})
			}
		}
	}
	assert.Panics(t, func() {
		genericSet.AttnValuesQ8Heads(make([]float32, 64), 32, 2, make([]byte, 34), 34, make([]float32, 3), 1, 2)
	})
	assert.Panics(t, func() {
		genericSet.AttnValuesQ8Heads(make([]float32, 63), 32, 2, make([]byte, 34), 34, make([]float32, 2), 1, 1)
	})
}

func BenchmarkAttnValuesQ8Heads(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, nb, G, rowBytes = 4096, 2, 4, 8 * 2 * q8Bytes
	v := q8Cache(rng, n, nb, rowBytes)
	w := make([]float32, G*n)
	for j := range w {
		w[j] = rng.Float32() / n
	}
	out := make([]float32, G*nb*32)
	for _, ks := range []*Set{genericSet, Detect()} {
		b.Run(ks.Name()+"/heads", func(b *testing.B) {
			for b.Loop() {
				ks.AttnValuesQ8Heads(out, nb*32, G, v, rowBytes, w, n, n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
		})
		b.Run(ks.Name()+"/one-by-one", func(b *testing.B) {
			for b.Loop() {
				for h := range G {
					ks.AttnValuesQ8(out[h*nb*32:(h+1)*nb*32], v, rowBytes, w[h*n:(h+1)*n])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
		})
	}
}

// TestAttnScoresQ8Heads checks AttnScoresQ8Heads: its generic twin against
// the dot products in float64, the AVX-512 set bit for bit against the
// twin and the other sets bit for bit against DotRows, over head counts
// 1-8, head dimensions 64-256 (96: an odd block count, which the AVX-512
// set leaves to DotRows) and row counts around the kernels' groups of 4.
func TestAttnScoresQ8Heads(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, hd := range []int{64, 96, 128, 256} {
		nb := hd / 32
		hb := nb * q8Bytes
		for _, G := range []int{1, 2, 3, 4, 5, 8} {
			for _, m := range []int{1, 3, 4, 5, 64, 67} {
				rowBytes := 2*hb + 2
				k := q8Cache(rng, m, nb, rowBytes)
				x := make([]float32, hd)
				xq := make([]byte, G*hb)
				for g := range G {
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					QuantizeRow(gguf.Q8_0, x, xq[g*hb:(g+1)*hb])
				}
				yStride := m + 1
				twin := make([]float32, (G-1)*yStride+m)
				attnScoresQ8Generic(xq, G, hd, k, rowBytes, m, twin, yStride)
				for g := range G {
					for i := range m {
						var sum float64
						for b := range nb {
							kb, qb := k[i*rowBytes+b*q8Bytes:], xq[g*hb+b*q8Bytes:]
							var isum int
							for j := range 32 {
								isum += int(int8(kb[2+j])) * int(int8(qb[2+j]))
							}
							sum += float64(isum) * float64(F16ToF32(uint16(kb[0])|uint16(kb[1])<<8)) * float64(F16ToF32(uint16(qb[0])|uint16(qb[1])<<8))
						}
						require.InDelta(t, sum, twin[g*yStride+i], 1e-5*(1+math.Abs(sum)), "hd %d G %d m %d", hd, G, m)
					}
				}
				forSets(t, func(t *testing.T, ks *Set) {
					want := twin
					if ks.isa != isaGeneric && (!ks.wide() || hd%64 != 0) {
						want = make([]float32, len(twin))
						for g := range G {
							ks.DotRows(gguf.Q8_0, hd, k, rowBytes, xq[g*hb:(g+1)*hb], want[g*yStride:g*yStride+m])
						}
					}
					got := make([]float32, len(twin))
					ks.AttnScoresQ8Heads(xq, G, hd, k, rowBytes, m, got, yStride)
					for g := range G {
						for i := range m {
							require.Equal(t, math.Float32bits(want[g*yStride+i]), math.Float32bits(got[g*yStride+i]),
								"hd %d G %d m %d query %d row %d: %v vs %v", hd, G, m, g, i, got[g*yStride+i], want[g*yStride+i])
						}
					}
				})
			}
		}
	}
	assert.Panics(t, func() {
		genericSet.AttnScoresQ8Heads(make([]byte, 34), 2, 32, make([]byte, 34), 34, 1, make([]float32, 2), 1)
	})
}

func BenchmarkAttnScoresQ8Heads(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n, nb, G, rowBytes = 4096, 2, 4, 8 * 2 * q8Bytes
	k := q8Cache(rng, n, nb, rowBytes)
	x := make([]float32, nb*32)
	xq := make([]byte, G*nb*q8Bytes)
	for g := range G {
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		QuantizeRow(gguf.Q8_0, x, xq[g*nb*q8Bytes:(g+1)*nb*q8Bytes])
	}
	y := make([]float32, G*n)
	ks := Detect()
	b.Run("heads", func(b *testing.B) {
		for b.Loop() {
			ks.AttnScoresQ8Heads(xq, G, nb*32, k, rowBytes, n, y, n)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
	})
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			for g := range G {
				ks.DotRows(gguf.Q8_0, nb*32, k, rowBytes, xq[g*nb*q8Bytes:(g+1)*nb*q8Bytes], y[g*n:(g+1)*n])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/position")
	})
}
