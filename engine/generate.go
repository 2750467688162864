package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/engine/tokenizer"
)

// TokenSampler chooses tokens; *sample.Sampler is one. Generate passes it
// every prompt and generated token through Accept, so a caller's sampler
// keeps its penalty history across calls.
type TokenSampler interface {
	Sample(logits []float32) int32
	Accept(tok int32)
}

// LogprobSource is a TokenSampler that reports the log-probabilities of
// the distribution its last Sample call saw (*sample.Sampler is one).
type LogprobSource interface {
	Logprobs(tok int32, top []sample.TokenLogprob) (float32, int)
}

// VocabUser is a TokenSampler that needs the model's vocabulary (DRY's
// sequence breakers); Generate passes it before sampling.
type VocabUser interface {
	SetVocab(v sample.Vocab) error
}

// GenerateParams configure Generate.
type GenerateParams struct {
	// MaxTokens caps the generated tokens; 0 means until an end-of-generation
	// token, a stop string or the end of the context.
	MaxTokens int
	// Sampler configures token choice when TokenSampler is nil; the zero
	// value is greedy.
	Sampler sample.Params
	// TokenSampler, if not nil, chooses the tokens instead of a new sampler
	// made from Sampler.
	TokenSampler TokenSampler
	// Stop strings end generation; the text before one is released, the
	// stop string itself and anything after it are not.
	Stop []string
	// DecodeLast also evaluates the last generated token, so that every
	// generated token is in the KV cache afterwards (at a cost of one
	// decode). Then a token sampled when the context is already full is
	// dropped (not counted, not passed to the callback).
	DecodeLast bool
	// Constraint, if not nil, restricts the tokens (a grammar). It masks
	// the logits before the sampler sees them; generation ends (FinishEOG)
	// once it is Done, and an end-of-generation token is allowed exactly
	// where it CanEnd. Generate advances it with every generated token and
	// does not reset it.
	Constraint sample.Constraint
	// OnLogprobs, if not nil, receives every generated token (counted in
	// the result) with its log-probability and the TopLogprobs most likely
	// tokens, best first, before onPiece sees that token; top is valid
	// during the call only. The values are those of the sampler's
	// distribution when it is a LogprobSource (*sample.Sampler: after the
	// constraint's mask, the logit bias, the penalties and DRY, before
	// truncation and temperature), else log_softmax of the masked logits.
	OnLogprobs func(tok int32, logprob float32, top []sample.TokenLogprob)
	// TopLogprobs is how many alternatives OnLogprobs gets, 0 to
	// sample.MaxTopLogprobs.
	TopLogprobs int
	// Stepper, if not nil, evaluates the prompt and the generated tokens
	// instead of the session itself: a loop that advances several
	// generations in shared batched steps (a Batcher) implements it.
	Stepper Stepper
}

// Stepper evaluates tokens for a Generate call running on session s (which
// that call holds): Eval evaluates tokens at s's next positions and writes
// the last one's logits into logits. A Stepper hands s to
// Batcher.Step, which accepts a session held by its own Generate; on an
// error s may hold part of the tokens (Generate then drops them).
type Stepper interface {
	Eval(s *Session, tokens []int32, logits []float32) error
}

// FinishReason says why Generate stopped.
type FinishReason int

const (
	FinishNone      FinishReason = iota // not finished: the call failed
	FinishStop                          // a stop string appeared
	FinishLength                        // MaxTokens reached
	FinishEOG                           // an end-of-generation token, or the constraint is done
	FinishContext                       // the context is full
	FinishCancelled                     // Cancel, or the callback returned false
)

func (r FinishReason) String() string {
	switch r {
	case FinishNone:
		return "none"
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishEOG:
		return "eog"
	case FinishContext:
		return "context"
	case FinishCancelled:
		return "cancelled"
	}
	return fmt.Sprintf("FinishReason(%d)", int(r))
}

// GenerateResult describes a Generate call, also one that failed.
type GenerateResult struct {
	Finish          FinishReason
	PromptTokens    int           // prompt tokens evaluated (0 if the prefill failed)
	Tokens          int           // tokens generated (an end-of-generation token excluded)
	Generated       []int32       // the generated token ids
	LastToken       int32         // the last generated token; -1 if none
	LastTokenCached bool          // whether LastToken is in the KV cache
	PromptDuration  time.Duration // prefill time
	DecodeDuration  time.Duration // time sampling and decoding generated tokens
}

// PieceFunc receives generated text. It is called once per generated token
// with that token and the text released by it: empty while the text may be
// the start of a stop string or ends inside a UTF-8 character. At the end
// of generation (FinishLength, FinishEOG, FinishContext, or a stop string
// completed by the held-back text) a last call with token -1 releases what
// was held back, if anything; bytes of a character the model never finished
// are released as they are. text is valid only during the call. Returning
// false ends generation with FinishCancelled.
type PieceFunc func(text []byte, token int32) bool

// genScratch is Generate's per-session state, kept so that generating
// allocates nothing per token.
type genScratch struct {
	logits []float32
	tokens []int32
	dec    *tokenizer.StreamDecoder
	text   []byte
	stop   stopFilter
	eog    []int32 // the end-of-generation ids within the logits
	eogL   []float32
	top    [sample.MaxTopLogprobs]sample.TokenLogprob
}

// Generate prefills prompt after the session's current position, then
// samples tokens and streams their text to onPiece (which may be nil) until
// an end-of-generation token, MaxTokens, a stop string, the end of the
// context, the callback's request or Cancel. The text is decoded as a
// continuation of the prompt (a SentencePiece piece keeps its leading
// space). Every generated token except the last is in the KV cache
// afterwards (the last one too with DecodeLast; see
// GenerateResult.LastTokenCached), so a conversation can continue from
// Pos(). A prompt that does not fit is ErrContextFull; Cancel makes it
// return ErrCancelled with the result so far (FinishCancelled). The result
// is filled as far as the call got, also on error.
func (s *Session) Generate(prompt []int32, p GenerateParams, onPiece PieceFunc) (res GenerateResult, err error) {
	res.LastToken = -1
	if err := s.enter("generate"); err != nil {
		return res, err
	}
	defer s.leave()
	if p.MaxTokens < 0 {
		return res, fmt.Errorf("engine: generate: %w: max tokens %d", ErrInvalidArgument, p.MaxTokens)
	}
	if len(prompt) == 0 {
		return res, fmt.Errorf("engine: generate: %w: empty prompt (the next token needs logits)", ErrInvalidArgument)
	}
	if p.TopLogprobs < 0 || p.TopLogprobs > sample.MaxTopLogprobs {
		return res, fmt.Errorf("engine: generate: %w: top logprobs %d; want 0 to %d", ErrInvalidArgument, p.TopLogprobs, sample.MaxTopLogprobs)
	}
	smp := p.TokenSampler
	if smp == nil {
		ns, err := sample.New(p.Sampler)
		if err != nil {
			return res, fmt.Errorf("engine: generate: %w: %w", ErrInvalidArgument, err)
		}
		smp = ns
	}
	if vu, ok := smp.(VocabUser); ok {
		if err := vu.SetVocab(s.m.SamplerVocab()); err != nil {
			return res, fmt.Errorf("engine: generate: %w: %w", ErrInvalidArgument, err)
		}
	}
	g := &s.gen
	if vocab := s.m.output.Rows; len(g.logits) < vocab {
		g.logits = make([]float32, vocab)
	}
	if g.eog == nil {
		for _, id := range s.m.tok.EOGTokens() {
			if int(id) < s.m.output.Rows {
				g.eog = append(g.eog, id)
			}
		}
		g.eogL = make([]float32, len(g.eog))
	}
	if g.dec == nil {
		g.dec = tokenizer.NewContinuationDecoder(s.m.tok)
	}
	g.dec.ResetContinuation()
	g.stop.reset(p.Stop)
	g.tokens = g.tokens[:0]

	t0 := time.Now()
	if err := s.genEval(p.Stepper, "generate: prefill", prompt, g.logits); err != nil {
		if errors.Is(err, ErrCancelled) {
			res.Finish = FinishCancelled
		}
		return res, err
	}
	for _, t := range prompt {
		smp.Accept(t)
	}
	res.PromptTokens = len(prompt)
	res.PromptDuration = time.Since(t0)
	t1 := time.Now()
	defer func() {
		res.DecodeDuration = time.Since(t1)
		res.Tokens = len(g.tokens)
		res.Generated = slices.Clone(g.tokens)
	}()
	res.Finish, err = s.generateLoop(p, smp, onPiece, &res)
	return res, err
}

// generateLoop samples, streams and decodes until a finish reason.
func (s *Session) generateLoop(p GenerateParams, smp TokenSampler, onPiece PieceFunc, res *GenerateResult) (FinishReason, error) {
	g := &s.gen
	cons := p.Constraint
	lps, _ := smp.(LogprobSource)
	pp, _ := smp.(interface{ Possible(tok int32) bool })
	for {
		if s.cancelled() {
			return FinishCancelled, fmt.Errorf("engine: generate: %w", ErrCancelled)
		}
		logits := g.logits[:s.m.output.Rows]
		if cons != nil {
			if cons.Done() {
				return s.finishText(FinishEOG, onPiece), nil
			}
			s.mask(cons, logits)
		}
		tok := smp.Sample(logits)
		if tok < 0 || int(tok) >= s.m.output.Rows {
			return FinishNone, fmt.Errorf("engine: generate: %w: sampler returned token %d", ErrInternal, tok)
		}
		if cons != nil && (math.IsInf(float64(logits[tok]), -1) || pp != nil && !pp.Possible(tok)) {
			// Accept says why, when the constraint knows (a grammar that
			// hit a limit masks every token).
			why := cons.Accept(tok)
			return FinishNone, fmt.Errorf("engine: generate: %w: the constraint (with the logit bias) allows no token here (%v)", ErrInvalidArgument, why)
		}
		if s.m.tok.IsEOG(tok) {
			return s.finishText(FinishEOG, onPiece), nil
		}
		if p.DecodeLast && s.pos >= s.nCtx {
			return s.finishText(FinishContext, onPiece), nil
		}
		if cons != nil {
			if err := cons.Accept(tok); err != nil {
				return FinishNone, fmt.Errorf("engine: generate: %w: the constraint refused token %d it allowed: %w", ErrInternal, tok, err)
			}
		}
		smp.Accept(tok)
		g.tokens = append(g.tokens, tok)
		res.LastToken, res.LastTokenCached = tok, false
		if p.OnLogprobs != nil {
			top := g.top[:p.TopLogprobs]
			var lp float32
			var n int
			if lps != nil {
				lp, n = lps.Logprobs(tok, top)
			} else {
				lp, n = sample.LogSoftmaxTop(logits, tok, top)
			}
			p.OnLogprobs(tok, lp, top[:n])
		}
		g.text = g.dec.AppendAdd(g.text[:0], tok)
		text, stopped := g.stop.push(g.text)
		end := FinishNone
		switch {
		case onPiece != nil && !onPiece(text, tok) && !stopped:
			end = FinishCancelled
		case stopped:
			end = FinishStop
		case cons != nil && cons.Done():
			end = FinishEOG
		case p.MaxTokens > 0 && len(g.tokens) >= p.MaxTokens:
			end = FinishLength
		case !p.DecodeLast && s.pos >= s.nCtx:
			end = FinishContext
		}
		if end != FinishNone && !p.DecodeLast {
			if end == FinishCancelled || end == FinishStop {
				return end, nil
			}
			return s.finishText(end, onPiece), nil
		}
		s.tokens[0] = tok
		if err := s.genEval(p.Stepper, "generate: decode", s.tokens[:1], g.logits); err != nil {
			if errors.Is(err, ErrCancelled) {
				return FinishCancelled, err
			}
			return FinishNone, err
		}
		res.LastTokenCached = true
		switch end {
		case FinishNone:
		case FinishCancelled, FinishStop:
			return end, nil
		default:
			return s.finishText(end, onPiece), nil
		}
	}
}

// mask applies cons to logits, then allows the end-of-generation tokens
// (with their own logits) exactly where cons can end.
func (s *Session) mask(cons sample.Constraint, logits []float32) {
	g := &s.gen
	for i, id := range g.eog {
		g.eogL[i] = logits[id]
	}
	cons.Mask(logits)
	end := cons.CanEnd()
	for i, id := range g.eog {
		if end {
			logits[id] = g.eogL[i]
		} else {
			logits[id] = float32(math.Inf(-1))
		}
	}
}

// finishText releases the held-back text at the end of generation; if it
// completes a stop string the reason becomes FinishStop.
func (s *Session) finishText(reason FinishReason, onPiece PieceFunc) FinishReason {
	g := &s.gen
	g.text = g.dec.AppendFlush(g.text[:0])
	text, stopped := g.stop.finish(g.text)
	if stopped {
		reason = FinishStop
	}
	if len(text) > 0 && onPiece != nil {
		onPiece(text, -1)
	}
	return reason
}

// genEval evaluates tokens for Generate, writing the last one's logits:
// itself, or through st, marking the session as lent to it for the call.
// On error the session's position is unchanged.
func (s *Session) genEval(st Stepper, what string, tokens []int32, logits []float32) error {
	if st == nil {
		return s.eval(what, tokens, logits, len(tokens)-1)
	}
	start := s.pos
	s.lent = true
	err := st.Eval(s, tokens, logits)
	s.lent = false
	if err != nil {
		s.setPos(start)
		return fmt.Errorf("engine: %s: %w", what, err)
	}
	return nil
}
