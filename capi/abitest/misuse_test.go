package abitest

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func headerText(t testing.TB) string {
	root, err := repoRoot()
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(root, "include", "moonlm.h"))
	require.NoError(t, err)
	return string(b)
}

func TestVersion(t *testing.T) {
	l := lib(t)
	h := headerText(t)
	ver := regexp.MustCompile(`#define MOONLM_VERSION_STRING "([^"]+)"`).FindStringSubmatch(h)
	abi := regexp.MustCompile(`#define MOONLM_ABI_VERSION (\d+)`).FindStringSubmatch(h)
	require.NotNil(t, ver)
	require.NotNil(t, abi)
	assert.Equal(t, ver[1], l.Version())
	assert.Equal(t, abi[1], strconv.Itoa(int(l.ABIVersion())))
}

func TestStatusStrings(t *testing.T) {
	l := lib(t)
	seen := map[string]int32{}
	for st := OK; st <= Forked; st++ {
		s := l.StatusString(st)
		assert.NotEqual(t, "unknown status", s, "status %d", st)
		if prev, dup := seen[s]; dup {
			t.Errorf("statuses %d and %d share the string %q", prev, st, s)
		}
		seen[s] = st
	}
	assert.Equal(t, "unknown status", l.StatusString(Forked+1))
	assert.Equal(t, "unknown status", l.StatusString(-1))
}

// Every handle-taking function rejects NULL (where NULL is not a no-op),
// values never issued, and does not crash.
func TestBadHandles(t *testing.T) {
	l := lib(t)
	buf := make([]byte, 64)
	var n uintptr
	toks := []int32{1, 2}
	logits := make([]float32, 16)
	var tok int32
	var info ModelInfo
	info.Size = unsafe.Sizeof(info)
	msgs := []Message{{cstr("user"), cstr("hi")}}
	handles := append([]uintptr{0}, foreignHandles...)
	for _, h := range handles {
		calls := map[string]func() int32{
			"model_get_info":     func() int32 { return l.ModelGetInfo(h, &info) },
			"model_architecture": func() int32 { return l.ModelArchitecture(h, &buf[0], 64, &n) },
			"model_chat_template": func() int32 {
				return l.ModelChatTemplate(h, &buf[0], 64, &n)
			},
			"tokenize":       func() int32 { return l.Tokenize(h, cstr("hi"), 2, 0, &toks[0], 2, &n) },
			"token_to_piece": func() int32 { return l.TokenPiece(h, 1, &buf[0], 64, &n) },
			"detokenize":     func() int32 { return l.Detokenize(h, &toks[0], 2, &buf[0], 64, &n) },
			"chat":           func() int32 { return l.ChatApply(h, &msgs[0], 1, 1, &buf[0], 64, &n) },
			"chat_named":     func() int32 { return l.ChatApplyNamed(h, cstr("chatml"), &msgs[0], 1, 1, &buf[0], 64, &n) },
			"session_new":    func() int32 { var s uintptr; return l.SessionNew(h, nil, &s) },
			"prefill":        func() int32 { return l.Prefill(h, &toks[0], 2, &logits[0], 16) },
			"decode":         func() int32 { return l.Decode(h, 1, nil, 0) },
			"rewind":         func() int32 { return l.Rewind(h, 0) },
			"position":       func() int32 { return l.Position(h, &n) },
			"cancel":         func() int32 { return l.Cancel(h) },
			"sampler_accept": func() int32 { return l.SamplerAccept(h, 1) },
			"sampler_reset":  func() int32 { return l.SamplerReset(h) },
			"sample":         func() int32 { return l.Sample(h, &logits[0], 16, &tok) },
			"generate":       func() int32 { return l.Generate(h, h, &toks[0], 2, 4, 0, 0, &n) },
		}
		if h != 0 {
			calls["model_free"] = func() int32 { return l.ModelFree(h) }
			calls["session_free"] = func() int32 { return l.SessionFree(h) }
			calls["sampler_free"] = func() int32 { return l.SamplerFree(h) }
		}
		for name, call := range calls {
			runtime.LockOSThread() // so LastError reads this call's message
			st := call()
			msg := l.LastError()
			runtime.UnlockOSThread()
			assert.Equal(t, InvalidArg, st, "%s(%#x): %s", name, h, msg)
			assert.Contains(t, msg, "moonlm_", "%s(%#x) message names the function", name, h)
		}
		assert.Equal(t, int32(0), l.ModelIsEOG(h, 0), "is_eog(%#x)", h)
	}
	// Freeing NULL is a no-op, as with free().
	assert.Equal(t, OK, l.ModelFree(0))
	assert.Equal(t, OK, l.SessionFree(0))
	assert.Equal(t, OK, l.SamplerFree(0))
}

func TestNullOutPointers(t *testing.T) {
	l := lib(t)
	requireStatus(t, l, InvalidArg, l.ModelOpenRaw(unsafe.Pointer(cstr("x.gguf")), nil, nil), "model_open(out NULL)")
	var out uintptr = 77
	requireStatus(t, l, InvalidArg, l.ModelOpenRaw(nil, nil, unsafe.Pointer(&out)), "model_open(path NULL)")
	assert.Equal(t, uintptr(0), out, "*out is cleared on failure")
	requireStatus(t, l, InvalidArg, l.SamplerNew(nil, nil), "sampler_new(out NULL)")
	requireStatus(t, l, InvalidArg, l.SessionNew(0, nil, nil), "session_new(out NULL)")
	requireStatus(t, l, InvalidArg, l.ModelGetInfo(0, nil), "model_get_info(info NULL)")
}

// Versioned structs: too small is rejected, larger is accepted only if the
// bytes beyond what the library knows are zero.
func TestParamsSize(t *testing.T) {
	l := lib(t)
	missing := filepath.Join(t.TempDir(), "missing.gguf")

	var p ModelParams
	l.ModelParamsDefault(&p)
	require.Equal(t, unsafe.Sizeof(p), p.Size)
	var out uintptr
	p.Size = 8
	requireStatus(t, l, InvalidArg, l.ModelOpen(missing, &p, &out), "size too small")
	assert.Contains(t, l.LastError(), "size")

	// A caller built against a newer header: 16 more bytes.
	type newer struct {
		ModelParams
		Extra [2]uint64
	}
	var q newer
	l.ModelParamsDefault(&q.ModelParams)
	q.Size = unsafe.Sizeof(q)
	st := l.ModelOpen(missing, (*ModelParams)(unsafe.Pointer(&q)), &out)
	assert.NotEqual(t, InvalidArg, st, "larger struct with zero tail accepted: %s", l.LastError())
	q.Extra[1] = 1
	requireStatus(t, l, InvalidArg, l.ModelOpen(missing, (*ModelParams)(unsafe.Pointer(&q)), &out), "larger struct with nonzero tail")
	assert.Contains(t, l.LastError(), "offset")

	p.Size = unsafe.Sizeof(p)
	p.Flags = 4
	requireStatus(t, l, InvalidArg, l.ModelOpen(missing, &p, &out), "unknown model flags")

	var sp SamplerParams
	l.SamplerParamsDefault(&sp)
	require.Equal(t, unsafe.Sizeof(sp), sp.Size)
	sp.Size = 4
	var smp uintptr
	requireStatus(t, l, InvalidArg, l.SamplerNew(&sp, &smp), "sampler params too small")

	var ssp SessionParams
	l.SessionParamsDefault(&ssp)
	require.Equal(t, unsafe.Sizeof(ssp), ssp.Size)
	assert.Equal(t, int32(0), ssp.KVType, "default KV type is F16")

	var info ModelInfo
	info.Size = 8
	requireStatus(t, l, InvalidArg, l.ModelGetInfo(0x10, &info), "info size too small")
}

// The last error is per thread and cleared by the next call on that thread.
func TestLastErrorPerThread(t *testing.T) {
	l := lib(t)
	failed := make(chan struct{})
	checked := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	var msgA, msgA2, msgB string
	go func() { // thread A fails, then waits for B to succeed
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		l.ModelFree(0xdeadbeef)
		msgA = l.LastError()
		close(failed)
		<-checked
		msgA2 = l.LastError()
		l.ModelFree(0) // a success clears it
		msgB = l.LastError()
	}()
	go func() { // thread B succeeds meanwhile
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		<-failed
		require.Equal(t, OK, l.ModelFree(0))
		assert.Equal(t, "", l.LastError())
		close(checked)
	}()
	wg.Wait()
	assert.Contains(t, msgA, "moonlm_model_free")
	assert.Contains(t, msgA, "0xdeadbeef")
	assert.Equal(t, msgA, msgA2, "another thread's call did not touch this thread's message")
	assert.Equal(t, "", msgB, "a successful call clears the message")
}

func init() {
	children["panic"] = func() error {
		l, err := childLib()
		if err != nil {
			return err
		}
		runtime.LockOSThread()
		st := l.ModelFree(0x12345)
		msg := l.LastError()
		if st != Internal {
			return errorf("moonlm_model_free under MOONLM_DEBUG_PANIC gave status %d (%s), want INTERNAL", st, msg)
		}
		for _, want := range []string{"moonlm_model_free", "panic", "MOONLM_DEBUG_PANIC", "errors.go:"} {
			if !strings.Contains(msg, want) {
				return errorf("panic message %q lacks %q", msg, want)
			}
		}
		// The library keeps working after a recovered panic.
		if st := l.SessionFree(0x12345); st != InvalidArg {
			return errorf("after the panic, session_free gave %d", st)
		}
		return nil
	}
}

// A panic inside the library becomes MOONLM_INTERNAL with the panic's
// message and place, and the library stays usable.
func TestPanicBecomesInternal(t *testing.T) {
	runInChild(t, "panic", "MOONLM_DEBUG_PANIC=moonlm_model_free")
}
