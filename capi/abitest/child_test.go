package abitest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Some checks must run in a child process: a failure there (a crash, a
// SIGBUS, a panic escaping into C) must not take the test binary with it,
// and some need the environment set before the library loads. The child is
// this test binary re-executed with childEnv naming the check.
const childEnv = "MOONLM_ABITEST_CHILD"

var children = map[string]func() error{}

func runChild(name string) int {
	f := children[name]
	if f == nil {
		fmt.Fprintf(os.Stderr, "unknown child check %q\n", name)
		return 2
	}
	if err := f(); err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", name, err)
		return 1
	}
	fmt.Println("child ok")
	return 0
}

// runInChild re-executes the test binary to run child check name with the
// extra environment, failing t if the child fails or dies.
func runInChild(t *testing.T, name string, env ...string) string {
	t.Helper()
	l := lib(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name, "MOONLM_LIBRARY="+l.Path)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child ok") {
		t.Fatalf("child %s failed: %v\n%s", name, err, out)
	}
	return string(out)
}

// childLib loads the library inside a child process.
func childLib() (*Lib, error) {
	var l *Lib
	var skipped string
	ft := &fakeTB{}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errSkip {
				panic(r)
			}
		}()
		l = lib(ft)
	}()
	if l == nil {
		skipped = ft.msg
		return nil, fmt.Errorf("library unavailable: %s", skipped)
	}
	return l, nil
}

type skipSignal struct{}

var errSkip = skipSignal{}

// fakeTB lets lib() run outside a test.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.msg = fmt.Sprint(args...)
	panic(errSkip)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
