//go:build !linux

package engine

import (
	"errors"
	"runtime"
)

var errNoRemap = errors.New("replacing mapped pages needs mremap, which " + runtime.GOOS + " lacks")

func replacePages(dst, src []byte) error { return errNoRemap }
func anonPages(n int) ([]byte, error)    { return nil, errNoRemap }
func freeAnonPages(b []byte)             {}
