package abitest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stopStrings holds C views of stop strings (Go memory kept alive by the
// value; the library reads it during the call only).
type stopStrings struct {
	bytes [][]byte
	ptrs  []*byte
	lens  []uintptr
}

func newStops(nulTerminated bool, ss ...string) *stopStrings {
	st := &stopStrings{}
	for _, s := range ss {
		b := append([]byte(s), 0)
		st.bytes = append(st.bytes, b)
		st.ptrs = append(st.ptrs, &b[0])
		st.lens = append(st.lens, uintptr(len(s)))
	}
	if nulTerminated {
		st.lens = nil
	}
	return st
}

func (st *stopStrings) set(p *GenerateParams) {
	p.NStop = uintptr(len(st.ptrs))
	if len(st.ptrs) > 0 {
		p.Stop = unsafe.Pointer(&st.ptrs[0])
	}
	if st.lens != nil {
		p.StopLen = &st.lens[0]
	}
}

func genParams(l *Lib, maxTokens int32, rec *genRecorder) GenerateParams {
	var p GenerateParams
	l.GenerateParamsInit(&p, unsafe.Sizeof(p))
	p.MaxTokens = maxTokens
	if rec != nil {
		p.Callback, p.UserData = callback(), register(rec)
	}
	return p
}

func newResult() GenerateResult { return GenerateResult{Size: unsafe.Sizeof(GenerateResult{})} }

// generateEx calls moonlm_generate_ex on a locked thread and returns its
// status and moonlm_last_error.
func generateEx(l *Lib, s, g uintptr, prompt []int32, p *GenerateParams, r *GenerateResult) (int32, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var pp *int32
	if len(prompt) > 0 {
		pp = &prompt[0]
	}
	st := l.GenerateEx(s, g, pp, uintptr(len(prompt)), p, r)
	return st, l.LastError()
}

func TestGenerateExFinishReasons(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	golden, err := os.ReadFile(shareddata.Path(t, "models/stories260K.golden.txt"))
	require.NoError(t, err)
	prompt := []int32{info.BOS}
	g := greedySampler(t, l)

	t.Run("length", func(t *testing.T) {
		s := newSession(t, l, m, 512, 0)
		rec := &genRecorder{}
		p, r := genParams(l, 40, rec), newResult()
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishLength, r.FinishReason)
		assert.Equal(t, "length", l.FinishReasonString(r.FinishReason))
		assert.Equal(t, uintptr(1), r.NPrompt)
		assert.Equal(t, uintptr(40), r.NGenerated)
		assert.Equal(t, uintptr(39), r.NEvaluated, "the last token is not decoded by default")
		assert.Equal(t, 1+r.NEvaluated, position(t, l, s))
		require.Len(t, rec.tokens, 40)
		assert.Equal(t, rec.tokens[39], r.LastToken)
		assert.True(t, strings.HasPrefix(string(golden), strings.TrimPrefix(rec.text.String(), " ")), "%q", rec.text.String())

		// DECODE_LAST: every generated token is in the session.
		s2 := newSession(t, l, m, 512, 0)
		p.Flags = 1 // MOONLM_GENERATE_DECODE_LAST
		p.UserData = register(&genRecorder{})
		st, msg = generateEx(l, s2, g, prompt, &p, &r)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, uintptr(40), r.NEvaluated)
		assert.Equal(t, uintptr(41), position(t, l, s2))
	})

	t.Run("stop", func(t *testing.T) {
		for _, nul := range []bool{false, true} {
			s := newSession(t, l, m, 512, 0)
			rec := &genRecorder{}
			p, r := genParams(l, 200, rec), newResult()
			stops := newStops(nul, "zzz", "", "Lily")
			stops.set(&p)
			st, msg := generateEx(l, s, g, prompt, &p, &r)
			runtime.KeepAlive(stops)
			require.Equal(t, OK, st, msg)
			assert.Equal(t, FinishStop, r.FinishReason)
			assert.Equal(t, " Once upon a time, there was a little girl named ", rec.text.String(), "NUL-terminated %v", nul)
			assert.Equal(t, int(r.NGenerated), len(rec.tokens), "no final call after a stop")
		}
	})

	t.Run("stop split across tokens and at the start", func(t *testing.T) {
		// " Once upon a time," is several tokens; a stop string spanning
		// them is caught and none of it is released.
		for _, tc := range []struct{ stop, want string }{
			{"pon a ti", " Once u"},
			{" Once", ""},
			{" ", ""},
		} {
			s := newSession(t, l, m, 512, 0)
			rec := &genRecorder{}
			p, r := genParams(l, 50, rec), newResult()
			stops := newStops(false, tc.stop)
			stops.set(&p)
			st, msg := generateEx(l, s, g, prompt, &p, &r)
			runtime.KeepAlive(stops)
			require.Equal(t, OK, st, msg)
			assert.Equal(t, FinishStop, r.FinishReason, "stop %q", tc.stop)
			assert.Equal(t, tc.want, rec.text.String(), "stop %q", tc.stop)
		}
	})

	t.Run("holdback released at the end", func(t *testing.T) {
		// The greedy text starts " Once upon a time": with max_tokens 1 the
		// first token's text could start "Once upon a time, Lily" and is held
		// back, then released by the final call (token -1).
		s := newSession(t, l, m, 512, 0)
		rec := &genRecorder{}
		p, r := genParams(l, 1, rec), newResult()
		stops := newStops(false, " Once upon a time, Lily")
		stops.set(&p)
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		runtime.KeepAlive(stops)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishLength, r.FinishReason)
		require.Len(t, rec.tokens, 2)
		assert.Equal(t, int32(-1), rec.tokens[1])
		assert.Equal(t, " Once", rec.text.String())
	})

	t.Run("context", func(t *testing.T) {
		s := newSession(t, l, m, 8, 0)
		rec := &genRecorder{}
		p, r := genParams(l, -1, rec), newResult()
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		require.Equal(t, OK, st, "a full context is a finish reason, not an error: %s", msg)
		assert.Equal(t, FinishContext, r.FinishReason)
		assert.Equal(t, uintptr(8), r.NGenerated)
		assert.Equal(t, uintptr(7), r.NEvaluated)
		assert.Equal(t, uintptr(8), position(t, l, s))
		// Now even the prompt does not fit.
		st, _ = generateEx(l, s, g, prompt, &p, &r)
		assert.Equal(t, ContextFull, st)
		assert.Equal(t, FinishNone, r.FinishReason)
		assert.Zero(t, r.NPrompt)
	})

	t.Run("eog", func(t *testing.T) {
		// stories260K never says EOS; SmolLM2 ends its chat reply with
		// <|im_end|>, an end-of-generation token.
		var sm uintptr
		requireStatus(t, l, OK, l.ModelOpen(shareddata.Model(t, shareddata.SmolLM2), nil, &sm), "open SmolLM2")
		defer l.ModelFree(sm)
		text := []byte("<|im_start|>user\nWhat is the capital of France? Answer in one sentence.<|im_end|>\n<|im_start|>assistant\n")
		toks := make([]int32, 64)
		var n uintptr
		requireStatus(t, l, OK, l.Tokenize(sm, &text[0], uintptr(len(text)), 2, &toks[0], 64, &n), "tokenize")
		s := newSession(t, l, sm, 256, 0)
		rec := &genRecorder{}
		p, r := genParams(l, 100, rec), newResult()
		st, msg := generateEx(l, s, g, toks[:n], &p, &r)
		require.Equal(t, OK, st, msg)
		require.Equal(t, FinishEOG, r.FinishReason, "reply %q", rec.text.String())
		assert.Contains(t, rec.text.String(), "Paris")
		assert.NotContains(t, rec.text.String(), "im_end")
		assert.Equal(t, int(r.NGenerated), len(rec.tokens), "the end-of-generation token is not passed on")
		assert.Equal(t, r.NGenerated, r.NEvaluated, "the last text token was decoded before EOG was sampled")
		assert.Equal(t, n+r.NGenerated, position(t, l, s))
	})

	t.Run("prefill only", func(t *testing.T) {
		s := newSession(t, l, m, 512, 0)
		rec := &genRecorder{}
		p, r := genParams(l, 0, rec), newResult()
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishLength, r.FinishReason)
		assert.Equal(t, uintptr(1), r.NPrompt)
		assert.Zero(t, r.NGenerated)
		assert.Empty(t, rec.tokens)
		assert.Equal(t, uintptr(1), position(t, l, s))
	})

	t.Run("callback stops", func(t *testing.T) {
		s := newSession(t, l, m, 512, 0)
		rec := &genRecorder{stopAt: 3}
		p, r := genParams(l, -1, rec), newResult()
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishCancelled, r.FinishReason)
		assert.Equal(t, uintptr(3), r.NGenerated)
		assert.Len(t, rec.tokens, 3)
		assert.Equal(t, uintptr(1+2), position(t, l, s))
	})

	t.Run("cancel from another thread", func(t *testing.T) {
		s := newSession(t, l, m, 2048, 0)
		var sp SamplerParams
		l.SamplerParamsDefault(&sp)
		sp.Temperature, sp.Seed = 1, 3
		var smp uintptr
		requireStatus(t, l, OK, l.SamplerNew(&sp, &smp), "sampler")
		defer l.SamplerFree(smp)
		started, cancelled := make(chan struct{}), make(chan struct{})
		rec := &genRecorder{}
		rec.hook = func(int32) bool {
			if len(rec.tokens) == 1 {
				close(started)
				<-cancelled // the next check sees the request
			}
			return false
		}
		done := make(chan [2]any, 1)
		go func() {
			p, r := genParams(l, -1, rec), newResult()
			st, msg := generateEx(l, s, smp, prompt, &p, &r)
			done <- [2]any{st, r}
			_ = msg
		}()
		<-started
		requireStatus(t, l, OK, l.Cancel(s), "cancel from another thread")
		close(cancelled)
		select {
		case got := <-done:
			assert.Equal(t, Cancelled, got[0].(int32))
			buf := make([]byte, 4096)
			var n uintptr
			requireStatus(t, l, OK, l.SessionErr(s, &buf[0], uintptr(len(buf)), &n), "session last error")
			assert.Contains(t, string(buf[:n]), "moonlm_generate_ex: cancelled by moonlm_session_cancel")
			r := got[1].(GenerateResult)
			assert.Equal(t, FinishCancelled, r.FinishReason)
			assert.Equal(t, "cancelled", l.FinishReasonString(r.FinishReason))
			assert.Equal(t, uintptr(1), r.NGenerated)
			assert.Equal(t, 1+r.NEvaluated, position(t, l, s))
		case <-time.After(10 * time.Second):
			t.Fatal("the cancelled generation did not stop within 10 s")
		}
	})
}

func TestGenerateExParams(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 64, 0)
	g := greedySampler(t, l)
	prompt := []int32{info.BOS}
	invalid := func(what, wantMsg string, p *GenerateParams, r *GenerateResult) {
		t.Helper()
		if r != nil {
			r.FinishReason, r.NGenerated = 99, 99
		}
		st, msg := generateEx(l, s, g, prompt, p, r)
		assert.Equal(t, InvalidArg, st, "%s: %s", what, msg)
		assert.Contains(t, msg, wantMsg, what)
		if r != nil && r.Size >= unsafe.Sizeof(*r) {
			assert.Equal(t, FinishNone, r.FinishReason, "%s: result written on failure", what)
			assert.Zero(t, r.NGenerated, what)
		}
		assert.Equal(t, uintptr(0), position(t, l, s), "%s: no work done", what)
	}
	r := newResult()

	var p GenerateParams
	l.GenerateParamsInit(&p, unsafe.Sizeof(p))
	assert.Equal(t, unsafe.Sizeof(p), p.Size)
	assert.Equal(t, int32(-1), p.MaxTokens, "default: no limit")

	small := p
	small.Size = 8
	invalid("small params", "moonlm_generate_params.size is 8", &small, &r)

	// A newer caller's struct: accepted when its extra bytes are zero.
	type newer struct {
		GenerateParams
		Extra uint64
	}
	var np newer
	l.GenerateParamsInit(&np.GenerateParams, unsafe.Sizeof(np))
	np.MaxTokens = 2
	st, msg := generateEx(l, s, g, prompt, &np.GenerateParams, &r)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, FinishLength, r.FinishReason)
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")
	np.Extra = 1
	invalid("unknown option", "nonzero byte", &np.GenerateParams, &r)

	bad := p
	bad.Flags = 12
	invalid("flags", "unknown bits 0xc", &bad, &r)
	bad = p
	bad.MaxTokens = -2
	invalid("max_tokens", "max_tokens is -2", &bad, &r)
	bad = p
	bad.NStop = 1
	invalid("stop NULL", "stop is NULL", &bad, &r)
	stops := newStops(true, "a", "b")
	stops.ptrs[1] = nil
	bad = p
	stops.set(&bad)
	invalid("stop[1] NULL", "stop[1] is NULL", &bad, &r)
	bad.NStop = 1025
	invalid("too many", "at most 1024", &bad, &r)
	huge := newStops(false, "a", "b")
	huge.lens[1] = 1 << 40
	bad = p
	huge.set(&bad)
	invalid("too long", "more than 1048576 bytes", &bad, &r)
	runtime.KeepAlive(stops)
	runtime.KeepAlive(huge)

	smallRes := r
	smallRes.Size = 8
	invalid("small result", "result->size is 8", &p, &smallRes)

	// NULL params and result: the defaults (no limit: the context ends it).
	st, msg = generateEx(l, s, g, prompt, nil, nil)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, uintptr(64), position(t, l, s))
	requireStatus(t, l, OK, l.Rewind(s, 0), "rewind")

	// Handles and prompt.
	st, _ = generateEx(l, 0, g, prompt, &p, &r)
	assert.Equal(t, InvalidArg, st)
	st, _ = generateEx(l, s, 0, prompt, &p, &r)
	assert.Equal(t, InvalidArg, st)
	st, msg = generateEx(l, s, g, nil, &p, &r)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "the prompt is empty")
	st, msg = generateEx(l, s, g, []int32{int32(info.NVocab)}, &p, &r)
	assert.Equal(t, InvalidArg, st, msg)

	// params_init writes exactly the caller's size.
	buf := make([]byte, 64)
	for i := range buf {
		buf[i] = 0xAA
	}
	l.GenerateParamsInit((*GenerateParams)(unsafe.Pointer(&buf[0])), 12)
	assert.Equal(t, byte(0xAA), buf[12], "nothing written past size")
	assert.Equal(t, uint64(12), *(*uint64)(unsafe.Pointer(&buf[0])))

	for i, want := range []string{"none", "stop", "length", "eog", "context", "cancelled", "unknown"} {
		assert.Equal(t, want, l.FinishReasonString(int32(i)))
	}
	assert.Equal(t, "unknown", l.FinishReasonString(-1))
}

func TestGenerateExStructLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
#define F(s, m) printf(#s "." #m " %zu\n", offsetof(s, m))
#define S(s) printf(#s " %zu\n", sizeof(s))
int main(void) {
	S(moonlm_generate_params); F(moonlm_generate_params, max_tokens); F(moonlm_generate_params, flags);
	F(moonlm_generate_params, stop); F(moonlm_generate_params, stop_len); F(moonlm_generate_params, n_stop);
	F(moonlm_generate_params, callback); F(moonlm_generate_params, user_data);
	S(moonlm_generate_result); F(moonlm_generate_result, finish_reason); F(moonlm_generate_result, last_token);
	F(moonlm_generate_result, n_prompt); F(moonlm_generate_result, n_generated); F(moonlm_generate_result, n_evaluated);
	printf("finish %d %d %d %d %d %d flag %u stops %d %u\n", MOONLM_FINISH_NONE, MOONLM_FINISH_STOP, MOONLM_FINISH_LENGTH,
	       MOONLM_FINISH_EOG, MOONLM_FINISH_CONTEXT, MOONLM_FINISH_CANCELLED, MOONLM_GENERATE_DECODE_LAST,
	       MOONLM_MAX_STOP_STRINGS, MOONLM_MAX_STOP_BYTES);
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var p GenerateParams
	var r GenerateResult
	want := fmt.Sprintf(`moonlm_generate_params %d
moonlm_generate_params.max_tokens %d
moonlm_generate_params.flags %d
moonlm_generate_params.stop %d
moonlm_generate_params.stop_len %d
moonlm_generate_params.n_stop %d
moonlm_generate_params.callback %d
moonlm_generate_params.user_data %d
moonlm_generate_result %d
moonlm_generate_result.finish_reason %d
moonlm_generate_result.last_token %d
moonlm_generate_result.n_prompt %d
moonlm_generate_result.n_generated %d
moonlm_generate_result.n_evaluated %d
finish 0 1 2 3 4 5 flag 1 stops 1024 1048576
`, unsafe.Sizeof(p), unsafe.Offsetof(p.MaxTokens), unsafe.Offsetof(p.Flags), unsafe.Offsetof(p.Stop),
		unsafe.Offsetof(p.StopLen), unsafe.Offsetof(p.NStop), unsafe.Offsetof(p.Callback), unsafe.Offsetof(p.UserData),
		unsafe.Sizeof(r), unsafe.Offsetof(r.FinishReason), unsafe.Offsetof(r.LastToken), unsafe.Offsetof(r.NPrompt),
		unsafe.Offsetof(r.NGenerated), unsafe.Offsetof(r.NEvaluated))
	assert.Equal(t, want, string(out))
}
