package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/moonlm/moonlm/engine/sample"
)

// GenerateParams configure Generate.
type GenerateParams struct {
	// MaxTokens caps the generated tokens; 0 means until an end-of-generation
	// token, a stop string or the end of the context.
	MaxTokens int
	// Sampler configures token choice; the zero value is greedy.
	Sampler sample.Params
	// Stop strings end generation; the text before one is emitted, the stop
	// string itself is not.
	Stop []string
}

// StopReason says why Generate stopped.
type StopReason int

const (
	StopEOG       StopReason = iota // the model produced an end-of-generation token
	StopMaxTokens                   // MaxTokens reached
	StopString                      // a stop string appeared
	StopContext                     // the context is full
	StopCallback                    // emit returned false
)

func (r StopReason) String() string {
	switch r {
	case StopEOG:
		return "eog"
	case StopMaxTokens:
		return "max_tokens"
	case StopString:
		return "stop_string"
	case StopContext:
		return "context_full"
	case StopCallback:
		return "callback"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// GenerateStats describe a Generate call.
type GenerateStats struct {
	PromptTokens    int           // tokens prefilled
	Tokens          int           // tokens generated (the end-of-generation token excluded)
	PromptDuration  time.Duration // prefill time
	DecodeDuration  time.Duration // time sampling and decoding generated tokens
	Reason          StopReason
	Generated       []int32 // the generated token ids
	LastToken       int32   // the last generated token, not yet in the KV cache; -1 if none
	LastTokenCached bool    // whether LastToken was decoded into the cache
}

// Generate prefills prompt after the session's current position, then
// samples tokens and streams their text to emit (which returns false to
// stop) until an end-of-generation token, MaxTokens, a stop string or the
// end of the context. Every generated token except the last is in the KV
// cache afterwards (the last one too when it was decoded, see
// GenerateStats.LastTokenCached), so a conversation can continue from
// Pos(). Cancel makes it return ErrCancelled.
func (s *Session) Generate(prompt []int32, p GenerateParams, emit func(piece string) bool) (st GenerateStats, err error) {
	st.LastToken = -1
	if err := s.enter("generate"); err != nil {
		return st, err
	}
	defer s.leave()
	if p.MaxTokens < 0 {
		return st, fmt.Errorf("engine: generate: %w: max tokens %d", ErrInvalidArgument, p.MaxTokens)
	}
	smp, err := sample.New(p.Sampler)
	if err != nil {
		return st, fmt.Errorf("engine: generate: %w: %w", ErrInvalidArgument, err)
	}
	vocab := s.m.output.Rows
	logits := make([]float32, vocab)
	t0 := time.Now()
	if len(prompt) > 0 {
		if err := s.eval("generate: prefill", prompt, logits, len(prompt)-1); err != nil {
			return st, err
		}
		for _, t := range prompt {
			smp.Accept(t)
		}
	} else {
		return st, fmt.Errorf("engine: generate: %w: empty prompt (the next token needs logits)", ErrInvalidArgument)
	}
	st.PromptTokens = len(prompt)
	st.PromptDuration = time.Since(t0)
	t1 := time.Now()
	defer func() { st.DecodeDuration = time.Since(t1) }()

	stop := sample.NewStopMatcher(p.Stop)
	for {
		if s.cancelled() {
			return st, fmt.Errorf("engine: generate: %w", ErrCancelled)
		}
		tok := smp.Sample(logits)
		if tok < 0 {
			return st, fmt.Errorf("engine: generate: %w: sampler returned no token", ErrInternal)
		}
		if s.m.tok.IsEOG(tok) {
			st.Reason = StopEOG
			break
		}
		smp.Accept(tok)
		st.Tokens++
		st.Generated = append(st.Generated, tok)
		st.LastToken, st.LastTokenCached = tok, false
		text, stopped := stop.Push(string(s.m.tok.Piece(tok)))
		if text != "" && emit != nil && !emit(text) {
			st.Reason = StopCallback
			return st, nil
		}
		if stopped {
			st.Reason = StopString
			return st, nil
		}
		if p.MaxTokens > 0 && st.Tokens >= p.MaxTokens {
			st.Reason = StopMaxTokens
			break
		}
		if s.pos >= s.nCtx {
			st.Reason = StopContext
			break
		}
		s.tokens[0] = tok
		if err := s.eval("generate: decode", s.tokens[:1], logits, 0); err != nil {
			if errors.Is(err, ErrContextFull) {
				st.Reason = StopContext
				break
			}
			return st, err
		}
		st.LastTokenCached = true
	}
	if rest := stop.Flush(); rest != "" && emit != nil {
		emit(rest)
	}
	return st, nil
}
