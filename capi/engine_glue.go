package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/engine/sample"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/settings"
)

// The adapter from package engine to the backend interfaces.

// maxThreads bounds n_threads (model and session parameters).
const maxThreads = engine.MaxThreads

// maxPenaltyLastN bounds moonlm_sampler_params.penalty_last_n.
const maxPenaltyLastN = sample.MaxPenaltyLastN

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
		errorClass{sample.ErrInvalidParams, stInvalid},
	)
}

func openModel(path string, p modelParams) (backendModel, error) {
	// The environment is read at every open, so a caller may change it
	// between opens; a malformed MOONLM_* value fails the open.
	ep := engine.ModelParams{
		Threads: p.Threads,
		Pack:    [...]engine.PackMode{toggleDefault: engine.PackDefault, toggleOn: engine.PackOn, toggleOff: engine.PackOff}[p.Pack],
		PackedCache: engine.PackedCacheParams{
			Mode:     [...]engine.CacheMode{toggleDefault: engine.CacheDefault, toggleOn: engine.CacheOn, toggleOff: engine.CacheOff}[p.PackedCache],
			Dir:      p.CacheDir,
			MaxBytes: p.CacheBytes,
		},
		Numerics: [...]engine.Numerics{
			numericsDefault:          engine.NumericsFast,
			numericsLlamaCpp:         engine.NumericsLlamaCpp,
			numericsLlamaCppNoRepack: engine.NumericsLlamaCppNoRepack,
			numericsIk:               engine.NumericsIk,
		}[p.Numerics],
		Progress: p.Progress,
	}
	if err := settings.Read().Apply(&ep); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	m, err := engine.Open(path, ep)
	if err != nil {
		return nil, err
	}
	return engineModel{m}, nil
}

// seedRandom is MOONLM_SEED_RANDOM.
const seedRandom = ^uint64(0)

// newSampler maps the C conventions (documented in moonlm.h) onto
// sample.Params: non-positive temperature, top_k and min_p and a top_p of
// 1 or more switch those stages off.
func newSampler(p samplerParams) (backendSampler, error) {
	sp := sample.Params{
		Temperature:      max(p.Temperature, 0),
		TopK:             max(p.TopK, 0),
		TopP:             p.TopP,
		MinP:             max(p.MinP, 0),
		RepeatPenalty:    p.RepeatPenalty,
		PresencePenalty:  p.PresencePenalty,
		FrequencyPenalty: p.FrequencyPenalty,
		PenaltyLastN:     p.PenaltyLastN,
		Seed:             p.Seed,
	}
	if sp.TopP >= 1 {
		sp.TopP = 1
	}
	extendSamplerParams(&sp, p)
	if p.Seed == seedRandom {
		// math/rand/v2's global generator is seeded from the OS's entropy
		// at start; crypto/rand would link Go's FIPS crypto module (about
		// 150 KB) into the library for eight bytes.
		sp.Seed = rand.Uint64()
	}
	s, err := sample.New(sp)
	if err != nil {
		return nil, err
	}
	return engineSampler{s}, nil
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

// packSources numbers the engine's pack sources as moonlm_pack_source.
var packSources = map[string]packSource{
	engine.PackSourceOff:        packSourceOff,
	engine.PackSourceNone:       packSourceNone,
	engine.PackSourcePacked:     packSourcePacked,
	engine.PackSourceCacheWrite: packSourceCacheWrite,
	engine.PackSourceCacheHit:   packSourceCacheHit,
}

func (e engineModel) OpenStats() (openStats, error) {
	s := e.m.OpenStats()
	src, ok := packSources[s.PackSource]
	if !ok {
		return openStats{}, fmt.Errorf("%w: the engine reports pack source %q, which moonlm_pack_source lacks", engine.ErrInternal, s.PackSource)
	}
	return openStats{
		PackSource: src, PackedMatrices: s.PackedMatrices, PackedBytes: s.PackedBytes,
		MapMs: s.MapMs, ParseMs: s.ParseMs, TensorsMs: s.TensorsMs, PackMs: s.PackMs,
	}, nil
}

func (e engineModel) IsEOG(tok int32) bool { return e.m.IsEOG(tok) }

func (e engineModel) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return e.m.Tokenize(text, addSpecial, parseSpecial)
}

func (e engineModel) Piece(tok int32) []byte { return e.m.TokenPiece(tok) }

func (e engineModel) Detokenize(ids []int32) string { return e.m.Detokenize(ids) }

func (e engineModel) ApplyChatTemplate(name string, msgs []message, addAssistant bool) (string, error) {
	cm := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		cm[i] = chat.Message{Role: m.Role, Content: m.Content}
	}
	return e.m.ApplyChatTemplateNamed(name, cm, addAssistant)
}

// builtinChatTemplates lists the names ApplyChatTemplate accepts, sorted.
func builtinChatTemplates() []string { return chat.Families() }

func (e engineModel) NewSession(p sessionParams) (backendSession, error) {
	ep := engine.SessionParams{NCtx: p.NCtx, Threads: p.Threads, KVF32: p.KVF32,
		CheckpointEvery: p.CheckpointEvery, CheckpointBytes: p.CheckpointBytes}
	if p.KVQ8 {
		ep.KVType = gguf.Q8_0
	}
	s, err := e.m.NewSession(ep)
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

// finishReasons numbers the engine's finish reasons as moonlm_finish_reason.
var finishReasons = [...]finishReason{
	engine.FinishNone:      finishNone,
	engine.FinishStop:      finishStop,
	engine.FinishLength:    finishLength,
	engine.FinishEOG:       finishEOG,
	engine.FinishContext:   finishContext,
	engine.FinishCancelled: finishCancelled,
}

func (e engineSession) Generate(prompt []int32, smp backendSampler, p generateParams, onPiece func([]byte, int32) bool) (generateResult, error) {
	gp := engine.GenerateParams{
		MaxTokens: p.MaxTokens, TokenSampler: smp, Stop: p.Stop, DecodeLast: p.DecodeLast, KeepSpecial: p.KeepSpecial,
	}
	if es, ok := smp.(engineSampler); ok {
		gp.TokenSampler = es.Sampler // the engine binds the vocabulary and reads logprobs through it
	}
	extendGenerateParams(&gp, p)
	if err := setDrafter(&gp, e.s, p); err != nil {
		return generateResult{LastToken: -1}, err
	}
	res, err := e.s.Generate(prompt, gp, onPiece)
	out := generateResult{PromptTokens: res.PromptTokens, Generated: res.Tokens, Evalled: res.Tokens, LastToken: res.LastToken,
		Drafted: res.Drafted, DraftAccepted: res.DraftAccepted}
	if res.Tokens > 0 && !res.LastTokenCached {
		out.Evalled--
	}
	if int(res.Finish) < len(finishReasons) {
		out.Finish = finishReasons[res.Finish]
	} else if err == nil {
		err = fmt.Errorf("%w: the engine reports finish reason %v, which moonlm_finish_reason lacks", engine.ErrInternal, res.Finish)
	}
	return out, err
}

func (e engineSession) Rewind(nKeep int) error { return e.s.Rewind(nKeep) }
func (e engineSession) Pos() int               { return e.s.Pos() }
func (e engineSession) NCtx() int              { return e.s.NCtx() }
func (e engineSession) Cancel()                { e.s.Cancel() }
func (e engineSession) Close()                 { e.s.Close() }
