package kernels

// AttnScoresF16Heads is AttnDotF16RowsMulti for every KV head of a
// grouped-query layer at once, taking the cached keys position by
// position: y[(g*G+j)*yStride+i] = dot(q[(g*G+j)*hd:][:hd],
// keys[i*stride+g*hd:][:hd]) for KV head g < kvHeads, query head j < G of
// its group and key i < m. Each value is bit-identical to what
// AttnDotF16RowsMulti gives for KV head g alone (every score is its own
// sum, in the same order); what changes is the order the cache is read
// in. A cached position holds the keys of all the KV heads side by side,
// so going by KV head reads hd values every stride, which the hardware
// prefetchers follow poorly; here the keys of 4 positions are finished for
// every KV head before the next 4, a contiguous stream. The queries are
// float32 holding f16 values (RoundF16), as for AttnDotF16RowsMulti.
func (s *Set) AttnScoresF16Heads(q []float32, kvHeads, G, hd int, keys []uint16, stride, m int, y []float32, yStride int) {
	if kvHeads <= 0 || G <= 0 || m <= 0 {
		return
	}
	nq := kvHeads * G
	if hd <= 0 || nq*hd > len(q) || stride < kvHeads*hd || (m-1)*stride+kvHeads*hd > len(keys) ||
		yStride < m || (nq-1)*yStride+m > len(y) {
		panic("kernels: AttnScoresF16Heads: vectors do not fit")
	}
	i := s.attnHeadsVec(q, kvHeads, G, hd, keys, stride, m, y, yStride)
	if s.wide() {
		for ; i+4 <= m; i += 4 {
			rows := keys[i*stride:]
			for g := range kvHeads {
				for j0 := 0; j0 < G; j0 += 4 {
					k := min(4, G-j0)
					h := g*G + j0
					s.attnMultiVec(q[h*hd:], k, hd, hd, rows[g*hd:], stride, 4, y[h*yStride+i:], yStride)
				}
			}
		}
	}
	for ; i < m; i++ {
		row := keys[i*stride:]
		for h := range nq {
			g := h / G
			y[h*yStride+i] = attnDotF32F16(q[h*hd:(h+1)*hd], row[g*hd:(g+1)*hd])
		}
	}
}
