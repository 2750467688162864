package abitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/internal/libbuild"
)

const nestedEnv = "MOONLM_ABITEST_NESTED"

// When the tests run against a given library ($MOONLM_LIBRARY, a release
// build), this re-runs the ones that pass pointers and callbacks across the
// boundary against a build of the same sources under GOEXPERIMENT=cgocheck2,
// which aborts on any Go pointer handed to C improperly. (Without
// $MOONLM_LIBRARY every test already uses such a build.)
func TestUnderCgocheck2(t *testing.T) {
	if os.Getenv(nestedEnv) != "" {
		t.Skip("nested run")
	}
	if os.Getenv("MOONLM_LIBRARY") == "" {
		t.Skip("the tests already ran against a GOEXPERIMENT=cgocheck2 build")
	}
	if testing.Short() {
		t.Skip("builds the library again: skipped in -short mode")
	}
	lib(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "libmoonlm.so")
	flags, err := libbuild.Args(root)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"build", "-buildmode=c-shared"}, flags...),
		"-ldflags=-extldflags=-Wl,-soname,libmoonlm.so.0,--version-script="+filepath.Join(root, "capi", "moonlm.map"),
		"-o", out, "./capi")
	build := exec.Command(filepath.Join(goroot(), "bin", "go"), args...)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOEXPERIMENT=cgocheck2")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building under cgocheck2: %v\n%s", err, b)
	}
	tests := []string{"TestBadHandles", "TestParamsSize", "TestModelInfoAndText", "TestTokenizeProtocol",
		"TestSessionErrors", "TestSampler", "TestGenerateGolden", "TestGenerateUTF8Boundaries", "TestChatTemplate",
		"TestBusyConcurrent", "TestCancelConcurrent", "TestModelFreeWithLiveSession"}
	run := exec.Command(os.Args[0], "-test.run=^("+strings.Join(tests, "|")+")$", "-test.count=1")
	run.Env = append(os.Environ(), "MOONLM_LIBRARY="+out, nestedEnv+"=1")
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("tests against the cgocheck2 build failed: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "PASS") {
		t.Fatalf("unexpected output:\n%s", b)
	}
}
