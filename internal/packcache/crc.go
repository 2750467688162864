package packcache

import (
	"hash/crc32"
	"runtime"
	"runtime/debug"
	"sync"
)

// dataPoly is the polynomial of the data checksum, CRC-32 (IEEE), in
// reflected bit order, where bit 31 holds x^0 and bit 0 holds x^31. IEEE
// rather than CRC-32C (the header's): hash/crc32 computes it by carry-less
// multiplication at 2-3x the speed of the CRC-32C instruction here, and
// the data is read in full before a cache hit is trusted.
const dataPoly = 0xedb88320

// dataTable is hash/crc32's table for dataPoly.
var dataTable = crc32.IEEETable

// gfMul multiplies a and b as polynomials modulo dataPoly, both in
// reflected bit order.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 { // m walks x^0, x^1, ... of a
		if a&m != 0 {
			p ^= b
		}
		// b *= x: a right shift, reduced when x^31 carries out.
		if b&1 != 0 {
			b = b>>1 ^ dataPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) modulo the polynomial, by repeated squaring.
func xPow8n(n uint64) uint32 {
	r := uint32(1) << 31    // x^0
	base := uint32(1) << 23 // x^8
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			r = gfMul(r, base)
		}
		base = gfMul(base, base)
	}
	return r
}

// crcCombine returns the data checksum of A followed by B from crcA, crcB and
// len(B): crcA's polynomial is shifted past B's bytes and added to crcB
// (the standard pre- and post-inversion cancel out in this form).
func crcCombine(crcA, crcB uint32, lenB uint64) uint32 {
	return gfMul(xPow8n(lenB), crcA) ^ crcB
}

// parallelChunk is the smallest share of data a checksum goroutine takes;
// below two of them one goroutine is faster than starting more.
var parallelChunk = 32 << 20

// shareAlign keeps every share's start page-aligned (when data's is) on
// every page size in use, so each can be populated on its own.
const shareAlign = 64 << 10

// crcPiece is how much of its share a goroutine populates, then checksums,
// at once: small enough that the pages are still in cache when read.
var crcPiece = 4 << 20

// checksum returns the CRC-32 (IEEE) of data, computed in parallel shares on up
// to GOMAXPROCS goroutines and combined, so validating a large entry runs
// at the memory bandwidth of the machine rather than of one core. With
// fault, each goroutine populates the page tables of a piece of its share
// right before reading it (a mapping made without prefaulting). The
// helpers run with SetPanicOnFault like the caller, and a panic in one
// (a fault on a shrunken mapping) is raised again in the caller.
func checksum(data []byte, fault bool) uint32 {
	n := min(runtime.GOMAXPROCS(0), len(data)/parallelChunk)
	if n <= 1 {
		return crcShare(data, fault)
	}
	share := ((len(data)+n-1)/n + shareAlign - 1) / shareAlign * shareAlign
	if n = (len(data) + share - 1) / share; n <= 1 {
		return crcShare(data, fault)
	}
	crcs := make([]uint32, n)
	panics := make([]any, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			debug.SetPanicOnFault(true)
			crcs[i] = crcShare(data[i*share:min((i+1)*share, len(data))], fault)
		})
	}
	crcs[0] = crcShare(data[:share], fault)
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	crc := crcs[0]
	for i := 1; i < n; i++ {
		lo, hi := i*share, min((i+1)*share, len(data))
		crc = crcCombine(crc, crcs[i], uint64(hi-lo))
	}
	return crc
}

// crcShare is the CRC-32 (IEEE) of b, piece by piece, populating each piece
// first when fault is set.
func crcShare(b []byte, fault bool) uint32 {
	var crc uint32
	for len(b) > 0 {
		p := b[:min(len(b), crcPiece)]
		if fault {
			populate(p)
		}
		crc = crc32.Update(crc, dataTable, p)
		b = b[len(p):]
	}
	return crc
}
