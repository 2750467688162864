package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/settings"
)

// withEnv fills the fields of p left at their defaults from the MOONLM_*
// environment (internal/settings), so the engine gets every choice as a
// parameter; a malformed variable is an error.
func withEnv(p engine.ModelParams) (engine.ModelParams, error) {
	if err := settings.Read().Apply(&p); err != nil {
		return p, fmt.Errorf("environment: %w", err)
	}
	return p, nil
}
