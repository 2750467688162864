package sample

// tokenRing keeps the last limit accepted tokens. Its storage grows with
// the tokens accepted (amortized, like append), up to limit, so a window of
// 2^24 tokens costs nothing until it fills; then it is a ring.
type tokenRing struct {
	buf   []int32
	pos   int // next slot to overwrite once full
	limit int
}

func newTokenRing(limit, eager int) tokenRing {
	return tokenRing{buf: make([]int32, 0, min(limit, eager)), limit: limit}
}

func (r *tokenRing) push(t int32) {
	if r.limit == 0 {
		return
	}
	if len(r.buf) < r.limit {
		r.buf = append(r.buf, t)
		return
	}
	r.buf[r.pos] = t
	r.pos = (r.pos + 1) % r.limit
}

func (r *tokenRing) len() int { return len(r.buf) }

// back returns the i-th most recent token: back(0) is the newest.
func (r *tokenRing) back(i int) int32 {
	if len(r.buf) < r.limit {
		return r.buf[len(r.buf)-1-i]
	}
	j := r.pos - 1 - i
	if j < 0 {
		j += r.limit
	}
	return r.buf[j]
}

func (r *tokenRing) reset() {
	r.buf = r.buf[:0]
	r.pos = 0
}
