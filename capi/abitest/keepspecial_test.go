package abitest

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const generateKeepSpecial uint32 = 2 // MOONLM_GENERATE_KEEP_SPECIAL

// MOONLM_GENERATE_KEEP_SPECIAL passes a control token (BOS, forced by a
// grammar mid-text) to the callback as its text; without it, as nothing.
func TestGenerateKeepSpecial(t *testing.T) {
	l := grammarFns(t)
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	g, st, msg := newGrammar(t, l, m, `root ::= "Once" <[1]> "up"`)
	require.Equal(t, OK, st, msg)
	for _, keep := range []bool{false, true} {
		s := newSession(t, l, m, 128, 0)
		rec := &genRecorder{}
		var p GenerateParams
		l.GenerateParamsInit(&p, unsafe.Sizeof(p))
		p.MaxTokens = 20
		p.Callback, p.UserData = callback(), register(rec)
		p.Grammar = g
		if keep {
			p.Flags = generateKeepSpecial
		}
		r := newResult()
		runtime.LockOSThread()
		st := l.GenerateEx(s, greedySampler(t, l), &[]int32{info.BOS}[0], 1, &p, &r)
		msg := l.LastError()
		runtime.UnlockOSThread()
		require.Equal(t, OK, st, msg)
		want := "Onceup"
		if keep {
			want = "Once<s>up"
		}
		assert.Equal(t, want, rec.text.String(), "keep %v", keep)
	}
}
