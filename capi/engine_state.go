package main

import (
	"io"
)

// The engine side of the session-state entry points (exports_state.go).

// sessionStats is what moonlm_session_stats reports.
type sessionStats struct {
	Evaluated, Reused int64
}

// stateSession is a backend session that reuses prefixes, forks and saves
// its state.
type stateSession interface {
	PrefillReuse(tokens []int32, logits []float32) (int, error)
	Stats() sessionStats
	Tokens() ([]int32, error)
	Fork() (backendSession, error)
	StateSize() (int64, error)
	WriteState(w io.Writer) (int64, error)
	LoadState(data []byte) error
	SaveStateFile(path string) error
	LoadStateFile(path string) error
}

func (e engineSession) PrefillReuse(tokens []int32, logits []float32) (int, error) {
	return e.s.PrefillReuse(tokens, logits)
}

func (e engineSession) Stats() sessionStats {
	s := e.s.Stats()
	return sessionStats{Evaluated: s.Evaluated, Reused: s.Reused}
}

func (e engineSession) Tokens() ([]int32, error) { return e.s.Tokens() }

func (e engineSession) Fork() (backendSession, error) {
	f, err := e.s.Fork()
	if err != nil {
		return nil, err
	}
	return engineSession{f}, nil
}

func (e engineSession) StateSize() (int64, error)             { return e.s.StateSize() }
func (e engineSession) WriteState(w io.Writer) (int64, error) { return e.s.WriteState(w) }
func (e engineSession) LoadState(data []byte) error           { return e.s.LoadState(data) }
func (e engineSession) SaveStateFile(path string) error       { return e.s.SaveStateFile(path) }
func (e engineSession) LoadStateFile(path string) error       { return e.s.LoadStateFile(path) }
