package main

import (
	"flag"
	"fmt"

	"github.com/moonlm/moonlm/engine"
)

// specFlags are the speculative decoding options of generate and chat.
type specFlags struct {
	lookup   bool
	draft    string
	draftMax int
}

func (f *specFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.lookup, "lookup", false, "speculative decoding with prompt lookup: guess tokens by finding the text's last words earlier in it")
	fs.StringVar(&f.draft, "md", "", "speculative decoding with a draft model `file` of the same vocabulary")
	fs.StringVar(&f.draft, "model-draft", "", "")
	fs.IntVar(&f.draftMax, "draft-max", 0, fmt.Sprintf("tokens drafted per verification pass (0 = %d)", engine.DefaultDraftTokens))
}

// drafter makes the drafter the flags ask for (nil for none) and a
// function releasing it; ef opens the draft model as it opened m.
func (f *specFlags) drafter(ef *engineFlags, m *engine.Model, nCtx int) (engine.Drafter, func(), error) {
	none := func() {}
	if f.draftMax < 0 || f.draftMax > engine.MaxDraftTokens {
		return nil, none, fmt.Errorf("--draft-max %d: want 0 to %d", f.draftMax, engine.MaxDraftTokens)
	}
	switch {
	case f.lookup && f.draft != "":
		return nil, none, fmt.Errorf("--lookup and --model-draft: choose one")
	case f.lookup:
		return engine.DefaultPromptLookup(), none, nil
	case f.draft == "":
		return nil, none, nil
	}
	p, err := ef.modelParams()
	if err != nil {
		return nil, none, err
	}
	dm, err := engine.Open(f.draft, p)
	if err != nil {
		return nil, none, fmt.Errorf("draft model: %w", err)
	}
	ds, err := dm.NewSession(ef.sessionParams(nCtx))
	if err != nil {
		dm.Close()
		return nil, none, fmt.Errorf("draft model: %w", err)
	}
	d, err := engine.NewModelDrafter(m, ds)
	if err != nil {
		ds.Close()
		dm.Close()
		return nil, none, err
	}
	return d, func() { ds.Close(); dm.Close() }, nil
}

// draftLine reports the drafts of a speculative run ("" without any).
func draftLine(st engine.GenerateResult) string {
	if st.Drafted == 0 {
		return ""
	}
	return fmt.Sprintf("moonlm: drafted %d tokens, accepted %d (%.1f%%)\n",
		st.Drafted, st.DraftAccepted, 100*float64(st.DraftAccepted)/float64(st.Drafted))
}
