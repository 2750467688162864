//go:build unix

package hub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockBlob takes the lock the Hub's own tools take before downloading a
// blob (flock on <cache>/.locks/models--ORG--NAME/<etag>.lock), so that two
// downloads of one file, ours or theirs, never write it at once. It waits
// for the lock until ctx ends; unlock releases it.
func (c *Client) lockBlob(ctx context.Context, repo, etag string) (unlock func(), err error) {
	p := filepath.Join(c.cfg.CacheDir, ".locks", filepath.Base(c.repoDir(repo)), etag+".lock")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("hub: locking %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("hub: waiting for another download of the same file (%s): %w", p, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
