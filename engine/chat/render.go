package chat

import (
	"errors"
	"fmt"
)

// Budgets that keep a hostile template from looping forever or exhausting
// memory. Real chat templates use a tiny fraction of them.
const (
	// MaxSteps bounds evaluated nodes and loop iterations per render.
	MaxSteps = 5_000_000
	// MaxOutput bounds the rendered text and any single string built while
	// rendering, in bytes.
	MaxOutput = 16 << 20
	// maxCallDepth bounds macro recursion.
	maxCallDepth = 64
	// maxItems bounds lists made by range() and list repetition.
	maxItems = 1 << 20
)

// ErrBudget is returned (wrapped) when a render exceeds MaxSteps, MaxOutput
// or the recursion bound.
var ErrBudget = errors.New("chat template exceeded its evaluation budget")

// ExceptionError is what the template's raise_exception(msg) returns.
type ExceptionError struct{ Message string }

func (e *ExceptionError) Error() string { return "chat template raised: " + e.Message }

// RenderError is a failure while rendering, with where in the template.
type RenderError struct {
	Pos Pos
	Err error
}

func (e *RenderError) Error() string { return fmt.Sprintf("chat template: %s: %v", e.Pos, e.Err) }
func (e *RenderError) Unwrap() error { return e.Err }

var (
	errBreak    = errors.New("break outside loop")
	errContinue = errors.New("continue outside loop")
)

type renderer struct {
	out    sbuf
	scopes []map[string]value
	steps  int
	depth  int
}

//go:noinline
func (r *renderer) step() error {
	r.steps++
	if r.steps > MaxSteps {
		return errorf("%w: more than %d steps", ErrBudget, MaxSteps)
	}
	return nil
}

// charge counts the work of an operation over v against the step budget,
// so bulk operations on large values cannot run unbounded.
func (r *renderer) charge(vs ...value) error {
	for _, v := range vs {
		switch x := v.(type) {
		case string:
			r.steps += len(x) / 64
		case *list:
			r.steps += len(x.Items)
		case *dict:
			r.steps += x.Len()
		}
	}
	if r.steps > MaxSteps {
		return errorf("%w: more than %d steps", ErrBudget, MaxSteps)
	}
	return nil
}

func (r *renderer) lookup(name string) (value, bool) {
	for i := len(r.scopes) - 1; i >= 0; i-- {
		if v, ok := r.scopes[i][name]; ok {
			return v, true
		}
	}
	if g, ok := globals[name]; ok {
		return g, true
	}
	return nil, false
}

func (r *renderer) set(name string, v value) { r.scopes[len(r.scopes)-1][name] = v }

func (r *renderer) write(s string) error {
	if r.out.Len()+len(s) > MaxOutput {
		return errorf("%w: output larger than %d bytes", ErrBudget, MaxOutput)
	}
	r.out.WriteString(s)
	return nil
}

//go:noinline
func checkLen(n int) error {
	if n > MaxOutput {
		return errorf("%w: string larger than %d bytes", ErrBudget, MaxOutput)
	}
	return nil
}

func wrapPos(pos Pos, err error) error {
	if err == nil || err == errBreak || err == errContinue {
		return err
	}
	var re *RenderError
	if errors.As(err, &re) {
		return err
	}
	return &RenderError{Pos: pos, Err: err}
}
