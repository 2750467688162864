package engine

import (
	"errors"
	"fmt"

	"github.com/moonlm/moonlm/engine/sample"
)

// Speculative decoding: a Drafter guesses the next few tokens, the model
// evaluates the pending token and the guesses in one batched pass (whose
// weights are read once for all of them), and Generate samples each
// position from those logits in order, keeping guesses while they equal
// what it samples. The first position where the sample differs gives the
// next token, and the rejected guesses are dropped from the KV cache.
//
// The drafts here are deterministic (a greedy draft model, n-gram lookup):
// the draft distribution q is a point mass on the guess d, so the standard
// acceptance rule (accept d with probability min(1, p(d)/q(d)) = p(d), on
// rejection draw from norm(max(0, p-q)), which is p without d) is the same
// as drawing x from the model's own p and accepting exactly when x == d,
// with x itself the replacement when it differs. Generate draws with the
// sampler it would use anyway, position by position, so the tokens follow
// the model's distribution and the sampler's state (random stream,
// penalties, grammar) advances as in plain decoding. The logits of a
// batched pass differ from a one-token decode's by float rounding (see
// PrefillReuse), so a greedy run equals plain decoding token for token
// except where the two best logits are closer than that rounding.

// Drafter proposes tokens for speculative decoding.
type Drafter interface {
	// Draft writes up to len(dst) tokens it expects to follow hist (every
	// token of the sequence so far: the session's tokens and the one
	// about to be evaluated) into dst and returns how many. It must not
	// keep hist or dst.
	Draft(hist, dst []int32) (int, error)
}

// MaxDraftTokens bounds the tokens verified per batched pass.
const MaxDraftTokens = 64

// PromptLookup drafts by n-gram lookup in the sequence itself: it finds
// the latest earlier occurrence of the sequence's last n tokens (the
// longest n from MaxN down to MinN that occurs) and proposes the tokens
// that followed it. It costs no model evaluation and suits output that
// copies its prompt (editing code, quoting, summaries).
type PromptLookup struct {
	MinN, MaxN int // n-gram lengths tried; 0 means 2 and 4
}

// DefaultPromptLookup returns the lookup with the default n-gram lengths.
func DefaultPromptLookup() *PromptLookup { return &PromptLookup{} }

func (p *PromptLookup) bounds() (lo, hi int) {
	lo, hi = p.MinN, p.MaxN
	if lo <= 0 {
		lo = 2
	}
	if hi <= 0 {
		hi = max(4, lo)
	}
	return lo, max(hi, lo)
}

// Draft implements Drafter; it allocates nothing.
func (p *PromptLookup) Draft(hist, dst []int32) (int, error) {
	lo, hi := p.bounds()
	for n := min(hi, len(hist)-1); n >= lo; n-- {
		key := hist[len(hist)-n:]
		// The latest earlier start j with hist[j:j+n] == key (j+n < len
		// so at least one token follows it).
		for j := len(hist) - n - 1; j >= 0; j-- {
			if !equalTokens(hist[j:j+n], key) {
				continue
			}
			return copy(dst, hist[j+n:]), nil
		}
	}
	return 0, nil
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ModelDrafter drafts greedily with a smaller model of the same
// vocabulary, in a session of its own that follows the sequence (it keeps
// what it evaluated and re-evaluates from the first token that differs).
type ModelDrafter struct {
	s      *Session
	logits []float32
	one    [1]int32
}

// NewModelDrafter makes a drafter that runs draft (a session of the draft
// model, which the drafter uses exclusively; the caller closes it) for
// target. The vocabularies must be the same: the same number of tokens
// with the same texts and the same special tokens; otherwise the error is
// ErrInvalidArgument naming the first difference.
func NewModelDrafter(target *Model, draft *Session) (*ModelDrafter, error) {
	if target == nil || draft == nil {
		return nil, fmt.Errorf("engine: draft model: %w: needs a target model and a draft session", ErrInvalidArgument)
	}
	if err := SameVocabulary(target, draft.m); err != nil {
		return nil, fmt.Errorf("engine: draft model: %w", err)
	}
	return &ModelDrafter{s: draft, logits: make([]float32, draft.m.output.Rows)}, nil
}

// SameVocabulary reports, as an ErrInvalidArgument error, how the
// vocabularies of a and b differ, or nil if they are the same (so token
// ids mean the same text in both).
func SameVocabulary(a, b *Model) error {
	ta, tb := a.tok, b.tok
	if a.encoder || b.encoder {
		return fmt.Errorf("%w: an embedding model cannot draft or be drafted for", ErrInvalidArgument)
	}
	if na, nb := ta.VocabSize(), tb.VocabSize(); na != nb {
		return fmt.Errorf("%w: the vocabularies differ: %d tokens and %d", ErrInvalidArgument, na, nb)
	}
	if a.output.Rows != b.output.Rows {
		return fmt.Errorf("%w: the models score %d and %d tokens", ErrInvalidArgument, a.output.Rows, b.output.Rows)
	}
	if ta.BOS() != tb.BOS() || ta.EOS() != tb.EOS() {
		return fmt.Errorf("%w: the special tokens differ (BOS %d and %d, EOS %d and %d)", ErrInvalidArgument, ta.BOS(), tb.BOS(), ta.EOS(), tb.EOS())
	}
	for id := int32(0); int(id) < ta.VocabSize(); id++ {
		if pa, pb := ta.PieceSpecial(id), tb.PieceSpecial(id); string(pa) != string(pb) {
			return fmt.Errorf("%w: the vocabularies differ at token %d (%q and %q)", ErrInvalidArgument, id, pa, pb)
		}
	}
	return nil
}

// Draft implements Drafter. A draft session whose context is full drafts
// nothing (the target decodes on without guesses).
func (d *ModelDrafter) Draft(hist, dst []int32) (int, error) {
	if len(dst) == 0 || len(hist) == 0 {
		return 0, nil
	}
	s := d.s
	if err := s.enter("draft"); err != nil {
		return 0, err
	}
	defer s.leave()
	keep := commonPrefix(s.hist, hist)
	if keep == len(hist) {
		keep-- // the last token's logits are needed: evaluate it again
	}
	n := min(len(dst), s.nCtx-len(hist))
	if n <= 0 {
		return 0, nil
	}
	s.setPos(keep)
	if err := s.eval("draft", hist[keep:], d.logits, len(hist)-keep-1); err != nil {
		return 0, d.quiet(err)
	}
	for i := range n {
		dst[i] = sample.Argmax(d.logits[:s.m.output.Rows])
		if i == n-1 {
			break
		}
		d.one[0] = dst[i]
		if err := s.eval("draft", d.one[:], d.logits, 0); err != nil {
			if err = d.quiet(err); err != nil {
				return 0, err
			}
			return i + 1, nil
		}
	}
	return n, nil
}

// quiet turns a full draft context into no drafts.
func (d *ModelDrafter) quiet(err error) error {
	if errors.Is(err, ErrContextFull) {
		return nil
	}
	return err
}
