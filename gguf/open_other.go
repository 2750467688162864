//go:build !unix

package gguf

import (
	"fmt"
	"os"
)

// Open reads the file at path into memory and parses it (platforms without
// mmap support in this package).
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(data)
	if err != nil {
		return nil, pathError(path, err)
	}
	return f, nil
}
