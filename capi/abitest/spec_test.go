package abitest

import (
	"fmt"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// moonlm_generate_params' draft modes.
const (
	DraftNone   int32 = 0
	DraftLookup int32 = 1
	DraftModel  int32 = 2
)

// Greedy generation with prompt lookup or a draft model yields the tokens
// of plain generation; the result counts the guesses.
func TestGenerateSpeculative(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g := greedySampler(t, l)
	prompt := []int32{info.BOS}
	run := func(draft int32, ds uintptr) ([]int32, GenerateResult) {
		s := newSession(t, l, m, 512, 0)
		rec := &genRecorder{}
		p, r := genParams(l, 100, rec), newResult()
		p.Draft, p.DraftTokens, p.DraftSession = draft, 6, ds
		st, msg := generateEx(l, s, g, prompt, &p, &r)
		require.Equal(t, OK, st, msg)
		assert.Equal(t, FinishLength, r.FinishReason)
		assert.Equal(t, uintptr(99), r.NEvaluated)
		assert.Equal(t, uintptr(100), position(t, l, s))
		return rec.tokens, r
	}
	plain, r := run(DraftNone, 0)
	assert.Zero(t, r.NDrafted)
	lookup, r := run(DraftLookup, 0)
	assert.Equal(t, plain, lookup)
	assert.Positive(t, r.NDrafted)
	ds := newSession(t, l, m, 512, 0)
	model, r := run(DraftModel, ds)
	assert.Equal(t, plain, model)
	assert.Positive(t, r.NDraftAccepted)
	assert.LessOrEqual(t, r.NDraftAccepted, r.NDrafted)
	t.Logf("model draft: %d drafted, %d accepted", r.NDrafted, r.NDraftAccepted)
}

// Bad draft options are refused before any work, saying why; so is a
// draft model of another vocabulary.
func TestGenerateSpeculativeErrors(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g := greedySampler(t, l)
	s := newSession(t, l, m, 128, 0)
	other := newSession(t, l, m, 128, 0)
	var sm uintptr
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		requireStatus(t, l, OK, l.ModelOpen(shareddata.Model(t, shareddata.SmolLM2), nil, &sm), "open SmolLM2")
	}()
	t.Cleanup(func() { l.ModelFree(sm) })
	smolSession := newSession(t, l, sm, 64, 0)
	for _, c := range []struct {
		name   string
		draft  int32
		tokens int32
		ds     uintptr
		want   string
	}{
		{"mode", 7, 0, 0, "draft is 7"},
		{"tokens", DraftLookup, 65, 0, "draft_tokens is 65"},
		{"negative tokens", DraftLookup, -1, 0, "draft_tokens is -1"},
		{"no session", DraftModel, 0, 0, "draft_session is NULL"},
		{"session without model mode", DraftLookup, 0, other, "not MOONLM_DRAFT_MODEL"},
		{"itself", DraftModel, 0, s, "the generating session itself"},
		{"vocabulary", DraftModel, 0, smolSession, "vocabularies differ"},
	} {
		p, r := genParams(l, 10, nil), newResult()
		p.Draft, p.DraftTokens, p.DraftSession = c.draft, c.tokens, c.ds
		st, msg := generateEx(l, s, g, []int32{info.BOS}, &p, &r)
		assert.Equal(t, InvalidArg, st, c.name)
		assert.Contains(t, msg, c.want, c.name)
		assert.Equal(t, uintptr(0), position(t, l, s), "%s: no work done", c.name)
	}
}

// A caller of the first moonlm_generate_result (ending at n_evaluated)
// still works and gets nothing written past its struct.
func TestGenerateResultV1(t *testing.T) {
	l := lib(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 128, 0)
	p := genParams(l, 5, nil)
	p.Draft = DraftLookup
	r := GenerateResult{Size: unsafe.Offsetof(GenerateResult{}.NDrafted), NDrafted: 77, NDraftAccepted: 78}
	st, msg := generateEx(l, s, greedySampler(t, l), []int32{info.BOS}, &p, &r)
	require.Equal(t, OK, st, msg)
	assert.Equal(t, uintptr(5), r.NGenerated)
	assert.Equal(t, uintptr(77), r.NDrafted, "beyond the caller's size")
	assert.Equal(t, uintptr(78), r.NDraftAccepted)
}

func TestGenerateSpeculativeLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu %zu\n", sizeof(moonlm_generate_params), offsetof(moonlm_generate_params, draft),
	       offsetof(moonlm_generate_params, draft_tokens), offsetof(moonlm_generate_params, draft_session),
	       offsetof(moonlm_generate_result, n_drafted), offsetof(moonlm_generate_result, n_draft_accepted));
	printf("%d %d %d %d %d\n", MOONLM_DRAFT_NONE, MOONLM_DRAFT_LOOKUP, MOONLM_DRAFT_MODEL,
	       MOONLM_DEFAULT_DRAFT_TOKENS, MOONLM_MAX_DRAFT_TOKENS);
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var p GenerateParams
	var r GenerateResult
	want := fmt.Sprintf("%d %d %d %d %d %d\n%d %d %d 8 64\n", unsafe.Sizeof(p), unsafe.Offsetof(p.Draft),
		unsafe.Offsetof(p.DraftTokens), unsafe.Offsetof(p.DraftSession), unsafe.Offsetof(r.NDrafted),
		unsafe.Offsetof(r.NDraftAccepted), DraftNone, DraftLookup, DraftModel)
	assert.Equal(t, want, string(out))
}
