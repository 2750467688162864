package kernels

import (
	"github.com/moonlm/moonlm/gguf"

	"encoding/binary"
	"math"
)

// Products that feed a sum are wrapped in float32() conversions: the Go
// spec then forbids fusing them into FMAs (which GOAMD64=v3 would do), so the
// results match ggml's separately rounded float arithmetic on every build.
//
// This file holds weight quantizers that follow ggml's reference
// ("deterministic creation of model files") algorithms, used without an
// importance matrix: so files we synthesize resemble what ggml's quantize
// tool writes. They are not hot paths but still do not allocate.

// groupMaxEps is ggml's threshold below which a group counts as all zero.
const groupMaxEps = 1e-15

func putF16(b []byte, v float32) {
	binary.LittleEndian.PutUint16(b, F32ToF16(v))
}

func abs32(v float32) float32 { return float32(math.Abs(float64(v))) }

// absMax32 is the largest magnitude in x (0 for an empty x): the block
// maximum every absmax quantizer scales by.
func absMax32(x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	return amax
}

// roundAway rounds half away from zero, as C's roundf.
func roundAway(v float32) float32 { return float32(math.Round(float64(v))) }

func quantizeQ8_0Ref(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*gguf.BytesQ8_0 : (i+1)*gguf.BytesQ8_0]
		amax := absMax32(x)
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		for j, v := range x {
			b[2+j] = byte(int8(roundAway(v * id)))
		}
	}
}

// signedMax returns the value of largest magnitude (the first on ties) and
// its magnitude.
func signedMax(x []float32) (max, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	return max, amax
}

func quantizeQ4_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*gguf.BytesQ4_0 : (i+1)*gguf.BytesQ4_0]
		max, _ := signedMax(x)
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		for j := range 16 {
			// C truncates (int8_t)(v + 8.5f) toward zero; v+8.5 is >= 0.5.
			q0 := min(15, int32(float32(x[j]*id)+8.5))
			q1 := min(15, int32(float32(x[j+16]*id)+8.5))
			b[2+j] = byte(q0) | byte(q1)<<4
		}
	}
}

// minMax returns the smallest and largest values of x.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	return lo, hi
}

func quantizeQ4_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*gguf.BytesQ4_1 : (i+1)*gguf.BytesQ4_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		putF16(b[2:], lo)
		for j := range 16 {
			q0 := min(15, int32(float32((x[j]-lo)*id)+0.5))
			q1 := min(15, int32(float32((x[j+16]-lo)*id)+0.5))
			b[4+j] = byte(q0) | byte(q1)<<4
		}
	}
}

func quantizeQ5_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*gguf.BytesQ5_0 : (i+1)*gguf.BytesQ5_0]
		max, _ := signedMax(x)
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		var qh uint32
		for j := range 16 {
			q0 := uint32(min(31, int32(float32(x[j]*id)+16.5)))
			q1 := uint32(min(31, int32(float32(x[j+16]*id)+16.5)))
			b[6+j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= (q0 >> 4 & 1) << j
			qh |= (q1 >> 4 & 1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

func quantizeQ5_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/qk32; i++ {
		x := src[i*qk32 : (i+1)*qk32]
		b := dst[i*gguf.BytesQ5_1 : (i+1)*gguf.BytesQ5_1]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b, d)
		putF16(b[2:], lo)
		var qh uint32
		for j := range 16 {
			q0 := uint32(uint8(int32(float32((x[j]-lo)*id) + 0.5)))
			q1 := uint32(uint8(int32(float32((x[j+16]-lo)*id) + 0.5)))
			b[8+j] = byte(q0&0xf) | byte(q1&0xf)<<4
			qh |= (q0 >> 4 & 1) << j
			qh |= (q1 >> 4 & 1) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}

// makeQKX2Quants is ggml's make_qkx2_quants: it fits x ≈ scale*L - theMin
// with L in [0, nmax] by weighted least squares, trying nstep+1 candidate
// inverse scales around nmax/(max-min) and keeping the one with the smallest
// weighted squared (or absolute, useMAD) error. It returns scale and theMin
// (>= 0) and leaves the levels in L; laux is scratch.
func makeQKX2Quants(nmax int32, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		lo = min(lo, x[i])
		hi = max(hi, x[i])
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range n {
			L[i] = 0
		}
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestMAD float32
	for i := range n {
		l := min(nmax, max(0, nearestInt(iscale*(x[i]-lo))))
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - x[i]
		if useMAD {
			diff = abs32(diff)
		} else {
			diff *= diff
		}
		bestMAD += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := min(nmax, max(0, nearestInt(iscale*(x[i]-lo))))
			laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(w * fl * fl)
			sumXL += float32(w * fl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var mad float32
			for i := range n {
				diff := float32(thisScale*float32(laux[i])) + thisMin - x[i]
				if useMAD {
					diff = abs32(diff)
				} else {
					diff *= diff
				}
				mad += float32(weights[i] * diff)
			}
			if mad < bestMAD {
				copy(L[:n], laux[:n])
				bestMAD = mad
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// quantizeKScaleMin is the shared body of the Q4_K and Q5_K reference
// quantizers for one 256-value block: per 32-value sub-block a scale and min
// search, both then quantized to 6 bits against the block's largest, and the
// final levels recomputed from the rounded scales. It fills scales12 (the
// packed 6-bit scales), returns d and dmin, and leaves the levels in L.
func quantizeKScaleMin(x []float32, nmax int32, rmin float32, nstep int, scales12 []byte, L *[qkK]uint8) (d, dmin float32) {
	var weights [32]float32
	var laux [32]uint8
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, 0.1, nstep, false)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	clear(scales12[:12])
	for j := range 8 {
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			scales12[j] = ls
			scales12[j+4] = lm
		} else {
			scales12[j+4] = ls&0xf | (lm&0xf)<<4
			scales12[j-4] |= (ls >> 4) << 6
			scales12[j] |= (lm >> 4) << 6
		}
	}
	dh, dminh := F32ToF16(maxScale/63), F32ToF16(maxMin/63)
	d, dmin = F16ToF32(dh), F16ToF32(dminh)
	for j := range 8 {
		sc, m := scaleMinK4(j, scales12)
		ds := d * float32(sc)
		if ds == 0 {
			continue
		}
		dm := dmin * float32(m)
		for ii := range 32 {
			l := nearestInt((x[32*j+ii] + dm) / ds)
			L[32*j+ii] = uint8(min(nmax, max(0, l)))
		}
	}
	return d, dmin
}

func quantizeQ4K(src []float32, dst []byte) {
	var L [qkK]uint8
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ4_K : (i+1)*gguf.BytesQ4_K]
		d, dmin := quantizeKScaleMin(x, 15, -1, 20, b[4:16], &L)
		putF16(b, d)
		putF16(b[2:], dmin)
		q := b[16:144]
		for j := 0; j < qkK; j += 64 {
			for l := range 32 {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

func quantizeQ5K(src []float32, dst []byte) {
	var L [qkK]uint8
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ5_K : (i+1)*gguf.BytesQ5_K]
		d, dmin := quantizeKScaleMin(x, 31, -0.5, 15, b[4:16], &L)
		putF16(b, d)
		putF16(b[2:], dmin)
		qh := b[16:48]
		ql := b[48:176]
		clear(qh)
		m1, m2 := byte(1), byte(2)
		for n := 0; n < qkK; n += 64 {
			for j := range 32 {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[n/2+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights (weights x²): symmetric levels in [-nmax, nmax-1], refined over 18
// candidate scales by weighted least squares. It returns the scale; the
// levels are stored offset by nmax in L.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	max, amax := signedMax(x)
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	fit := func(iscale float32) (sumLX, sumL2 float32) {
		for _, v := range x {
			l := float32(min(nmax-1, max32(-nmax, nearestInt(iscale*v))))
			w := v * v
			sumLX += float32(w * v * l)
			sumL2 += float32(w * l * l)
		}
		return sumLX, sumL2
	}
	store := func(iscale float32) {
		for i, v := range x {
			L[i] = int8(nmax + min(nmax-1, max32(-nmax, nearestInt(iscale*v))))
		}
	}
	iscale := -float32(nmax) / max
	store(iscale)
	sumLX, sumL2 := fit(iscale)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / max
		sumLX, sumL2 = fit(iscale)
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			store(iscale)
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

func max32(a, b int32) int32 { return max(a, b) }

func quantizeQ6K(src []float32, dst []byte) {
	var L [qkK]int8
	var scales [16]float32
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ6_K : (i+1)*gguf.BytesQ6_K]
		var maxScale, maxAbsScale float32
		for ib := range 16 {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(b)
			continue
		}
		iscale := -128 / maxScale
		dh := F32ToF16(1 / iscale)
		binary.LittleEndian.PutUint16(b[208:], dh)
		sc := b[192:208]
		for ib := range 16 {
			sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d0 := F16ToF32(dh)
		for j := range 16 {
			d := d0 * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for ii := range 16 {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(min(31, max32(-32, l)) + 32)
			}
		}
		ql := b[0:128]
		qh := b[128:192]
		for j := 0; j < qkK; j += 128 {
			for l := range 32 {
				q1 := byte(L[j+l]) & 0xf
				q2 := byte(L[j+l+32]) & 0xf
				q3 := byte(L[j+l+64]) & 0xf
				q4 := byte(L[j+l+96]) & 0xf
				ql[j/2+l] = q1 | q3<<4
				ql[j/2+l+32] = q2 | q4<<4
				qh[j/4+l] = byte(L[j+l])>>4 | (byte(L[j+l+32])>>4)<<2 | (byte(L[j+l+64])>>4)<<4 | (byte(L[j+l+96])>>4)<<6
			}
		}
	}
}

// packQ2Bits stores 2-bit levels L (256) as Q2_K/Q3_K do: byte l of each
// 32-byte half holds levels l, l+32, l+64, l+96 of that 128-value half.
func packQ2Bits(L *[qkK]uint8, qs []byte) {
	for j := 0; j < qkK; j += 128 {
		for l := range 32 {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantizeQ2K(src []float32, dst []byte) {
	const q4scale = 15
	var L [qkK]uint8
	var laux [16]uint8
	var weights [16]float32
	var scales, mins [16]float32
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ2_K : (i+1)*gguf.BytesQ2_K]
		sc := b[0:16]
		var maxScale, maxMin float32
		for j := range 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			maxScale = max(maxScale, scales[j])
			maxMin = max(maxMin, mins[j])
		}
		var dh, dminh uint16
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range 16 {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			dh = F32ToF16(maxScale / q4scale)
		} else {
			clear(sc)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range 16 {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			dminh = F32ToF16(maxMin / q4scale)
		}
		binary.LittleEndian.PutUint16(b[80:], dh)
		binary.LittleEndian.PutUint16(b[82:], dminh)
		d0, dmin0 := F16ToF32(dh), F16ToF32(dminh)
		for j := range 16 {
			d := d0 * float32(sc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := dmin0 * float32(sc[j]>>4)
			for ii := range 16 {
				l := nearestInt((x[16*j+ii] + dm) / d)
				L[16*j+ii] = uint8(min(3, max(0, l)))
			}
		}
		packQ2Bits(&L, b[16:80])
	}
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: symmetric levels in
// [-nmax, nmax-1] from the largest magnitude, then up to five passes moving
// single levels while that improves the x²-weighted fit. Levels are stored
// offset by nmax; it returns the fitted scale.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	max, amax := signedMax(x)
	if amax < groupMaxEps {
		for i := range x {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / max
	var sumLX, sumL2 float32
	for i, v := range x {
		l := min(nmax-1, max32(-nmax, nearestInt(iscale*v)))
		L[i] = int8(l)
		w := v * v
		sumLX += float32(w * v * float32(l))
		sumL2 += float32(w * float32(l) * float32(l))
	}
	for range 5 {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumLX - float32(w*v*li)
			if slx > 0 {
				sl2 := sumL2 - float32(w*li*li)
				nl := min(nmax-1, max32(-nmax, nearestInt(v*sl2/slx)))
				if nl != int32(L[i]) {
					fl := float32(nl)
					slx += float32(w * v * fl)
					sl2 += float32(w * fl * fl)
					if sl2 > 0 && slx*slx*sumL2 > sumLX*sumLX*sl2 {
						L[i] = int8(nl)
						sumLX, sumL2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	return sumLX / sumL2
}

func quantizeQ3K(src []float32, dst []byte) {
	var L [qkK]int8
	var scales [16]float32
	var levels [qkK]uint8
	for i := 0; i < len(src)/qkK; i++ {
		x := src[i*qkK : (i+1)*qkK]
		b := dst[i*gguf.BytesQ3_K : (i+1)*gguf.BytesQ3_K]
		hmask := b[0:32]
		sc := b[96:108]
		var maxScale, amax float32
		for j := range 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		clear(sc)
		var dh uint16
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range 16 {
				l := int8(nearestInt(iscale * scales[j]))
				l = min(31, max(-32, l)) + 32
				if j < 8 {
					sc[j] = byte(l) & 0xf
				} else {
					sc[j-8] |= (byte(l) & 0xf) << 4
				}
				l >>= 4
				sc[j%4+8] |= byte(l) << (2 * (j / 4))
			}
			dh = F32ToF16(1 / iscale)
		}
		binary.LittleEndian.PutUint16(b[108:], dh)
		d0 := F16ToF32(dh)
		for j := range 16 {
			s := nibbleAt(sc, j, 8) | (sc[8+j%4]>>(2*(j/4))&3)<<4
			d := d0 * float32(int32(s)-32)
			if d == 0 {
				continue
			}
			for ii := range 16 {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(min(3, max32(-4, l)) + 4)
			}
		}
		clear(hmask)
		m, hm := 0, byte(1)
		for j := range qkK {
			v := uint8(L[j])
			if v > 3 {
				hmask[m] |= hm
				v -= 4
			}
			levels[j] = v
			if m++; m == qkK/8 {
				m = 0
				hm <<= 1
			}
		}
		packQ2Bits(&levels, b[32:96])
	}
}

// bestIndexIQ4 returns the index of the codebook value nearest to x (the
// upper one on exact ties), by bisection as ggml's best_index_int8.
func bestIndexIQ4(x float32) uint8 {
	v := &kvaluesIQ4NL
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if x < float32(v[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if x-float32(v[hi-1]) < float32(v[hi])-x {
		return uint8(hi - 1)
	}
	return uint8(hi)
}

// quantizeIQ4 is ggml's quantize_row_iq4_nl_impl as quantize_iq4_nl and
// quantize_iq4_xs call it without an importance matrix (weights x², 7
// refinement tries each side): for x of 32 values (IQ4_NL: scalesH nil) or
// 256 values (IQ4_XS: 8 sub-blocks whose scales are then quantized to 6 bits
// against the largest). It writes the f16 scale to dh and the packed
// codebook indices to q4.
func quantizeIQ4(x []float32, dh, q4, scalesH, scalesL []byte) {
	const ntry = 7
	const blk = 32
	var L [qkK]uint8
	var scales [8]float32
	nsub := len(x) / blk
	clear(q4[:len(x)/2])
	putF16(dh, 0)
	var maxScale, amaxScale float32
	for ib := range nsub {
		xb := x[ib*blk : (ib+1)*blk]
		Lb := L[ib*blk : (ib+1)*blk]
		max, amax := signedMax(xb)
		if amax < groupMaxEps {
			scales[ib] = 0
			continue
		}
		v0 := float32(kvaluesIQ4NL[0])
		d := -max / v0
		id := 1 / d
		var sumQX, sumQ2 float32
		for j, v := range xb {
			l := bestIndexIQ4(id * v)
			Lb[j] = l
			q := float32(kvaluesIQ4NL[l])
			w := v * v
			sumQX += float32(w * q * v)
			sumQ2 += float32(w * q * q)
		}
		d = sumQX / sumQ2
		best := d * sumQX
		for itry := -ntry; itry <= ntry; itry++ {
			id = float32(itry+int(kvaluesIQ4NL[0])) / max
			sumQX, sumQ2 = 0, 0
			for _, v := range xb {
				q := float32(kvaluesIQ4NL[bestIndexIQ4(id*v)])
				w := v * v
				sumQX += float32(w * q * v)
				sumQ2 += float32(w * q * q)
			}
			if sumQ2 > 0 && sumQX*sumQX > best*sumQ2 {
				d = sumQX / sumQ2
				best = d * sumQX
			}
		}
		scales[ib] = d
		if a := abs32(d); a > amaxScale {
			amaxScale, maxScale = a, d
		}
	}
	if nsub > 1 {
		var sh uint16
		d := -maxScale / 32
		putF16(dh, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for ib := range nsub {
			l := min(31, max32(-32, nearestInt(id*scales[ib])))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, v := range x[ib*blk : (ib+1)*blk] {
				L[ib*blk+j] = bestIndexIQ4(idl * v)
			}
			l += 32
			if ib%2 == 0 {
				scalesL[ib/2] = byte(l & 0xf)
			} else {
				scalesL[ib/2] |= byte(l&0xf) << 4
			}
			sh |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(scalesH, sh)
	} else {
		putF16(dh, scales[0])
		var id float32
		if scales[0] != 0 {
			id = 1 / scales[0]
		}
		for j, v := range x {
			L[j] = bestIndexIQ4(id * v)
		}
	}
	for i := range len(x) / 32 {
		for j := range 16 {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}
