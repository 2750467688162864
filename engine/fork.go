package engine

import "fmt"

// Fork returns a new session that starts where s is: the same parameters
// (context size, KV type, threads), the same positions and token history,
// so that the two continue independently and either gives the logits s
// would have given.
//
// A hybrid model's recurrent state and its checkpoints are copied too.
//
// The KV cache is copied, not shared: the new session owns its arrays from
// the start, so neither session pays a check on every write and closing
// one never affects the other. The copy costs what it copies (the held
// positions of every layer; the cache's unused capacity is mapped lazily
// and never touched), and nothing is recomputed. Sharing a long system
// prompt among many requests therefore costs one memory copy of it per
// request instead of its prefill.
func (s *Session) Fork() (*Session, error) {
	if err := s.enter("fork"); err != nil {
		return nil, err
	}
	defer s.leave()
	f, err := s.m.NewSession(s.params)
	if err != nil {
		return nil, fmt.Errorf("engine: fork: %w", err)
	}
	if err := f.adopt(s.cache, s.hist); err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: fork: %w", err)
	}
	f.adoptRecurrent(s.rec)
	return f, nil
}

// adopt makes the empty session s hold the positions of hist, whose keys
// and values are the first len(hist) positions of src.
func (s *Session) adopt(src *kvCache, hist []int32) error {
	n := len(hist)
	if err := s.cache.ensure(n, 0); err != nil {
		return err
	}
	s.fitScratch()
	s.cache.copyFrom(src, n)
	s.hist = append(s.hist[:0], hist...)
	s.pos = n
	return nil
}

// adoptRecurrent makes s hold src's recurrent state and checkpoints (a
// hybrid model's; nothing for the others).
func (s *Session) adoptRecurrent(src *recurrent) {
	if s.rec != nil && src != nil {
		s.rec.copyFrom(src)
	}
}
