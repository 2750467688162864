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
	// Draft, if not nil, makes decoding speculative: after each sampled
	// token the drafter guesses up to DraftTokens more, the model
	// evaluates them in one batched pass, and the guesses are kept while
	// they equal what the sampler draws (see Drafter). The output follows
	// the model's own distribution; only the speed changes.
	Draft Drafter
	// DraftTokens is the most tokens drafted per pass, 0 (meaning
	// DefaultDraftTokens) to MaxDraftTokens.
	DraftTokens int
	// KeepSpecial renders control tokens in the text as their text (such
	// as harmony's <|channel|>, so the reasoning and final channels can be
	// told apart); an end-of-generation token still ends the text unseen.
	KeepSpecial bool
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

// DefaultDraftTokens is the drafted tokens per pass when
// GenerateParams.DraftTokens is 0.
const DefaultDraftTokens = 8

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
	Drafted         int           // tokens a Drafter proposed
	DraftAccepted   int           // proposed tokens kept
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
	// Speculative decoding: the logits of a verification pass (one row
	// per token), the tokens evaluated, and the sequence for the drafter.
	rows  []float32
	batch []int32
	hist  []int32
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
	if p.Draft != nil && p.Stepper != nil {
		// A Stepper returns the last token's logits only; verifying drafts
		// needs every row.
		return res, fmt.Errorf("engine: generate: %w: drafting with a Stepper (batched steps)", ErrInvalidArgument)
	}
	if p.DraftTokens < 0 || p.DraftTokens > MaxDraftTokens {
		return res, fmt.Errorf("engine: generate: %w: draft tokens %d; want 0 to %d", ErrInvalidArgument, p.DraftTokens, MaxDraftTokens)
	}
	if p.Draft != nil && p.DraftTokens == 0 {
		p.DraftTokens = DefaultDraftTokens
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
	if p.Draft != nil {
		if need := (p.DraftTokens + 1) * s.m.output.Rows; len(g.rows) < need {
			g.rows = make([]float32, need)
		}
		if cap(g.batch) < MaxDraftTokens+1 {
			g.batch = make([]int32, 0, MaxDraftTokens+1)
		}
		if cap(g.hist) < s.nCtx+1 {
			g.hist = make([]int32, 0, s.nCtx+1)
		}
	}
	g.dec.ResetContinuation()
	g.dec.SetRenderSpecial(p.KeepSpecial)
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
//
// The logits sampled from come in rows: row r of an evaluation of n+1
// tokens (the pending token and n drafts) at positions P.. follows the
// token at P+r. Plain decoding evaluates one token (n = 0); the prompt's
// last row counts as such an evaluation. A token sampled at row r < n
// that equals the draft evaluated after it is already in the cache, and
// row r+1 is next; otherwise the drafts after row r are dropped and the
// token is evaluated (with new drafts).
func (s *Session) generateLoop(p GenerateParams, smp TokenSampler, onPiece PieceFunc, res *GenerateResult) (FinishReason, error) {
	g := &s.gen
	vocab := s.m.output.Rows
	cons := p.Constraint
	lps, _ := smp.(LogprobSource)
	pp, _ := smp.(interface{ Possible(tok int32) bool })
	rows, buf := g.logits, g.logits
	if p.Draft != nil {
		buf = g.rows
	}
	P, n, r := s.pos-1, 0, 0
	// k is the drafts asked for next: doubled (up to DraftTokens) after a
	// pass whose guesses were all kept, cut to one more than were kept
	// after a rejection, so wrong guesses cost little batched work.
	k := p.DraftTokens
	// keep is the positions verified so far; drafts past it go on return.
	keep := s.pos
	defer func() {
		if s.pos > keep {
			s.setPos(keep)
		}
	}()
	for {
		keep = P + r + 1
		if s.cancelled() {
			return FinishCancelled, fmt.Errorf("engine: generate: %w", ErrCancelled)
		}
		logits := rows[r*vocab : (r+1)*vocab]
		if cons != nil {
			if cons.Done() {
				s.setPos(keep)
				return s.finishText(FinishEOG, onPiece), nil
			}
			s.mask(cons, logits)
		}
		tok := smp.Sample(logits)
		if tok < 0 || int(tok) >= vocab {
			return FinishNone, fmt.Errorf("engine: generate: %w: sampler returned token %d", ErrInternal, tok)
		}
		if cons != nil && (math.IsInf(float64(logits[tok]), -1) || pp != nil && !pp.Possible(tok)) {
			// Accept says why, when the constraint knows (a grammar that
			// hit a limit masks every token).
			why := cons.Accept(tok)
			return FinishNone, fmt.Errorf("engine: generate: %w: the constraint (with the logit bias) allows no token here (%v)", ErrInvalidArgument, why)
		}
		if s.m.tok.IsEOG(tok) {
			s.setPos(keep)
			return s.finishText(FinishEOG, onPiece), nil
		}
		// cached: the token is the draft evaluated after row r.
		cached := r < n && tok == g.batch[r+1]
		if cached {
			res.DraftAccepted++
		} else if s.pos > keep {
			s.setPos(keep)
		}
		if p.DecodeLast && !cached && s.pos >= s.nCtx {
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
		case !p.DecodeLast && keep >= s.nCtx:
			end = FinishContext
		}
		if end != FinishNone && !p.DecodeLast {
			if end == FinishCancelled || end == FinishStop {
				return end, nil
			}
			return s.finishText(end, onPiece), nil
		}
		if cached {
			res.LastTokenCached = true
			r++
			if end == FinishNone {
				continue
			}
			keep = P + r + 1
			if end == FinishCancelled || end == FinishStop {
				return end, nil
			}
			return s.finishText(end, onPiece), nil
		}
		// Evaluate tok, with drafts after it while generation goes on.
		g.batch = append(g.batch[:0], tok)
		if n > 0 {
			if r == n {
				k = min(2*k, p.DraftTokens)
			} else {
				k = r + 1
			}
		}
		if p.Draft != nil && end == FinishNone {
			nd, err := s.draft(p, tok, k)
			if err != nil {
				return FinishNone, err
			}
			res.Drafted += nd
		}
		P, n, r = s.pos, len(g.batch)-1, 0
		var err error
		if p.Stepper != nil {
			err = s.genEval(p.Stepper, "generate: decode", g.batch, buf) // no drafts: refused above
		} else {
			err = s.eval("generate: decode", g.batch, buf, 0)
		}
		if err != nil {
			if errors.Is(err, ErrCancelled) {
				return FinishCancelled, err
			}
			return FinishNone, err
		}
		rows = buf
		keep = P + 1
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

// draft appends the drafter's guesses after tok to g.batch (at most k,
// as many as fit the context and the token budget) and returns how many.
func (s *Session) draft(p GenerateParams, tok int32, k int) (int, error) {
	g := &s.gen
	k = min(k, s.nCtx-s.pos-1)
	if p.MaxTokens > 0 {
		k = min(k, p.MaxTokens-len(g.tokens))
	}
	if k <= 0 {
		return 0, nil
	}
	g.hist = append(append(g.hist[:0], s.hist...), tok)
	dst := g.batch[1 : 1+k]
	nd, err := p.Draft.Draft(g.hist, dst)
	if err != nil {
		return 0, fmt.Errorf("engine: generate: draft: %w", err)
	}
	if nd < 0 || nd > k {
		return 0, fmt.Errorf("engine: generate: %w: the drafter returned %d tokens for %d places", ErrInternal, nd, k)
	}
	for _, t := range dst[:nd] {
		if t < 0 || int(t) >= s.m.output.Rows {
			return 0, fmt.Errorf("engine: generate: %w: the drafter proposed token %d outside the vocabulary", ErrInvalidArgument, t)
		}
	}
	g.batch = g.batch[:1+nd]
	return nd, nil
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
		err = fmt.Errorf("engine: %s: %w", what, err)
		if s.rec != nil && s.pos > start {
			// Earlier steps advanced the recurrent state: back to a
			// checkpoint and forward again to start.
			if terr := s.truncate(what, start); terr != nil {
				err = fmt.Errorf("%w; %w", err, terr)
			}
			return err
		}
		s.setPos(start)
		return err
	}
	return nil
}
