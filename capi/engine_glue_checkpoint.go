package main

import "github.com/moonlm/moonlm/engine"

// checkpointSession is a backend session that reports the checkpoints of
// a hybrid model's recurrent state (exports_checkpoint.go).
type checkpointSession interface {
	Checkpoints() (engine.CheckpointInfo, error)
}

func (e engineSession) Checkpoints() (engine.CheckpointInfo, error) { return e.s.Checkpoints() }
