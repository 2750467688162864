package engine

// CheckpointInfo describes a hybrid model session's checkpoints of its
// recurrent state (recurrent.go): what its SessionParams put in effect
// and what it holds now. A session of a model without recurrent layers
// has none (all zero).
type CheckpointInfo struct {
	// Every is the decoded positions between checkpoints (0: none while
	// decoding; the end of every prefill still is one unless Most is 0,
	// when Every is 0 too).
	Every int
	// Most is the most checkpoints kept at once (from CheckpointBytes,
	// at least two unless it is negative, then 0).
	Most int
	// Held is the checkpoints held now and Bytes their memory.
	Held  int
	Bytes int64
	// Positions are the positions of the held checkpoints, ascending.
	Positions []int
}

// Checkpoints reports the session's checkpoints.
func (s *Session) Checkpoints() (CheckpointInfo, error) {
	if err := s.enter("checkpoints"); err != nil {
		return CheckpointInfo{}, err
	}
	defer s.leave()
	r := s.rec
	if r == nil {
		return CheckpointInfo{}, nil
	}
	info := CheckpointInfo{Every: r.every, Most: r.most, Held: len(r.cps)}
	if r.most == 0 {
		info.Every = 0 // no budget: none taken at all
	}
	for _, c := range r.cps {
		info.Bytes += 4 * int64(len(c.state))
		info.Positions = append(info.Positions, c.pos)
	}
	return info, nil
}
