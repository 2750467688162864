// Package libbuild reads capi/buildflags, the go build arguments every
// build of the shared library uses (the Makefile and the Python package's
// setup.py read the same file), for the tests that build the library.
package libbuild

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Args returns the arguments capi/buildflags under the module root root
// lists, in order: one a line, blank lines and # comments skipped.
func Args(root string) ([]string, error) {
	path := filepath.Join(root, "capi", "buildflags")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("libbuild: %w", err)
	}
	var args []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("libbuild: %s:%d: %q holds a space: one argument a line", path, n, line)
		}
		args = append(args, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("libbuild: %s: %w", path, err)
	}
	return args, nil
}
