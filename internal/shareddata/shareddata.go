// Package shareddata locates the shared test data (real models, tokenizer
// vectors, llama.cpp references) that tests read in place. The folder is
// $MOONLM_TESTDATA, or ../shared/testdata beside the repository; tests skip
// with a clear message where it is absent, so the suite still runs without it.
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
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(dir, "..", "shared", "testdata")
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d
			}
			return ""
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
