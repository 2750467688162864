package abitest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/internal/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The limits of docs/C-API.md ("Limits"), as the library applies them.
const (
	maxThreads      = 512
	maxPenaltyLastN = 1 << 24
)

// writeTiny writes the self-contained tiny test model (plus meta
// overrides) and returns its path.
func writeTiny(t testing.TB, dir string, meta map[string]any) string {
	t.Helper()
	s := testmodel.Small
	s.Meta = meta
	b, err := testmodel.Build(s)
	require.NoError(t, err)
	path := filepath.Join(dir, "tiny.gguf")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path
}

// n_threads beyond 512 is MOONLM_INVALID_ARGUMENT for models and sessions
// (INT32_MAX made the worker pool allocate 128 GiB and abort the process).
func TestThreadsLimit(t *testing.T) {
	runtime.LockOSThread() // so LastError reads this goroutine's calls' messages
	defer runtime.UnlockOSThread()
	l := lib(t)
	path := writeTiny(t, t.TempDir(), nil)
	for _, n := range []int32{maxThreads + 1, 100000, math.MaxInt32, -1, math.MinInt32} {
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.NThreads = n
		var m uintptr
		requireStatus(t, l, InvalidArg, l.ModelOpen(path, &p, &m), fmt.Sprintf("open with n_threads %d", n))
		assert.Contains(t, l.LastError(), "n_threads")
	}
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.NThreads = 1
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(path, &p, &m), "open with 1 thread")
	defer l.ModelFree(m)
	for _, n := range []int32{maxThreads + 1, math.MaxInt32, -1} {
		var sp SessionParams
		l.SessionParamsDefault(&sp)
		sp.NCtx, sp.NThreads = 16, n
		var s uintptr
		requireStatus(t, l, InvalidArg, l.SessionNew(m, &sp, &s), fmt.Sprintf("session with n_threads %d", n))
		assert.Contains(t, l.LastError(), "n_threads")
	}
}

// penalty_last_n beyond 2^24 is MOONLM_INVALID_ARGUMENT, and the largest
// allowed window is not allocated up front (INT32_MAX took 22 s and 8 GiB).
func TestPenaltyLastNLimit(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := lib(t)
	for _, n := range []int32{maxPenaltyLastN + 1, math.MaxInt32, -2, math.MinInt32} {
		var p SamplerParams
		l.SamplerParamsDefault(&p)
		p.PenaltyLastN = n
		var s uintptr
		requireStatus(t, l, InvalidArg, l.SamplerNew(&p, &s), fmt.Sprintf("penalty_last_n %d", n))
		assert.Contains(t, l.LastError(), "penalty_last_n")
	}
	var p SamplerParams
	l.SamplerParamsDefault(&p)
	p.PenaltyLastN, p.RepeatPenalty, p.Temperature = maxPenaltyLastN, 1.5, 0
	var before, after syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &before))
	t0 := time.Now()
	var s uintptr
	requireStatus(t, l, OK, l.SamplerNew(&p, &s), "penalty_last_n 2^24")
	took := time.Since(t0)
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &after))
	defer l.SamplerFree(s)
	// 2^24 int32s allocated eagerly would be 64 MiB touched.
	assert.Less(t, after.Maxrss-before.Maxrss, int64(32<<10), "max RSS grew by %d KiB", after.Maxrss-before.Maxrss)
	assert.Less(t, took, 2*time.Second)
	requireStatus(t, l, OK, l.SamplerAccept(s, 3), "accept")
	logits := []float32{0, 0, 0, 2, 1.5}
	var tok int32
	requireStatus(t, l, OK, l.Sample(s, &logits[0], uintptr(len(logits)), &tok), "sample")
	assert.Equal(t, int32(4), tok, "the accepted token is penalized")
}

// A FIFO or a directory given as the model path is refused at once with a
// message saying what it is (a FIFO blocked moonlm_model_open forever).
func TestOpenNonRegularFile(t *testing.T) {
	l := lib(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	for _, c := range []struct{ path, want string }{{fifo, "FIFO"}, {dir, "is a directory"}} {
		done := make(chan struct {
			st  int32
			msg string
		}, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var m uintptr
			st := l.ModelOpen(c.path, nil, &m)
			done <- struct {
				st  int32
				msg string
			}{st, l.LastError()}
		}()
		select {
		case r := <-done:
			assert.Equal(t, IOErr, r.st, r.msg)
			assert.Contains(t, r.msg, c.want)
			assert.Equal(t, 1, strings.Count(r.msg, c.path), "path once in %q", r.msg)
		case <-time.After(5 * time.Second):
			t.Fatalf("moonlm_model_open(%s) still blocked after 5 s", c.path)
		}
	}
}

// A hostile model (a block count of 2^31, dimensions no tensor has, NaN
// hyperparameters, 70,000 metadata keys) is MOONLM_BAD_FILE (the keys:
// MOONLM_UNSUPPORTED), and rejecting it keeps the process's
// peak RSS under 64 MiB plus the file's size. Each file is opened in a
// fresh child so its peak is its own.
func TestHostileFilesPeakRSS(t *testing.T) {
	_ = lib(t)
	cases, err := testmodel.Hostile()
	require.NoError(t, err)
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, c.Name+".gguf")
		require.NoError(t, os.WriteFile(path, c.Data, 0o644))
		t.Run(c.Name, func(t *testing.T) {
			want := "3" // MOONLM_BAD_FILE
			if c.Unsupported {
				want = "4" // MOONLM_UNSUPPORTED
			}
			out := runInChild(t, "open-hostile", "MOONLM_ABITEST_MODEL="+path, "MOONLM_ABITEST_WANT="+c.Want, "MOONLM_ABITEST_STATUS="+want)
			var kib int64
			i := strings.Index(out, "VmHWM:")
			require.GreaterOrEqual(t, i, 0, "the child reports its peak RSS: %s", out)
			_, err := fmt.Sscanf(out[i+len("VmHWM:"):], "%d", &kib)
			require.NoError(t, err)
			peak := kib << 10
			limit := int64(64<<20) + int64(len(c.Data))
			t.Logf("peak RSS %.1f MiB rejecting a %d-byte file", float64(peak)/(1<<20), len(c.Data))
			assert.Less(t, peak, limit, "peak RSS %d MiB rejecting a %d-byte file", peak>>20, len(c.Data))
		})
	}
}

func init() {
	children["open-hostile"] = func() error {
		runtime.LockOSThread() // moonlm_last_error is per thread
		l, err := childLib()
		if err != nil {
			return err
		}
		path, want := os.Getenv("MOONLM_ABITEST_MODEL"), os.Getenv("MOONLM_ABITEST_WANT")
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.NThreads = 1
		var m uintptr
		st := l.ModelOpen(path, &p, &m)
		msg := strings.ReplaceAll(l.LastError(), path, "PATH")
		if want := os.Getenv("MOONLM_ABITEST_STATUS"); strconv.Itoa(int(st)) != want {
			return errorf("status %d (%s), want %s: %s", st, l.StatusString(st), want, msg)
		}
		if !strings.Contains(msg, want) {
			return errorf("message %q does not mention %q", msg, want)
		}
		// The peak RSS of this process image (getrusage's ru_maxrss would
		// include the parent's RSS at fork).
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				fmt.Println(line)
			}
		}
		return nil
	}
}

// addressSpaceLimit is the hard RLIMIT_AS the extremes child runs under.
const addressSpaceLimit = 4 << 30

// Under a 4 GiB address-space limit, every function of the C API called
// with its parameters at their extremes returns a status: nothing aborts
// (an allocation the OS refuses is fatal in Go, so every size must be
// bounded before it is allocated).
func TestExtremesUnderAddressSpaceLimit(t *testing.T) {
	_ = lib(t)
	path := writeTiny(t, t.TempDir(), map[string]any{
		"tokenizer.chat_template": "{{ 'ab' * 9223372036854775807 }}{{ range(-9223372036854775807 - 1, 9223372036854775807) | length }}",
	})
	out := runInChild(t, "extremes", "MOONLM_ABITEST_MODEL="+path)
	t.Log(out)
}

func init() {
	children["extremes"] = func() error {
		runtime.LockOSThread() // moonlm_last_error is per thread
		lim := unix.Rlimit{Cur: addressSpaceLimit, Max: addressSpaceLimit}
		if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
			return errorf("setrlimit: %v", err)
		}
		// The limit is in effect: 5 GiB of address space is refused.
		if b, err := unix.Mmap(-1, 0, 5<<30, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE); err == nil {
			_ = unix.Munmap(b)
			return errorf("a 5 GiB mapping succeeded under RLIMIT_AS %d", uint64(addressSpaceLimit))
		}
		l, err := childLib()
		if err != nil {
			return err
		}
		return callExtremes(l, os.Getenv("MOONLM_ABITEST_MODEL"))
	}
}

// callExtremes calls every function with extreme parameters; it returns an
// error only for a status that breaks the API's promises (MOONLM_INTERNAL,
// or success where the limits say the call is refused). Reaching the end
// without the process dying is the main check.
func callExtremes(l *Lib, path string) error {
	var errs []string
	check := func(what string, st int32, ok ...int32) {
		fmt.Printf("%-60s %s\n", what, l.StatusString(st))
		if st == Internal {
			errs = append(errs, fmt.Sprintf("%s: MOONLM_INTERNAL: %s", what, l.LastError()))
			return
		}
		for _, o := range ok {
			if st == o {
				return
			}
		}
		errs = append(errs, fmt.Sprintf("%s: status %s (%s)", what, l.StatusString(st), l.LastError()))
	}
	i32s := []int32{math.MinInt32, -1, 0, 1, maxThreads, maxThreads + 1, 1 << 26, math.MaxInt32}
	// Models.
	for _, n := range i32s {
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.NThreads = n
		var m uintptr
		st := l.ModelOpen(path, &p, &m)
		if n >= 0 && n <= maxThreads {
			check(fmt.Sprintf("model_open n_threads=%d", n), st, OK)
		} else {
			check(fmt.Sprintf("model_open n_threads=%d", n), st, InvalidArg)
		}
		if st == OK {
			l.ModelFree(m)
		}
	}
	for _, v := range []int32{math.MinInt32, -1, 3, math.MaxInt32} {
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.Pack, p.PackedCache, p.Numerics = v, v, v
		var m uintptr
		check(fmt.Sprintf("model_open pack/cache/numerics=%d", v), l.ModelOpen(path, &p, &m), InvalidArg)
	}
	{
		var p ModelParams
		l.ModelParamsDefault(&p)
		p.PackedCacheBytes = math.MaxUint64
		var m uintptr
		check("model_open packed_cache_bytes=UINT64_MAX", l.ModelOpen(path, &p, &m), InvalidArg)
		p.Size = math.MaxUint64
		check("model_open size=SIZE_MAX", l.ModelOpen(path, &p, &m), InvalidArg)
		p.Size = 0
		check("model_open size=0", l.ModelOpen(path, &p, &m), InvalidArg)
	}
	var p ModelParams
	l.ModelParamsDefault(&p)
	p.NThreads = 2
	var m uintptr
	if st := l.ModelOpen(path, &p, &m); st != OK {
		return errorf("open %s: %s", path, l.LastError())
	}
	defer l.ModelFree(m)
	var info ModelInfo
	info.Size = unsafe.Sizeof(info)
	check("model_get_info", l.ModelGetInfo(m, &info), OK)
	for _, tok := range i32s {
		_ = l.ModelIsEOG(m, tok)
		var n uintptr
		buf := make([]byte, 8)
		st := l.TokenPiece(m, tok, &buf[0], uintptr(len(buf)), &n)
		if tok >= 0 && tok < info.NVocab {
			check(fmt.Sprintf("token_to_piece %d", tok), st, OK, BufferTooSmall)
		} else {
			check(fmt.Sprintf("token_to_piece %d", tok), st, InvalidArg)
		}
	}
	// Tokenize and detokenize with counts beyond the bound, a NULL buffer
	// with cap 0, and a text of 1 MiB.
	msgs := []Message{{cstr("user"), cstr("hi")}}
	text := strings.Repeat("the a ", 1<<17)
	toks := make([]int32, 4)
	var n uintptr
	check("tokenize n=SIZE_MAX", l.Tokenize(m, cstr("x"), math.MaxUint64, 0, &toks[0], 4, &n), InvalidArg)
	check("tokenize cap=SIZE_MAX/2", l.Tokenize(m, cstr("x"), 1, 0, &toks[0], math.MaxUint64/2, &n), InvalidArg, OK)
	check("tokenize 768 KiB, cap 0", l.Tokenize(m, cstr(text), uintptr(len(text)), 1, nil, 0, &n), BufferTooSmall)
	check("detokenize n=SIZE_MAX", l.Detokenize(m, &toks[0], math.MaxUint64, nil, 0, &n), InvalidArg)
	check("detokenize n=2^24+1", l.Detokenize(m, &toks[0], 1<<24+1, nil, 0, &n), InvalidArg)
	check("tokenize len=64 MiB+1", l.Tokenize(m, cstr("x"), 64<<20+1, 0, &toks[0], 4, &n), InvalidArg)
	check("chat_apply_template n=2^20+1", l.ChatApply(m, &msgs[0], 1<<20+1, 1, nil, 0, &n), InvalidArg)
	bad := []int32{-1, math.MaxInt32, math.MinInt32}
	check("detokenize bad ids", l.Detokenize(m, &bad[0], 3, nil, 0, &n), InvalidArg)
	// The chat template asks for 2^64 bytes and a 2^64-item range: an
	// unusable template (UNSUPPORTED with the reason) or a template error.
	st := l.ChatApply(m, &msgs[0], 1, 1, nil, 0, &n)
	check("chat_apply_template hostile template", st, InvalidArg, Unsupported, BufferTooSmall, OK)
	check("chat_apply_template n=SIZE_MAX", l.ChatApply(m, &msgs[0], math.MaxUint64, 1, nil, 0, &n), InvalidArg)
	check("chat_apply_template_named hostile template", l.ChatApplyNamed(m, nil, &msgs[0], 1, 1, nil, 0, &n), InvalidArg, Unsupported, BufferTooSmall, OK)
	check("chat_apply_template_named chatml", l.ChatApplyNamed(m, cstr("chatml"), &msgs[0], 1, 1, nil, 0, &n), BufferTooSmall)
	check("chat_apply_template_named n=SIZE_MAX", l.ChatApplyNamed(m, cstr("chatml"), &msgs[0], math.MaxUint64, 1, nil, 0, &n), InvalidArg)
	check("chat_builtin_templates cap=SIZE_MAX NULL", l.ChatBuiltins(nil, math.MaxUint64, &n), InvalidArg)
	// Sessions.
	for _, nctx := range append(i32s, 1<<24, 1<<25) {
		for _, th := range []int32{0, maxThreads, maxThreads + 1, math.MaxInt32} {
			var sp SessionParams
			l.SessionParamsDefault(&sp)
			sp.NCtx, sp.NThreads = nctx, th
			var s uintptr
			what := fmt.Sprintf("session_new n_ctx=%d n_threads=%d", nctx, th)
			st := l.SessionNew(m, &sp, &s)
			if nctx < 0 || th > maxThreads {
				check(what, st, InvalidArg)
			} else {
				check(what, st, OK, OutOfMemory, InvalidArg)
			}
			if st == OK {
				check(what+" decode", l.Decode(s, 1, nil, 0), OK)
				l.SessionFree(s)
			}
		}
	}
	var sp SessionParams
	l.SessionParamsDefault(&sp)
	sp.NCtx = 16
	var s uintptr
	if st := l.SessionNew(m, &sp, &s); st != OK {
		return errorf("session: %s", l.LastError())
	}
	defer l.SessionFree(s)
	for _, tok := range i32s {
		st := l.Decode(s, tok, nil, 0)
		if tok >= 0 && tok < info.NVocab {
			check(fmt.Sprintf("decode %d", tok), st, OK)
		} else {
			check(fmt.Sprintf("decode %d", tok), st, InvalidArg)
		}
	}
	check("rewind SIZE_MAX", l.Rewind(s, math.MaxUint64), InvalidArg, OK)
	check("rewind 0", l.Rewind(s, 0), OK)
	ptoks := make([]int32, 17)
	for i := range ptoks {
		ptoks[i] = 5
	}
	check("prefill n=SIZE_MAX", l.Prefill(s, &ptoks[0], math.MaxUint64, nil, 0), InvalidArg)
	check("prefill beyond n_ctx", l.Prefill(s, &ptoks[0], 17, nil, 0), ContextFull)
	logits := make([]float32, 4)
	check("prefill logits cap short", l.Prefill(s, &ptoks[0], 2, &logits[0], 4), InvalidArg, BufferTooSmall)
	// Samplers.
	type sparams func(*SamplerParams)
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for name, f := range map[string]sparams{
		"top_k=INT32_MAX":          func(p *SamplerParams) { p.TopK = math.MaxInt32 },
		"top_k=INT32_MIN":          func(p *SamplerParams) { p.TopK = math.MinInt32 },
		"penalty_last_n=INT32_MAX": func(p *SamplerParams) { p.PenaltyLastN = math.MaxInt32 },
		"penalty_last_n=2^24":      func(p *SamplerParams) { p.PenaltyLastN = maxPenaltyLastN; p.RepeatPenalty = 1.1 },
		"penalty_last_n=-1":        func(p *SamplerParams) { p.PenaltyLastN = -1; p.RepeatPenalty = 1.1 },
		"temperature=inf":          func(p *SamplerParams) { p.Temperature = inf },
		"temperature=nan":          func(p *SamplerParams) { p.Temperature = nan },
		"temperature=max":          func(p *SamplerParams) { p.Temperature = math.MaxFloat32 },
		"top_p=-inf":               func(p *SamplerParams) { p.TopP = -inf },
		"min_p=max":                func(p *SamplerParams) { p.MinP = math.MaxFloat32 },
		"repeat_penalty=max":       func(p *SamplerParams) { p.RepeatPenalty = math.MaxFloat32; p.PenaltyLastN = 64 },
		"frequency_penalty=max":    func(p *SamplerParams) { p.FrequencyPenalty = math.MaxFloat32; p.PenaltyLastN = 64 },
		"seed=UINT64_MAX":          func(p *SamplerParams) { p.Seed = math.MaxUint64 },
		"size=SIZE_MAX":            func(p *SamplerParams) { p.Size = math.MaxUint64 },
	} {
		var p SamplerParams
		l.SamplerParamsDefault(&p)
		f(&p)
		var smp uintptr
		st := l.SamplerNew(&p, &smp)
		check("sampler_new "+name, st, OK, InvalidArg)
		if st != OK {
			continue
		}
		for i := 0; i < 100; i++ {
			l.SamplerAccept(smp, int32(i))
		}
		l.SamplerAccept(smp, math.MaxInt32)
		l.SamplerAccept(smp, math.MinInt32)
		big := make([]float32, info.NVocab)
		for i := range big {
			big[i] = float32(i%7) - 3
		}
		big[3], big[4] = inf, nan
		var tok int32
		check("sample "+name, l.Sample(smp, &big[0], uintptr(len(big)), &tok), OK)
		check("sample n=SIZE_MAX "+name, l.Sample(smp, &big[0], math.MaxUint64, &tok), InvalidArg)
		check("generate max=SIZE_MAX "+name, l.Generate(s, smp, &ptoks[0], 1, math.MaxUint64, 0, 0, &n), OK, ContextFull)
		l.Rewind(s, 0)
		l.SamplerFree(smp)
	}
	if len(errs) > 0 {
		return errorf("%d calls broke their promise:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	return nil
}

// A chat template that multiplies a string by 2^63-1 is a template error
// (the model's template is then unusable: UNSUPPORTED with the reason, as
// these name no template family to fall back on), never MOONLM_INTERNAL:
// the budget check overflowed and strings.Repeat panicked.
func TestChatTemplateOverflowNotInternal(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l := lib(t)
	for _, tmpl := range []string{
		"{{ 'ab' * 9223372036854775807 }}",
		"{{ [1, 2] * 9223372036854775807 }}",
		"{{ range(-9223372036854775807 - 1, 9223372036854775807) | length }}",
		"{{ 'abc'[1::9223372036854775807] }}{{ 9223372036854775807 + 1 }}",
	} {
		path := writeTiny(t, t.TempDir(), map[string]any{"tokenizer.chat_template": tmpl})
		var m uintptr
		requireStatus(t, l, OK, l.ModelOpen(path, nil, &m), "open")
		msgs := []Message{{cstr("user"), cstr("hi")}}
		var n uintptr
		st := l.ChatApply(m, &msgs[0], 1, 1, nil, 0, &n)
		assert.NotEqual(t, Internal, st, "%s: %s", tmpl, l.LastError())
		assert.Contains(t, []int32{OK, BufferTooSmall, InvalidArg, Unsupported}, st, "%s: %s", tmpl, l.LastError())
		l.ModelFree(m)
	}
}

// Truncating the model file while moonlm_model_open reads it (at random
// moments during the open) gives a status, never a SIGBUS: faults are
// recovered during open (parsing, loading norms, packing) as they are
// afterwards. Runs in a child so a fault cannot kill the test binary.
func TestTruncateDuringOpen(t *testing.T) {
	_ = lib(t)
	s := testmodel.Small
	s.Quant = gguf.Q8_0
	b, err := testmodel.Build(s)
	require.NoError(t, err)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.gguf")
	require.NoError(t, os.WriteFile(src, b, 0o644))
	t.Log(runInChild(t, "truncate-during-open", "MOONLM_ABITEST_MODEL="+src))
}

func init() {
	children["truncate-during-open"] = func() error {
		runtime.LockOSThread() // moonlm_last_error is per thread
		l, err := childLib()
		if err != nil {
			return err
		}
		src := os.Getenv("MOONLM_ABITEST_MODEL")
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		path := src + ".victim"
		seen := map[int32]int{}
		for i := 0; i < 200; i++ {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				return err
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Spread the cut over the open's duration.
				time.Sleep(time.Duration(i%20) * 50 * time.Microsecond)
				_ = os.Truncate(path, int64(i%3)*4096)
			}()
			var p ModelParams
			l.ModelParamsDefault(&p)
			p.NThreads, p.Pack, p.PackedCache = 1, 1, 2 // pack on, cache off
			var m uintptr
			st := l.ModelOpen(path, &p, &m)
			<-done
			seen[st]++
			switch st {
			case OK:
				// Decoding reads the lost pages now: MOONLM_IO or OK.
				var sp SessionParams
				l.SessionParamsDefault(&sp)
				sp.NCtx = 8
				var sess uintptr
				if l.SessionNew(m, &sp, &sess) == OK {
					if st := l.Decode(sess, 1, nil, 0); st != OK && st != IOErr {
						return errorf("decode after a cut: status %s: %s", l.StatusString(st), l.LastError())
					}
					l.SessionFree(sess)
				}
				l.ModelFree(m)
			case IOErr, BadFile, Unsupported:
			default:
				return errorf("open during a cut: status %s: %s", l.StatusString(st), l.LastError())
			}
		}
		fmt.Println("statuses:", seen)
		return nil
	}
}

// An architecture without a family is MOONLM_UNSUPPORTED naming it, never
// MOONLM_BAD_FILE: the same tiny file opens as llama and is refused as
// mamba, with no handle.
func TestUnsupportedArchitectureStatus(t *testing.T) {
	l := lib(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m uintptr
	st := l.ModelOpen(writeTiny(t, t.TempDir(), nil), nil, &m)
	if st == Unsupported && strings.Contains(l.LastError(), "engine is not built") {
		t.Skip("the library has no engine yet: " + l.LastError())
	}
	requireStatus(t, l, OK, st, "the tiny llama model")
	l.ModelFree(m)

	m = 99
	path := writeTiny(t, t.TempDir(), map[string]any{"general.architecture": "mamba"})
	requireStatus(t, l, Unsupported, l.ModelOpen(path, nil, &m), "a mamba file")
	assert.Equal(t, uintptr(0), m)
	assert.Contains(t, l.LastError(), `"mamba"`)
}
