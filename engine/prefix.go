package engine

import "fmt"

// SessionStats counts a session's work since it was made (or restored).
type SessionStats struct {
	// Evaluated is the number of tokens run through the model.
	Evaluated int64
	// Reused is the number of tokens PrefillReuse found already held and
	// did not evaluate.
	Reused int64
}

// Stats reports the session's counters. Like Pos, it reads state that a
// call running on another goroutine changes: call it between calls.
func (s *Session) Stats() SessionStats { return s.stats }

// Tokens returns a copy of the tokens the session holds, one per position.
func (s *Session) Tokens() ([]int32, error) {
	if err := s.enter("tokens"); err != nil {
		return nil, err
	}
	defer s.leave()
	return append([]int32(nil), s.hist...), nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// PrefillReuse makes the session hold exactly tokens, evaluating as few as
// it can: it keeps the longest common prefix of what it holds and tokens,
// drops the positions after it and evaluates the rest, writing the last
// position's logits into logits (len >= the vocabulary size) unless logits
// is nil. Logits come only from evaluating a position, so with logits the
// last token is always evaluated, again if it was already held. The
// result is the number of tokens evaluated. A conversation passes its
// whole history each turn and pays only for the new tokens.
//
// The logits are those of a session that evaluated the same tokens in the
// same calls, and, in the fast numerics, bit for bit those of a single
// prefill of all of tokens wherever the kept prefix ends: the products are
// batch-invariant (a token's row rounds the same whatever the chunk it sits
// in). Positions the session decoded one at a time (its replies) are kept
// as they are; with ggml's one-token attention order they differ from a
// prefill of the same tokens by float rounding. The llama.cpp and
// ik_llama.cpp numerics modes round products by batch size, as those
// engines do, so there the split matters.
//
// Arguments are checked before anything changes; if the evaluation itself
// fails, the session holds the common prefix.
func (s *Session) PrefillReuse(tokens []int32, logits []float32) (int, error) {
	if err := s.enter("prefill reuse"); err != nil {
		return 0, err
	}
	defer s.leave()
	const what = "prefill reuse"
	if len(tokens) == 0 {
		return 0, fmt.Errorf("engine: %s: %w: no tokens", what, ErrInvalidArgument)
	}
	if logits != nil && len(logits) < s.m.output.Rows {
		return 0, fmt.Errorf("engine: %s: %w: logits buffer of %d for a vocabulary of %d", what, ErrInvalidArgument, len(logits), s.m.output.Rows)
	}
	if len(tokens) > s.nCtx {
		return 0, fmt.Errorf("engine: %s: %w: %d tokens > context %d", what, ErrContextFull, len(tokens), s.nCtx)
	}
	vocab := int32(s.m.embd.Rows)
	for i, t := range tokens {
		if t < 0 || t >= vocab {
			return 0, fmt.Errorf("engine: %s: %w: token %d at %d is outside the vocabulary of %d", what, ErrInvalidArgument, t, i, vocab)
		}
	}
	keep := commonPrefix(s.hist, tokens)
	if logits != nil {
		keep = min(keep, len(tokens)-1)
	}
	if s.rec != nil && keep < s.pos {
		// A recurrent state goes back only to a checkpoint: evaluate
		// from there.
		keep = s.rec.restore(keep)
	}
	s.setPos(keep)
	s.stats.Reused += int64(keep)
	rest := tokens[keep:]
	if len(rest) == 0 {
		return 0, nil
	}
	from := len(rest) - 1
	if logits == nil {
		from = len(rest)
	}
	if err := s.eval(what, rest, logits, from); err != nil {
		return 0, err
	}
	return len(rest), nil
}
