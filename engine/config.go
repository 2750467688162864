package engine

import (
	"errors"
	"fmt"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/gguf"
)

// config is a model's hyperparameters, as its architecture reads them.
type config = arch.Params

// readConfig finds the architecture of f and reads its hyperparameters. An
// architecture without a family in engine/arch is ErrUnsupported naming it.
func readConfig(f *gguf.File) (*arch.Family, config, error) {
	return arch.Read(f)
}

// errArchDescription marks a family whose description the engine cannot
// run (a bug in engine/arch, caught by the tests of every family).
var errArchDescription = errors.New("architecture description")

func descriptionError(fam *arch.Family, format string, args ...any) error {
	return fmt.Errorf("%w: %w of %s: %s", ErrInternal, errArchDescription, fam.Name, fmt.Sprintf(format, args...))
}
