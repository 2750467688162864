package engine

import (
	"fmt"
	"slices"
)

// A hybrid model's session holds two kinds of memory: the KV cache of its
// attention layers, indexed by position (dropping positions is cutting
// it), and the fixed-size state of its recurrent layers (per layer the
// convolution's last inputs and the DeltaNet's matrices), which holds
// every position at once and cannot be cut. To go back to an earlier
// position the session keeps checkpoints, copies of the recurrent state
// at chosen positions: at the end of every prefill call and every
// CheckpointEvery decoded positions, within CheckpointBytes. Going back
// to position n restores the last checkpoint at or before n (position 0,
// the zero state, always is one) and evaluates the tokens between it and
// n again; going back exactly to a checkpoint restores it bit for bit.

// Checkpoint defaults (SessionParams.CheckpointEvery, CheckpointBytes).
const (
	defaultCheckpointEvery = 32
	defaultCheckpointBytes = 128 << 20
	minCheckpoints         = 2 // kept whatever the budget
)

// recurrent is the recurrent layers' state and its checkpoints.
type recurrent struct {
	slot      []int // per layer, its index in state, -1 for an attention layer
	conv, ssm int   // floats per layer: convolution inputs, DeltaNet matrices
	state     []float32
	mapping   []byte
	cps       []checkpoint // by position
	spare     []checkpoint // evicted checkpoints' memory, reused
	every     int          // decoded positions between checkpoints, 0 = none
	most      int          // checkpoints kept
	lastCP    int          // the position of the newest checkpoint taken
}

// checkpoint is a copy of the recurrent state after pos positions.
type checkpoint struct {
	pos     int
	state   []float32
	mapping []byte
}

// newRecurrent sizes the state of c's recurrent layers; nil for a model
// without any.
func newRecurrent(c *config, every int, budget int64) (*recurrent, error) {
	if !c.Hybrid() {
		return nil, nil
	}
	sp := &c.SSM
	r := &recurrent{slot: make([]int, c.Layers), conv: (sp.ConvK - 1) * sp.ConvDim(), ssm: sp.VHeads * sp.State * sp.State}
	n := 0
	for il := range r.slot {
		r.slot[il] = -1
		if c.Recurrent(il) {
			r.slot[il] = n
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	size := n * (r.conv + r.ssm)
	if int64(size) > 1<<36 {
		return nil, fmt.Errorf("%w: a recurrent state of %d values", ErrOutOfMemory, size)
	}
	var err error
	if r.state, r.mapping, err = mapFloats(size); err != nil {
		return nil, err
	}
	switch {
	case every == 0:
		r.every = defaultCheckpointEvery
	case every > 0:
		r.every = every
	}
	switch {
	case budget == 0:
		budget = defaultCheckpointBytes
	case budget < 0:
		budget = 0
	}
	r.most = max(minCheckpoints, int(budget/max(int64(4*size), 1)))
	if budget == 0 {
		r.most = 0
	}
	return r, nil
}

// mapFloats returns n zeroed float32 values in an anonymous mapping (kept
// outside the Go heap, as the KV cache) and the mapping.
func mapFloats(n int) ([]float32, []byte, error) {
	b, err := anonMap(max(4*n, 1))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: recurrent state of %d values: %w", ErrOutOfMemory, n, err)
	}
	return mapped[float32](b, n), b, nil
}

// convState is layer il's convolution inputs: per channel the last ConvK-1
// inputs, oldest first.
func (r *recurrent) convState(il int) []float32 {
	o := r.slot[il] * (r.conv + r.ssm)
	return r.state[o : o+r.conv]
}

// ssmState is layer il's DeltaNet matrices, one State x State matrix per
// value head, stored transposed (row j holds column j).
func (r *recurrent) ssmState(il int) []float32 {
	o := r.slot[il]*(r.conv+r.ssm) + r.conv
	return r.state[o : o+r.ssm]
}

// reset empties the state (position 0) and drops every checkpoint.
func (r *recurrent) reset() {
	clear(r.state)
	r.dropAfter(0)
	r.lastCP = 0
}

// dropAfter drops the checkpoints after position n.
func (r *recurrent) dropAfter(n int) {
	i := slices.IndexFunc(r.cps, func(c checkpoint) bool { return c.pos > n })
	if i < 0 {
		return
	}
	r.spare = append(r.spare, r.cps[i:]...)
	r.cps = r.cps[:i]
	r.lastCP = min(r.lastCP, n)
}

// snapshot keeps a copy of the state as position pos's checkpoint. Past
// the budget it drops the checkpoint closest to the one before it, so
// the kept ones stay spread over the positions. A state that cannot be
// copied (out of memory) is simply not kept: a rewind then goes back
// further.
func (r *recurrent) snapshot(pos int) {
	r.lastCP = pos
	if r.most == 0 || pos == 0 {
		return
	}
	if n := len(r.cps); n > 0 && r.cps[n-1].pos == pos {
		copy(r.cps[n-1].state, r.state)
		return
	}
	if len(r.cps) >= r.most {
		drop, gap := 0, -1
		for i, c := range r.cps[:len(r.cps)-1] {
			prev := 0
			if i > 0 {
				prev = r.cps[i-1].pos
			}
			if g := c.pos - prev; gap < 0 || g < gap {
				drop, gap = i, g
			}
		}
		r.spare = append(r.spare, r.cps[drop])
		r.cps = slices.Delete(r.cps, drop, drop+1)
	}
	var cp checkpoint
	if n := len(r.spare); n > 0 {
		cp, r.spare = r.spare[n-1], r.spare[:n-1]
	} else {
		var err error
		if cp.state, cp.mapping, err = mapFloats(len(r.state)); err != nil {
			return
		}
	}
	cp.pos = pos
	copy(cp.state, r.state)
	r.cps = append(r.cps, cp)
}

// restore makes the state that of the last checkpoint at or before n
// (position 0's empty state if none), drops the checkpoints after n and
// returns the checkpoint's position.
func (r *recurrent) restore(n int) int {
	r.dropAfter(n)
	if len(r.cps) == 0 {
		clear(r.state)
		r.lastCP = 0
		return 0
	}
	cp := r.cps[len(r.cps)-1]
	copy(r.state, cp.state)
	r.lastCP = cp.pos
	return cp.pos
}

// copyFrom makes r hold src's state and checkpoints (the same model).
func (r *recurrent) copyFrom(src *recurrent) {
	copy(r.state, src.state)
	r.dropAfter(0)
	for _, c := range src.cps {
		cp := checkpoint{pos: c.pos}
		if n := len(r.spare); n > 0 {
			cp, r.spare = r.spare[n-1], r.spare[:n-1]
			cp.pos = c.pos
		} else {
			var err error
			if cp.state, cp.mapping, err = mapFloats(len(r.state)); err != nil {
				break // fewer checkpoints: a rewind goes back further
			}
		}
		copy(cp.state, c.state)
		r.cps = append(r.cps, cp)
	}
	r.lastCP = src.lastCP
}

// free unmaps the state and every checkpoint.
func (r *recurrent) free() {
	maps := [][]byte{r.mapping}
	for _, c := range append(r.cps, r.spare...) {
		maps = append(maps, c.mapping)
	}
	unmapAll(maps)
	r.state, r.mapping, r.cps, r.spare = nil, nil, nil, nil
}

// checkpointAfter takes the checkpoints due after an evaluation of n
// tokens that ended at position pos: always after a prefill call (more
// than one token), every r.every positions while decoding.
func (r *recurrent) checkpointAfter(n, pos int) {
	if n > 1 || (r.every > 0 && pos-r.lastCP >= r.every) {
		r.snapshot(pos)
	}
}

// truncate makes the session hold its first n positions (n <= s.pos). For
// a hybrid model it restores the last checkpoint at or before n and
// evaluates the tokens from there to n again (whose end becomes a
// checkpoint). If that evaluation fails, the session holds the
// checkpoint's positions and the error says so: its state is never that
// of other tokens.
func (s *Session) truncate(what string, n int) error {
	r := s.rec
	if r == nil {
		s.setPos(n)
		return nil
	}
	from := r.restore(n)
	replay := append([]int32(nil), s.hist[from:n]...)
	s.setPos(from)
	if len(replay) == 0 {
		return nil
	}
	if err := s.eval(what, replay, nil, len(replay)); err != nil {
		return fmt.Errorf("engine: %s: re-evaluating positions %d to %d after the checkpoint at %d (the session now holds %d positions): %w",
			what, from, n, from, s.pos, err)
	}
	return nil
}
