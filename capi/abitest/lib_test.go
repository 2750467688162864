package abitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/moonlm/moonlm/internal/libbuild"
	"github.com/stretchr/testify/require"
)

// Status codes of include/moonlm.h.
const (
	OK             int32 = 0
	InvalidArg     int32 = 1
	IOErr          int32 = 2
	BadFile        int32 = 3
	Unsupported    int32 = 4
	BufferTooSmall int32 = 5
	ContextFull    int32 = 6
	Cancelled      int32 = 7
	Busy           int32 = 8
	OutOfMemory    int32 = 9
	Internal       int32 = 10
	Forked         int32 = 11
)

// Go mirrors of the header's structs (TestStructLayout checks them against
// the C compiler's view).
type ModelParams struct {
	Size             uintptr
	NThreads         int32
	Flags            uint32
	Pack             int32
	PackedCache      int32
	PackedCacheDir   *byte
	PackedCacheBytes uint64
	Numerics         int32
	Progress         uintptr // moonlm_progress_callback
	ProgressUserData uintptr
}

// modelParamsV1Size is sizeof(moonlm_model_params) before the packing
// members: callers built against that header pass it.
const modelParamsV1Size = unsafe.Offsetof(ModelParams{}.Pack)

// modelParamsV2Size is sizeof(moonlm_model_params) with the packing
// members but before numerics.
const modelParamsV2Size = unsafe.Offsetof(ModelParams{}.Numerics)

// modelParamsV3Size is sizeof(moonlm_model_params) with numerics but
// before the progress callback.
const modelParamsV3Size = unsafe.Offsetof(ModelParams{}.Progress)

type ModelInfo struct {
	Size                                  uintptr
	NVocab, NCtxTrain, NEmbd, NLayer      int32
	NHead, NHeadKV, BOS, EOS, EOT, Reserv int32
}

type OpenStats struct {
	Size                              uintptr
	PackSource, PackedMatrices        int32
	PackedBytes                       int64
	MapMs, ParseMs, TensorsMs, PackMs float64
}

// moonlm_pack_source values.
const (
	PackSourceOff int32 = iota
	PackSourceNone
	PackSourcePacked
	PackSourceCacheWrite
	PackSourceCacheHit
)

type SessionParams struct {
	Size                   uintptr
	NCtx, NThreads, KVType int32
	Flags                  uint32
	CheckpointEvery        int32
	Reserved               uint32
	CheckpointBytes        int64
}

type SamplerParams struct {
	Size             uintptr
	Temperature      float32
	TopK             int32
	TopP             float32
	MinP             float32
	RepeatPenalty    float32
	PresencePenalty  float32
	FrequencyPenalty float32
	PenaltyLastN     int32
	Seed             uint64

	TypicalP             float32
	XTCProbability       float32
	XTCThreshold         float32
	Mirostat             int32
	MirostatTau          float32
	MirostatEta          float32
	MirostatM            int32
	DRYMultiplier        float32
	DRYBase              float32
	DRYAllowedLength     int32
	DRYPenaltyLastN      int32
	DRYSequenceBreakers  unsafe.Pointer // const char *const *
	NDRYSequenceBreakers uintptr
	LogitBias            *LogitBias
	NLogitBias           uintptr
}

// LogitBias mirrors moonlm_logit_bias.
type LogitBias struct {
	Token int32
	Bias  float32
}

// samplerParamsV1Size is sizeof(moonlm_sampler_params) before typical_p:
// callers built against that header pass it.
const samplerParamsV1Size = unsafe.Offsetof(SamplerParams{}.TypicalP)

// GenerateParams mirrors moonlm_generate_params.
type GenerateParams struct {
	Size      uintptr
	MaxTokens int32
	Flags     uint32
	Stop      unsafe.Pointer // const char *const *
	StopLen   *uintptr
	NStop     uintptr
	Callback  uintptr
	UserData  uintptr

	Logprobs    *TokenLogprob
	LogprobsCap uintptr
	TopLogprobs int32
	Grammar     uintptr // moonlm_grammar *

	Draft        int32
	DraftTokens  int32
	DraftSession uintptr // moonlm_session *
}

// generateParamsV1Size is sizeof(moonlm_generate_params) before the
// log-probability members.
const generateParamsV1Size = unsafe.Offsetof(GenerateParams{}.Logprobs)

// GenerateResult mirrors moonlm_generate_result.
type GenerateResult struct {
	Size         uintptr
	FinishReason int32
	LastToken    int32
	NPrompt      uintptr
	NGenerated   uintptr
	NEvaluated   uintptr

	NDrafted       uintptr
	NDraftAccepted uintptr
}

// moonlm_finish_reason values.
const (
	FinishNone int32 = iota
	FinishStop
	FinishLength
	FinishEOG
	FinishContext
	FinishCancelled
)

type Message struct {
	Role, Content *byte
}

// Lib holds the library's functions. Handles are uintptr: opaque values the
// test never dereferences.
type Lib struct {
	Path string

	Version      func() string
	ABIVersion   func() int32
	StatusString func(st int32) string
	LastError    func() string

	ModelParamsDefault func(p *ModelParams)
	ModelOpen          func(path string, p *ModelParams, out *uintptr) int32
	ModelOpenRaw       func(path unsafe.Pointer, p unsafe.Pointer, out unsafe.Pointer) int32
	ModelFree          func(m uintptr) int32
	ModelGetInfo       func(m uintptr, info *ModelInfo) int32
	ModelOpenStats     func(m uintptr, stats *OpenStats) int32
	ModelArchitecture  func(m uintptr, buf *byte, cap uintptr, nOut *uintptr) int32
	ModelChatTemplate  func(m uintptr, buf *byte, cap uintptr, nOut *uintptr) int32
	ModelIsEOG         func(m uintptr, tok int32) int32

	Tokenize   func(m uintptr, text *byte, n uintptr, flags uint32, out *int32, cap uintptr, nOut *uintptr) int32
	TokenPiece func(m uintptr, tok int32, buf *byte, cap uintptr, nOut *uintptr) int32
	Detokenize func(m uintptr, toks *int32, n uintptr, buf *byte, cap uintptr, nOut *uintptr) int32
	ChatApply  func(m uintptr, msgs *Message, n uintptr, addAssistant int32, buf *byte, cap uintptr, nOut *uintptr) int32
	// ChatApplyNamed takes name as a C string (nil is NULL).
	ChatApplyNamed func(m uintptr, name *byte, msgs *Message, n uintptr, addAssistant int32, buf *byte, cap uintptr, nOut *uintptr) int32
	ChatBuiltins   func(buf *byte, cap uintptr, nOut *uintptr) int32
	SessionNew     func(m uintptr, p *SessionParams, out *uintptr) int32
	SessionFree    func(s uintptr) int32
	Prefill        func(s uintptr, toks *int32, n uintptr, logits *float32, cap uintptr) int32
	Decode         func(s uintptr, tok int32, logits *float32, cap uintptr) int32
	Rewind         func(s uintptr, nKeep uintptr) int32
	Position       func(s uintptr, pos *uintptr) int32
	Cancel         func(s uintptr) int32
	SessionErr     func(s uintptr, buf *byte, cap uintptr, nOut *uintptr) int32

	SessionParamsDefault func(p *SessionParams)
	SamplerParamsDefault func(p *SamplerParams)
	SamplerNew           func(p *SamplerParams, out *uintptr) int32
	SamplerFree          func(s uintptr) int32
	SamplerAccept        func(s uintptr, tok int32) int32
	SamplerReset         func(s uintptr) int32
	Sample               func(s uintptr, logits *float32, n uintptr, tok *int32) int32
	Generate             func(s, smp uintptr, prompt *int32, n, max uintptr, cb uintptr, ud uintptr, nGen *uintptr) int32
	GenerateParamsInit   func(p *GenerateParams, size uintptr)
	GenerateEx           func(s, smp uintptr, prompt *int32, n uintptr, p *GenerateParams, r *GenerateResult) int32
	FinishReasonString   func(r int32) string
}

var (
	libOnce sync.Once
	theLib  *Lib
	libErr  string
)

// lib returns the loaded library, skipping the test if there is none.
func lib(t testing.TB) *Lib {
	t.Helper()
	libOnce.Do(func() {
		path, why := libraryPath()
		if path == "" {
			libErr = why
			return
		}
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			libErr = fmt.Sprintf("dlopen %s: %v", path, err)
			return
		}
		l := &Lib{Path: path}
		reg := func(fptr any, name string) { purego.RegisterLibFunc(fptr, h, name) }
		reg(&l.Version, "moonlm_version")
		reg(&l.ABIVersion, "moonlm_abi_version")
		reg(&l.StatusString, "moonlm_status_string")
		reg(&l.LastError, "moonlm_last_error")
		reg(&l.ModelParamsDefault, "moonlm_model_params_default")
		reg(&l.ModelOpen, "moonlm_model_open")
		reg(&l.ModelOpenRaw, "moonlm_model_open")
		reg(&l.ModelFree, "moonlm_model_free")
		reg(&l.ModelGetInfo, "moonlm_model_get_info")
		reg(&l.ModelOpenStats, "moonlm_model_open_stats")
		reg(&l.ModelArchitecture, "moonlm_model_architecture")
		reg(&l.ModelChatTemplate, "moonlm_model_chat_template")
		reg(&l.ModelIsEOG, "moonlm_model_is_eog")
		reg(&l.Tokenize, "moonlm_tokenize")
		reg(&l.TokenPiece, "moonlm_token_to_piece")
		reg(&l.Detokenize, "moonlm_detokenize")
		reg(&l.ChatApply, "moonlm_chat_apply_template")
		reg(&l.ChatApplyNamed, "moonlm_chat_apply_template_named")
		reg(&l.ChatBuiltins, "moonlm_chat_builtin_templates")
		reg(&l.SessionParamsDefault, "moonlm_session_params_default")
		reg(&l.SessionNew, "moonlm_session_new")
		reg(&l.SessionFree, "moonlm_session_free")
		reg(&l.Prefill, "moonlm_prefill")
		reg(&l.Decode, "moonlm_decode")
		reg(&l.Rewind, "moonlm_session_rewind")
		reg(&l.Position, "moonlm_session_position")
		reg(&l.Cancel, "moonlm_session_cancel")
		reg(&l.SessionErr, "moonlm_session_last_error")
		reg(&l.SamplerParamsDefault, "moonlm_sampler_params_default")
		reg(&l.SamplerNew, "moonlm_sampler_new")
		reg(&l.SamplerFree, "moonlm_sampler_free")
		reg(&l.SamplerAccept, "moonlm_sampler_accept")
		reg(&l.SamplerReset, "moonlm_sampler_reset")
		reg(&l.Sample, "moonlm_sample")
		reg(&l.Generate, "moonlm_generate")
		reg(&l.GenerateParamsInit, "moonlm_generate_params_init")
		reg(&l.GenerateEx, "moonlm_generate_ex")
		reg(&l.FinishReasonString, "moonlm_finish_reason_string")
		theLib = l
	})
	if theLib == nil {
		t.Skip("libmoonlm.so unavailable: " + libErr)
	}
	return theLib
}

var (
	buildOnce sync.Once
	builtPath string
	buildWhy  string
	buildDir  string
)

// libraryPath returns $MOONLM_LIBRARY or a freshly built library.
func libraryPath() (path, why string) {
	if p := os.Getenv("MOONLM_LIBRARY"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p, ""
		}
	}
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildWhy = err.Error()
			return
		}
		goBin := filepath.Join(goroot(), "bin", "go")
		if _, err := os.Stat(goBin); err != nil {
			goBin = "go"
		}
		dir, err := os.MkdirTemp("", "moonlm-abitest-")
		if err != nil {
			buildWhy = err.Error()
			return
		}
		buildDir = dir
		out := filepath.Join(dir, "libmoonlm.so")
		flags, err := libbuild.Args(root)
		if err != nil {
			buildWhy = err.Error()
			return
		}
		args := append(append([]string{"build", "-buildmode=c-shared"}, flags...),
			"-ldflags=-extldflags=-Wl,-soname,libmoonlm.so.0,--version-script="+filepath.Join(root, "capi", "moonlm.map"),
			"-o", out, "./capi")
		cmd := exec.Command(goBin, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOEXPERIMENT=cgocheck2")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildWhy = fmt.Sprintf("MOONLM_LIBRARY unset and building the library failed: %v\n%s", err, b)
			return
		}
		builtPath = out
	})
	return builtPath, buildWhy
}

// repoRoot finds the module root above the test's directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/moonlm/moonlm") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root (go.mod of github.com/moonlm/moonlm) not found above the test directory")
		}
		dir = parent
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(runChild(name))
	}
	// Models opened with default params must not fill the user's
	// packed-weight cache: point it at a temporary folder (inherited by the
	// library, loaded later, and by child processes).
	cacheDir := ""
	if os.Getenv("MOONLM_PACKED_CACHE_DIR") == "" {
		d, err := os.MkdirTemp("", "moonlm-abitest-cache-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "abitest:", err)
			os.Exit(2)
		}
		cacheDir = d
		os.Setenv("MOONLM_PACKED_CACHE_DIR", d)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	os.Exit(code)
}

// requireStatus checks a status and, on mismatch, shows the last error.
func requireStatus(t testing.TB, l *Lib, want, got int32, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: status %d (%s), want %d (%s); last error: %q", what, got, l.StatusString(got), want, l.StatusString(want), l.LastError())
	}
}

// cstr returns a NUL-terminated copy of s and its pointer.
func cstr(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// goString reads a NUL-terminated string of at most n bytes from buf.
func goString(buf []byte, n uintptr) string {
	return string(buf[:n])
}

// foreignHandles are values that were never handles of this library.
var foreignHandles = []uintptr{1, 0xdeadbeef, ^uintptr(0), 0x10000}

func mustRequire(t testing.TB, cond bool, msg string, args ...any) {
	t.Helper()
	require.Truef(t, cond, msg, args...)
}

// goroot is the Go installation running the tests.
func goroot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" {
			return d
		}
	}
	return runtime.GOROOT()
}
