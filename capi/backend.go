package main

// The capi layer talks to the engine through these small interfaces so that
// handle management, argument checking and error reporting are independent
// of engine internals; engine_glue.go adapts package engine to them.

// modelInfo holds the facts moonlm_model_get_info reports; -1 means unknown.
type modelInfo struct {
	NVocab, NCtxTrain, NEmbd, NLayer, NHead, NHeadKV int
	BOS, EOS, EOT                                    int32
	Architecture                                     string
	ChatTemplate                                     string
}

// openStats is what moonlm_model_open_stats reports; times in milliseconds.
type openStats struct {
	PackSource                        packSource
	PackedMatrices                    int
	PackedBytes                       int64
	MapMs, ParseMs, TensorsMs, PackMs float64
}

// packSource is numbered as moonlm_pack_source.
type packSource int

const (
	packSourceOff packSource = iota
	packSourceNone
	packSourcePacked
	packSourceCacheWrite
	packSourceCacheHit
)

type message struct {
	Role, Content string
}

// modelParams is moonlm_model_params after validation. The toggles are
// tri-state: toggleDefault leaves the choice to the environment variables
// (read by internal/settings at open), else on.
type modelParams struct {
	Threads     int
	Pack        toggle
	PackedCache toggle
	CacheDir    string // "" = the environment's folder, else the default one
	CacheBytes  int64  // 0 = the environment's budget, else the default one
	Numerics    numerics
	// Progress receives the open's progress; false cancels it (nil: none).
	Progress func(fraction float32) bool
}

// numerics is numbered as moonlm_numerics; numericsDefault leaves the
// choice to the environment (MOONLM_NUMERICS, else the fast kernels).
type numerics int

const (
	numericsDefault numerics = iota
	numericsLlamaCpp
	numericsLlamaCppNoRepack
	numericsIk
)

// toggle is the C ABI's tri-state setting, numbered as moonlm_pack_mode and
// moonlm_packed_cache_mode.
type toggle int

const (
	toggleDefault toggle = 0
	toggleOn      toggle = 1
	toggleOff     toggle = 2
)

type sessionParams struct {
	NCtx    int // 0: the model's training context
	Threads int // 0: the model's default
	KVF32   bool
	KVQ8    bool // a Q8_0 cache
	// A hybrid model's checkpoints (moonlm_session_params, engine's
	// SessionParams): 0 the defaults, negative none.
	CheckpointEvery int
	CheckpointBytes int64
}

type samplerParams struct {
	Temperature      float32
	TopK             int
	TopP             float32
	MinP             float32
	RepeatPenalty    float32
	PresencePenalty  float32
	FrequencyPenalty float32
	PenaltyLastN     int
	Seed             uint64

	TypicalP                     float32
	XTCProbability, XTCThreshold float32
	Mirostat                     int
	MirostatTau, MirostatEta     float32
	MirostatM                    int
	DRYMultiplier, DRYBase       float32
	DRYAllowedLength             int
	DRYPenaltyLastN              int
	DRYBreakers                  []string
	LogitBias                    map[int32]float32
}

// generateParams is a generation's options after validation.
type generateParams struct {
	MaxTokens  int // 0: no limit
	Stop       []string
	DecodeLast bool
	// OnLogprobs, if not nil, gets each generated token's log-probability
	// and TopLogprobs alternatives (top valid during the call only).
	OnLogprobs  func(tok int32, logprob float32, top []tokenLogprob)
	TopLogprobs int
	// Grammar, if not nil, constrains the tokens; Generate starts it from
	// its beginning.
	Grammar backendGrammar
	// Draft is a draft* mode for speculative decoding, DraftTokens the
	// most tokens per pass (0: the default), DraftSession the draft
	// model's session for draftModel (locked by the caller).
	Draft        int
	DraftTokens  int
	DraftSession backendSession
	// KeepSpecial renders control tokens as their text.
	KeepSpecial bool
}

// tokenLogprob is moonlm_top_logprob.
type tokenLogprob struct {
	Token   int32
	Logprob float32
}

// finishReason is numbered as moonlm_finish_reason.
type finishReason int

const (
	finishNone finishReason = iota
	finishStop
	finishLength
	finishEOG
	finishContext
	finishCancelled
)

// generateResult is what moonlm_generate_result reports.
type generateResult struct {
	Finish                           finishReason
	PromptTokens, Generated, Evalled int
	LastToken                        int32
	Drafted, DraftAccepted           int
}

type backendModel interface {
	Close() error
	Info() modelInfo
	// OpenStats reports how the model was opened (an error if the engine
	// says something the C ABI cannot express).
	OpenStats() (openStats, error)
	IsEOG(tok int32) bool
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// Piece returns the bytes of one token as they appear inside a text;
	// the result must not be modified.
	Piece(tok int32) []byte
	Detokenize(ids []int32) string
	// ApplyChatTemplate renders msgs in the built-in format name, or with
	// the model's own template when name is "".
	ApplyChatTemplate(name string, msgs []message, addAssistant bool) (string, error)
	NewSession(p sessionParams) (backendSession, error)
}

type backendSession interface {
	// Prefill evaluates tokens; logits (nil or n_vocab long) receives the
	// last position's logits.
	Prefill(tokens []int32, logits []float32) error
	// Generate runs the engine's generation loop with smp, calling
	// onPiece (text valid during the call only) per token; the result is
	// filled also on error.
	Generate(prompt []int32, smp backendSampler, p generateParams, onPiece func(text []byte, tok int32) bool) (generateResult, error)
	Rewind(nKeep int) error
	Pos() int
	NCtx() int
	Cancel()
	Close()
}

// backendGrammar is a grammar bound to a model's vocabulary, with the
// state of the generation that follows it.
type backendGrammar interface {
	Reset()
}

type backendSampler interface {
	Sample(logits []float32) int32
	Accept(tok int32)
	Reset()
	// SetModel gives the sampler a model's vocabulary (DRY's breakers);
	// NeedsModel reports whether moonlm_sample needs that first.
	SetModel(m backendModel) error
	NeedsModel() bool
}
