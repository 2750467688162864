// Package shareddata locates the data tests read in place: the shared test
// data (small models, tokenizer vectors, llama.cpp references), in
// $MOONLM_TESTDATA or ../shared/testdata beside the repository, and the
// default real models that scripts/fetch-model.sh fetches (see ModelDirs).
// Tests skip with a clear message where either is absent, so the suite still
// runs without them.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the test data folder, or "" if it cannot be found.
func Root() string {
	if d := os.Getenv("MOONLM_TESTDATA"); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	root := repoRoot()
	if root == "" {
		return ""
	}
	d := filepath.Join(root, "..", "shared", "testdata")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}

// repoRoot returns the folder holding go.mod above the working directory
// (a test's package folder), or "".
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Path returns the path of rel inside the test data folder, skipping the test
// if the folder or the file is absent.
func Path(tb testing.TB, rel string) string {
	tb.Helper()
	root := Root()
	if root == "" {
		tb.Skip("shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata")
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("test data file %s absent: %v", rel, err)
	}
	return p
}
