package main

import (
	"errors"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
)

// The adapter from package engine to the backend interfaces.

// errNoSampler stands in until the engine's sampler (engine/sample) lands.
var errNoSampler = errors.New("the sampler is not built into this library yet")

func init() {
	errorClasses = append(errorClasses,
		errorClass{engine.ErrInvalidArgument, stInvalid},
		errorClass{engine.ErrBadFile, stBadFile},
		errorClass{engine.ErrUnsupported, stUnsupported},
		errorClass{engine.ErrContextFull, stContextFull},
		errorClass{engine.ErrCancelled, stCancelled},
		errorClass{engine.ErrBusy, stBusy},
		errorClass{engine.ErrIO, stIO},
		errorClass{engine.ErrOutOfMemory, stOutOfMemory},
		errorClass{engine.ErrInternal, stInternal},
		errorClass{errNoSampler, stUnsupported},
	)
}

func openModel(path string, p modelParams) (backendModel, error) {
	m, err := engine.Open(path, engine.ModelParams{Threads: p.Threads})
	if err != nil {
		return nil, err
	}
	return engineModel{m}, nil
}

func newSampler(p samplerParams) (backendSampler, error) {
	return nil, errNoSampler
}

type engineModel struct{ m *engine.Model }

func (e engineModel) Close() error { return e.m.Close() }

func (e engineModel) Info() modelInfo {
	i := e.m.Info()
	return modelInfo{
		NVocab: i.VocabSize, NCtxTrain: i.ContextLength, NEmbd: i.EmbeddingSize,
		NLayer: i.Layers, NHead: i.Heads, NHeadKV: i.KVHeads,
		BOS: i.BOS, EOS: i.EOS, EOT: i.EOT,
		Architecture: i.Arch, ChatTemplate: i.ChatTemplate,
	}
}

func (e engineModel) IsEOG(tok int32) bool { return e.m.IsEOG(tok) }

func (e engineModel) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return e.m.Tokenize(text, addSpecial, parseSpecial)
}

func (e engineModel) Piece(tok int32) []byte { return e.m.TokenPiece(tok) }

func (e engineModel) Detokenize(ids []int32) string { return e.m.Detokenize(ids) }

func (e engineModel) ApplyChatTemplate(msgs []message, addAssistant bool) (string, error) {
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return e.m.ApplyChatTemplate(cm, addAssistant)
}

func (e engineModel) NewSession(p sessionParams) (backendSession, error) {
	s, err := e.m.NewSession(engine.SessionParams{NCtx: p.NCtx, Threads: p.Threads, KVF32: p.KVF32})
	if err != nil {
		return nil, err
	}
	return engineSession{s}, nil
}

type engineSession struct{ s *engine.Session }

// Prefill uses Decode for the one-token-with-logits step, the engine's
// allocation-free path.
func (e engineSession) Prefill(tokens []int32, logits []float32) error {
	if len(tokens) == 1 && logits != nil {
		return e.s.Decode(tokens[0], logits)
	}
	return e.s.Prefill(tokens, logits)
}

func (e engineSession) Rewind(nKeep int) error { return e.s.Rewind(nKeep) }
func (e engineSession) Pos() int               { return e.s.Pos() }
func (e engineSession) NCtx() int              { return e.s.NCtx() }
func (e engineSession) Cancel()                { e.s.Cancel() }
func (e engineSession) Close()                 { e.s.Close() }
