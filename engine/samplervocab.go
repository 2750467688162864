package engine

import (
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/engine/tokenizer"
)

// SamplerVocab is the vocabulary as the samplers see it (DRY's sequence
// breakers): token texts with special tokens rendered, and tokenization
// without special tokens. Values for one model compare equal, so a sampler
// resolves its breakers once per model, and they carry the model's cache of
// resolved breaker lists, so a new sampler with the same breakers (every
// generate call and server request makes one) reuses the resolution.
func (m *Model) SamplerVocab() sample.Vocab { return samplerVocab{m.tok, m.dryBreakers} }

// dryBreakerLists bounds how many breaker lists a model keeps resolved.
const dryBreakerLists = 16

type samplerVocab struct {
	t     *tokenizer.Tokenizer
	cache *sample.BreakerCache
}

func (v samplerVocab) DRYBreakerCache() *sample.BreakerCache { return v.cache }

func (v samplerVocab) NumTokens() int                     { return v.t.VocabSize() }
func (v samplerVocab) TokenText(id int32) []byte          { return v.t.PieceSpecial(id) }
func (v samplerVocab) Tokenize(s string) ([]int32, error) { return v.t.Encode(s, false, false) }
