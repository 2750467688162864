package abitest

import (
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	toolGrammarExOnce sync.Once
	toolGrammarEx     func(m uintptr, tmpl, tools, name *byte, flags uint32, out *uintptr) int32
)

const toolCallsParallel uint32 = 1 // MOONLM_TOOL_CALLS_PARALLEL

// newToolGrammarEx calls moonlm_grammar_for_tool_calls_ex ("\x00" for NULL).
func newToolGrammarEx(t testing.TB, l *Lib, m uintptr, tmpl, tools, name string, flags uint32) (uintptr, int32, string) {
	toolGrammarExOnce.Do(func() { registerLibFunc(l, &toolGrammarEx, "moonlm_grammar_for_tool_calls_ex") })
	return grammarCall(t, l, func(out *uintptr) int32 {
		return toolGrammarEx(m, cstrOrNil(tmpl), cstrOrNil(tools), cstrOrNil(name), flags, out)
	})
}

// registerLibFunc binds fptr to the library's function name.
func registerLibFunc(l *Lib, fptr any, name string) {
	h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		panic(err)
	}
	purego.RegisterLibFunc(fptr, h, name)
}

// grammarCall runs a call making a grammar on a locked thread; the
// grammar, if made, is freed at cleanup.
func grammarCall(t testing.TB, l *Lib, call func(out *uintptr) int32) (uintptr, int32, string) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var g uintptr
	st := call(&g)
	msg := l.LastError()
	if st == OK {
		t.Cleanup(func() { grammarFree(g) })
	}
	return g, st, msg
}

// With MOONLM_TOOL_CALLS_PARALLEL a reply may hold several Hermes calls
// (the end-of-generation token favoured so replies end); each is a call
// of a listed function; unknown flags are refused.
func TestGrammarForToolCallsParallel(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g, st, msg := newToolGrammarEx(t, l, m, "chatml", abiTools, "\x00", toolCallsParallel)
	require.Equal(t, OK, st, msg)
	complete, multi := 0, 0
	for seed := uint64(1); seed <= 6; seed++ {
		p := defaultSamplerParams(l)
		p.Temperature, p.TopK, p.TopP, p.MinP, p.Seed = 1.5, 0, 1, 0, seed
		bias := []LogitBias{{Token: info.EOS, Bias: 14}}
		p.LogitBias, p.NLogitBias = &bias[0], 1
		smp, st, msg := newSamplerP(t, l, &p)
		require.Equal(t, OK, st, msg)
		s := newSession(t, l, m, 1024, 0)
		r, rec, st, msg := generateWithGrammar(t, l, s, smp, g, []int32{info.BOS}, 500, nil)
		require.Equal(t, OK, st, msg)
		if r.FinishReason == FinishLength {
			continue
		}
		complete++
		blocks := strings.Split(rec.text.String(), "<tool_call>\n")
		require.Empty(t, blocks[0])
		if len(blocks) > 2 {
			multi++
		}
		for _, b := range blocks[1:] {
			body := strings.TrimSuffix(strings.TrimSuffix(b, "\n"), "\n</tool_call>")
			var call struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &call), "%q", b)
			assert.Contains(t, []string{"get_weather", "now"}, call.Name)
		}
	}
	assert.Positive(t, complete)
	assert.Positive(t, multi, "some replies make several calls")

	_, st, msg = newToolGrammarEx(t, l, m, "chatml", abiTools, "\x00", 6)
	assert.Equal(t, InvalidArg, st)
	assert.Contains(t, msg, "moonlm_grammar_for_tool_calls_ex: flags has unknown bits 0x6")
}
