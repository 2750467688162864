//go:build js && wasm

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine"
)

// TestOpenFromPath runs the engine's file paths without mmap (mem_other.go:
// files are read into the heap) under Node, which gives js/wasm a file
// system: stories260K must give its golden greedy text, and a saved
// session state must load back.
func TestOpenFromPath(t *testing.T) {
	dir := os.Getenv("MOONLM_TESTDATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "testdata")
	}
	path := filepath.Join(dir, "models", "stories260K.gguf")
	golden, err := os.ReadFile(filepath.Join(dir, "models", "stories260K.golden.txt"))
	if err != nil {
		t.Skipf("shared test data absent (MOONLM_TESTDATA): %v", err)
	}
	m, err := engine.Open(path, engine.ModelParams{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(engine.SessionParams{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	var text []byte
	res, err := s.Generate([]int32{m.Info().BOS}, engine.GenerateParams{MaxTokens: 100}, func(b []byte, _ int32) bool {
		text = append(text, b...)
		return true
	})
	if err != nil || res.Tokens != 100 {
		t.Fatalf("generate: %d tokens, %v", res.Tokens, err)
	}
	got := strings.TrimPrefix(string(text), " ")
	if len(got) < 200 || !strings.HasPrefix(string(golden), got) {
		t.Errorf("greedy text %q is not the start of the golden text", got)
	}
	// A saved state read back (LoadStateFile maps the file on unix, reads
	// it here) restores the position.
	state := filepath.Join(t.TempDir(), "s.state")
	if err := s.SaveStateFile(state); err != nil {
		t.Fatal(err)
	}
	s2, err := m.NewSession(engine.SessionParams{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.LoadStateFile(state); err != nil {
		t.Fatal(err)
	}
	if s2.Pos() != s.Pos() || s2.Pos() == 0 {
		t.Errorf("loaded state at position %d, saved at %d", s2.Pos(), s.Pos())
	}
	s2.Close()
	s.Close()
	if err := m.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := engine.Open(filepath.Join(dir, "models"), engine.ModelParams{}); err == nil {
		t.Error("opening a directory succeeded")
	}
}
