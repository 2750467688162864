package engine

import "fmt"

// Where each stage of an open ends on the progress scale: mapping and
// parsing are quick, reading tensors a little slower, packing the weights
// (proportional to the bytes packed) is most of the time.
const (
	progressMapped  = 0.04
	progressParsed  = 0.08
	progressTensors = 0.15
)

// progressStep is the smallest increase reported: at most about a hundred
// calls per open, however many chunks are packed.
const progressStep = 0.01

// progress reports an open's progress to ModelParams.Progress: fractions
// only go up, small steps are held back, and the callback's "stop" is
// remembered so the open can unwind with ErrCancelled.
type progress struct {
	fn        func(float32) bool
	last      float32
	reported  bool
	cancelled bool
}

// report passes f on when it is at least progressStep above the last one
// reported (or is 1); it returns ErrCancelled once the callback asked to
// stop.
func (p *progress) report(f float32) error {
	if p == nil || p.fn == nil {
		return nil
	}
	if p.cancelled {
		return errOpenCancelled
	}
	f = min(max(f, p.last), 1)
	if p.reported && f < 1 && f-p.last < progressStep {
		return nil
	}
	if p.reported && f == p.last {
		return nil
	}
	p.last, p.reported = f, true
	if !p.fn(f) {
		p.cancelled = true
		return errOpenCancelled
	}
	return nil
}

var errOpenCancelled = fmt.Errorf("%w: the progress callback stopped the open", ErrCancelled)
