package abitest

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// sessionError reads moonlm_session_last_error with an ample buffer.
func sessionError(t testing.TB, l *Lib, s uintptr) string {
	t.Helper()
	buf := make([]byte, 8192)
	var n uintptr
	requireStatus(t, l, OK, l.SessionErr(s, &buf[0], uintptr(len(buf)), &n), "session_last_error")
	require.Less(t, int(n), len(buf))
	require.Equal(t, byte(0), buf[n], "NUL terminator")
	return string(buf[:n])
}

// onThread runs f on a goroutine locked to its own OS thread and returns
// that thread's id. The thread stays locked (so distinct from any other
// thread locked at the time) until f returns.
func onThread(f func()) int {
	tid := make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer func() { tid <- unix.Gettid() }()
		f()
	}()
	return <-tid
}

// A failed session call's message is readable from another OS thread
// through moonlm_session_last_error (what Node's async calls need), with
// the (buf, cap, n_out) protocol, and a success clears it.
func TestSessionLastErrorAcrossThreads(t *testing.T) {
	l := lib(t)
	// This goroutine's calls and its reads of moonlm_last_error must share
	// a thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := openModel(t, l, stories)
	info := modelInfo(t, l, m)
	s := newSession(t, l, m, 16, 0)

	require.Equal(t, "", sessionError(t, l, s), "a new session has no error")

	// Fail a decode on one thread, keeping it locked while another thread
	// reads the session's message, so the two are surely different threads.
	var failMsg, readMsg, readerThreadErr string
	var failTid, readTid int
	failTid = onThread(func() {
		requireStatus(t, l, InvalidArg, l.Decode(s, info.NVocab, nil, 0), "decode of an out-of-range token")
		failMsg = l.LastError()
		readTid = onThread(func() {
			readMsg = sessionError(t, l, s)
			readerThreadErr = l.LastError()
		})
	})
	require.NotEqual(t, failTid, readTid, "the reader ran on another OS thread")
	require.Contains(t, failMsg, "moonlm_decode")
	require.Contains(t, failMsg, "outside the vocabulary")
	assert.Equal(t, failMsg, readMsg, "the session carries the failing thread's message")
	assert.Equal(t, "", readerThreadErr, "a successful moonlm_session_last_error leaves \"\" on its thread")

	// The buffer protocol: size query, a cap one short, then exact.
	var n uintptr
	requireStatus(t, l, BufferTooSmall, l.SessionErr(s, nil, 0, &n), "size query")
	require.Equal(t, uintptr(len(failMsg)), n)
	assert.Contains(t, l.LastError(), "moonlm_session_last_error")
	short := bytes.Repeat([]byte{0xAA}, len(failMsg))
	n = 0
	requireStatus(t, l, BufferTooSmall, l.SessionErr(s, &short[0], uintptr(len(short)), &n), "cap = length (no room for NUL)")
	assert.Equal(t, uintptr(len(failMsg)), n)
	assert.Equal(t, bytes.Repeat([]byte{0xAA}, len(failMsg)), short, "nothing written on BUFFER_TOO_SMALL")
	exact := make([]byte, len(failMsg)+1)
	requireStatus(t, l, OK, l.SessionErr(s, &exact[0], uintptr(len(exact)), &n), "exact cap")
	assert.Equal(t, failMsg, string(exact[:n]))
	assert.Equal(t, byte(0), exact[n])
	requireStatus(t, l, InvalidArg, l.SessionErr(s, nil, 5, &n), "NULL buf with cap 5")
	assert.Equal(t, failMsg, sessionError(t, l, s), "failures of moonlm_session_last_error itself do not replace the message")

	// A cancelled prefill on yet another thread, then a success clears it.
	toks := []int32{info.BOS, 403, 407}
	onThread(func() {
		requireStatus(t, l, OK, l.Cancel(s), "cancel")
		requireStatus(t, l, Cancelled, l.Prefill(s, &toks[0], uintptr(len(toks)), nil, 0), "cancelled prefill")
		failMsg = l.LastError()
	})
	require.Contains(t, failMsg, "moonlm_prefill")
	require.Contains(t, failMsg, "cancel")
	assert.Equal(t, failMsg, sessionError(t, l, s))
	requireStatus(t, l, OK, l.Cancel(s), "cancel again")
	assert.Equal(t, failMsg, sessionError(t, l, s), "moonlm_session_cancel leaves the message")
	requireStatus(t, l, Cancelled, l.Prefill(s, &toks[0], uintptr(len(toks)), nil, 0), "consume the request")
	requireStatus(t, l, OK, l.Prefill(s, &toks[0], uintptr(len(toks)), nil, 0), "prefill")
	n = 99
	requireStatus(t, l, BufferTooSmall, l.SessionErr(s, nil, 0, &n), "\"\" still needs room for its NUL")
	assert.Equal(t, uintptr(0), n)
	assert.Equal(t, "", sessionError(t, l, s), "a success clears the message")

	// Rewind and position record their failures too.
	requireStatus(t, l, InvalidArg, l.Rewind(s, 99), "rewind beyond the position")
	assert.Equal(t, l.LastError(), sessionError(t, l, s))
	assert.Contains(t, sessionError(t, l, s), "moonlm_session_rewind")
	requireStatus(t, l, InvalidArg, l.Position(s, nil), "position into NULL")
	assert.Contains(t, sessionError(t, l, s), "moonlm_session_position")
	assert.Equal(t, uintptr(len(toks)), position(t, l, s))
	assert.Equal(t, "", sessionError(t, l, s))

	// Not a live session: INVALID_ARGUMENT on the calling thread.
	requireStatus(t, l, InvalidArg, l.SessionErr(0, &exact[0], uintptr(len(exact)), &n), "NULL session")
	requireStatus(t, l, InvalidArg, l.SessionErr(m, &exact[0], uintptr(len(exact)), &n), "a model handle")
	assert.Contains(t, l.LastError(), "not a session")
	s2 := newSession(t, l, m, 8, 0)
	requireStatus(t, l, OK, l.SessionFree(s2), "free")
	requireStatus(t, l, InvalidArg, l.SessionErr(s2, &exact[0], uintptr(len(exact)), &n), "a freed session")
}

func init() {
	children["sessionpanic"] = func() error {
		l, err := childLib()
		if err != nil {
			return err
		}
		runtime.LockOSThread()
		path := os.Getenv("MOONLM_ABITEST_MODEL")
		var m, s uintptr
		if st := l.ModelOpen(path, nil, &m); st != OK {
			return errorf("open %s: %s", path, l.LastError())
		}
		if st := l.SessionNew(m, nil, &s); st != OK {
			return errorf("session: %s", l.LastError())
		}
		st := l.Decode(s, 1, nil, 0)
		msg := l.LastError()
		if st != Internal {
			return errorf("decode under MOONLM_DEBUG_PANIC=moonlm_decode: status %d (%s), want INTERNAL; %s", st, l.StatusString(st), msg)
		}
		buf := make([]byte, 8192)
		var n uintptr
		if st := l.SessionErr(s, &buf[0], uintptr(len(buf)), &n); st != OK {
			return errorf("session_last_error: %s", l.LastError())
		}
		if got := string(buf[:n]); got != msg || !strings.Contains(got, "panic") {
			return errorf("session message %q, want the thread's %q", got, msg)
		}
		// The panic did not leave the session marked busy.
		toks := []int32{1, 100}
		if st := l.Prefill(s, &toks[0], 2, nil, 0); st != OK {
			return errorf("prefill after the panic: status %d: %s", st, l.LastError())
		}
		if st := l.SessionErr(s, &buf[0], uintptr(len(buf)), &n); st != OK || n != 0 {
			return errorf("session message after a success: status %d, %q", st, buf[:n])
		}
		l.SessionFree(s)
		l.ModelFree(m)
		return nil
	}
}

// A panic inside a session call becomes MOONLM_INTERNAL whose message is
// kept on the session too, and the session is released for the next call.
func TestSessionPanicKeepsMessage(t *testing.T) {
	l := lib(t)
	_ = openModel(t, l, stories)
	runInChild(t, "sessionpanic", "MOONLM_DEBUG_PANIC=moonlm_decode", "MOONLM_ABITEST_MODEL="+shareddata.Path(t, stories))
}
