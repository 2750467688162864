package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moonlm/moonlm/gguf"
)

// Kernel benchmarks. Decode is memory bound: BenchmarkMatVec reports the
// weight bytes streamed per second (b.SetBytes), to be read next to
// BenchmarkMemRead, a plain sum over a buffer of the same size. Prefill is
// compute bound: BenchmarkMatMul reports GFLOP/s (2 flops per weight per
// token). Buffers are built on first use, so plain `go test` pays nothing.

const (
	benchCols      = 4096      // row length (a multiple of every block size)
	benchBytes     = 256 << 20 // weight matrix and memory-read buffer size
	benchPrefill   = 512       // tokens per MatMul
	benchMatMulDiv = 32        // MatMul uses 1/32 of the rows, to keep an iteration near a second
)

var benchTypes = []gguf.Type{gguf.F16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q4_K, gguf.Q6_K, gguf.MXFP4}

// benchMatrix holds the one weight matrix alive at a time (each is 256 MiB).
var benchMatrix struct {
	sync.Mutex
	m *Matrix
}

// benchWeights returns a random benchCols-wide matrix of type t of at least
// benchBytes, built once per type and process (random blocks: throughput
// does not depend on the values, only scales are kept finite).
func benchWeights(b *testing.B, t gguf.Type) *Matrix {
	b.Helper()
	benchMatrix.Lock()
	defer benchMatrix.Unlock()
	if m := benchMatrix.m; m != nil && m.Type == t {
		return m
	}
	benchMatrix.m = nil // let the previous one go before allocating
	rb := benchCols / t.BlockSize() * t.BlockBytes()
	rows := (benchBytes + rb - 1) / rb
	m := &Matrix{Type: t, Rows: rows, Cols: benchCols, Data: make([]byte, rows*rb)}
	r := rand.New(rand.NewPCG(uint64(t), 1))
	var wg sync.WaitGroup
	const parts = 2
	for p := range parts {
		wg.Add(1)
		go func(r *rand.Rand, lo, hi int) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				simdRandomRow(r, t, m.Data[i*rb:(i+1)*rb])
			}
		}(rand.New(rand.NewPCG(r.Uint64(), uint64(p))), p*rows/parts, (p+1)*rows/parts)
	}
	wg.Wait()
	benchMatrix.m = m
	return m
}

// benchActivations returns nTok random activation rows converted for t,
// ActivationBytes apart as MatMul expects.
func benchActivations(t gguf.Type, n, nTok int) []byte {
	ab := ActivationBytes(t, n)
	xq := make([]byte, nTok*ab)
	x := make([]float32, n)
	r := rand.New(rand.NewPCG(5, 5))
	for k := range nTok {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		QuantizeRow(VecDotType(t), x, xq[k*ab:(k+1)*ab])
	}
	return xq
}

// splitRows runs f over [0, rows) split evenly across threads goroutines.
func splitRows(threads, rows int, f func(r0, r1 int)) {
	if threads == 1 {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	for p := range threads {
		wg.Add(1)
		go func(r0, r1 int) {
			defer wg.Done()
			f(r0, r1)
		}(p*rows/threads, (p+1)*rows/threads)
	}
	wg.Wait()
}

// BenchmarkMatVec: one token against a >= 256 MiB matrix; MB/s is weight
// bytes read. Each iteration is followed by an untimed BenchmarkMemRead pass
// over the same number of threads, and %read reports the matvec bandwidth
// as a percentage of that read bandwidth measured alongside: on a shared
// machine the load changes between benchmarks, less within one.
func BenchmarkMatVec(b *testing.B) {
	benchEachType(b, func(b *testing.B, ks *Set, t gguf.Type, threads int) {
		m := benchWeights(b, t)
		buf := benchMemBuf()
		xq := benchActivations(t, m.Cols, 1)
		y := make([]float32, m.Rows)
		var read time.Duration
		b.SetBytes(int64(len(m.Data)))
		b.ResetTimer()
		for b.Loop() {
			splitRows(threads, m.Rows, func(r0, r1 int) { ks.MatVec(m, xq, y, r0, r1) })
			b.StopTimer()
			t0 := time.Now()
			benchRead(threads, buf)
			read += time.Since(t0)
			b.StartTimer()
		}
		ratio := read.Seconds() / b.Elapsed().Seconds() * float64(len(m.Data)) / float64(8*len(buf))
		b.ReportMetric(100*ratio, "%read")
	})
}

// BenchmarkMatMul: 512 tokens against the first 1/32 of the same matrix
// (8 MiB of weights, so an iteration stays near a second); reports GFLOP/s.
func BenchmarkMatMul(b *testing.B) {
	benchEachType(b, func(b *testing.B, ks *Set, t gguf.Type, threads int) {
		full := benchWeights(b, t)
		rows := full.Rows / benchMatMulDiv
		m := &Matrix{Type: t, Rows: rows, Cols: full.Cols, Data: full.Data[:rows*full.RowBytes()]}
		xq := benchActivations(t, m.Cols, benchPrefill)
		y := make([]float32, benchPrefill*m.Rows)
		b.ResetTimer()
		for b.Loop() {
			splitRows(threads, m.Rows, func(r0, r1 int) { ks.MatMul(m, xq, benchPrefill, y, r0, r1) })
		}
		flops := 2 * float64(m.Rows) * float64(m.Cols) * benchPrefill
		b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}

var benchMem struct {
	once sync.Once
	buf  []uint64
}

// benchMemBuf returns the 256 MiB read buffer, filled once (so every page is
// backed by memory, not the shared zero page).
func benchMemBuf() []uint64 {
	benchMem.once.Do(func() {
		benchMem.buf = make([]uint64, benchBytes/8)
		r := rand.New(rand.NewPCG(9, 9))
		for i := range benchMem.buf {
			benchMem.buf[i] = r.Uint64()
		}
	})
	return benchMem.buf
}

// benchRead sums buf split across threads goroutines.
func benchRead(threads int, buf []uint64) {
	splitRows(threads, len(buf)/8, func(r0, r1 int) {
		atomic.AddUint64(&benchSink, sumUint64(buf[8*r0:8*r1]))
	})
}

// BenchmarkMemRead: the sum of a 256 MiB []uint64, the read bandwidth the
// MatVec numbers compare to.
func BenchmarkMemRead(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			buf := benchMemBuf()
			b.SetBytes(int64(len(buf) * 8))
			b.ResetTimer()
			for b.Loop() {
				benchRead(threads, buf)
			}
		})
	}
}

var benchSink uint64

// sumUint64 sums s with eight independent accumulators so the loop is
// bound by loads, not by the add chain.
func sumUint64(s []uint64) uint64 {
	var a0, a1, a2, a3, a4, a5, a6, a7 uint64
	for len(s) >= 8 {
		a0 += s[0]
		a1 += s[1]
		a2 += s[2]
		a3 += s[3]
		a4 += s[4]
		a5 += s[5]
		a6 += s[6]
		a7 += s[7]
		s = s[8:]
	}
	return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

// BenchmarkDotInCache: every kernel set over a 1 MiB matrix that stays in
// L2, so MB/s measures kernel speed rather than memory bandwidth.
func BenchmarkDotInCache(b *testing.B) {
	for _, t := range benchTypes {
		rb := benchCols / t.BlockSize() * t.BlockBytes()
		rows := (1 << 20) / rb
		m := &Matrix{Type: t, Rows: rows, Cols: benchCols, Data: make([]byte, rows*rb)}
		r := rand.New(rand.NewPCG(3, 3))
		for i := range rows {
			simdRandomRow(r, t, m.Data[i*rb:(i+1)*rb])
		}
		xq := benchActivations(t, m.Cols, 1)
		y := make([]float32, m.Rows)
		for _, v := range Available() {
			ks := mustSet(b, v)
			b.Run(fmt.Sprintf("%v/%s", t, v), func(b *testing.B) {
				b.SetBytes(int64(len(m.Data)))
				for b.Loop() {
					ks.MatVec(m, xq, y, 0, m.Rows)
				}
			})
		}
	}
}

// benchEachType runs f as a sub-benchmark for each benchmark type and
// thread count (1 and 2) with the detected kernel set.
func benchEachType(b *testing.B, f func(b *testing.B, ks *Set, t gguf.Type, threads int)) {
	ks := Detect()
	for _, t := range benchTypes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads=%d", t, threads), func(b *testing.B) { f(b, ks, t, threads) })
		}
	}
}

// BenchmarkF16Tile: one thread's F16 products of 128 tokens with the
// bge-base encoder's matrix shapes (attention 768x768, FFN up 3072x768 and
// down 768x3072), MatMul with each SIMD set's tile kernel against the same
// set without it (the four-token kernel per row); reports GFLOP/s.
func BenchmarkF16Tile(b *testing.B) {
	const nTok = 128
	r := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][2]int{{768, 768}, {3072, 768}, {768, 3072}} {
		rows, cols := shape[0], shape[1]
		m := &Matrix{Type: gguf.F16, Rows: rows, Cols: cols, Data: make([]byte, rows*RowBytes(gguf.F16, cols))}
		for i := range rows {
			copy(m.Data[i*m.RowBytes():], randomRow(r, gguf.F16, cols))
		}
		ab := ActivationBytes(gguf.F16, cols)
		xq := make([]byte, nTok*ab)
		for k := range nTok {
			QuantizeRow(gguf.F16, randomFloats(r, cols, 1), xq[k*ab:(k+1)*ab])
		}
		y := make([]float32, nTok*rows)
		for _, ks := range testSets(b) {
			if ks.isa == isaGeneric {
				continue
			}
			noTile := *ks
			noTile.types[gguf.F16].tile = nil
			for _, kind := range []string{"tile", "tok4"} {
				s := ks
				if kind == "tok4" {
					s = &noTile
				}
				b.Run(fmt.Sprintf("%s/%dx%d/%s", ks.Name(), rows, cols, kind), func(b *testing.B) {
					for b.Loop() {
						s.MatMul(m, xq, nTok, y, 0, rows)
					}
					b.ReportMetric(2*float64(rows*cols*nTok)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
