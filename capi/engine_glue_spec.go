package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
)

// setDrafter turns generateParams' draft options into the engine's
// drafter for target.
func setDrafter(gp *engine.GenerateParams, target *engine.Session, p generateParams) error {
	gp.DraftTokens = p.DraftTokens
	switch p.Draft {
	case draftNone:
		gp.DraftTokens = 0
		return nil
	case draftLookup:
		gp.Draft = engine.DefaultPromptLookup()
		return nil
	}
	es, ok := p.DraftSession.(engineSession)
	if !ok {
		return fmt.Errorf("%w: the draft session is not an engine session", engine.ErrInvalidArgument)
	}
	d, err := engine.NewModelDrafter(target.Model(), es.s)
	if err != nil {
		return err
	}
	gp.Draft = d
	return nil
}
