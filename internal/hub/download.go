package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// maxFileSize bounds the size the Hub may announce for one file (1 TiB).
const maxFileSize = 1 << 40

// Fetch returns the local path of the file ref names, downloading it into
// the cache unless it is there already. Offline, or when the Hub cannot be
// reached, a file already in the cache is used.
func (c *Client) Fetch(ctx context.Context, ref Ref) (string, error) {
	if c.cfg.Offline {
		p, err := c.cached(ref)
		if err != nil {
			return "", fmt.Errorf("hub: offline (HF_HUB_OFFLINE): %w", err)
		}
		return p, nil
	}
	p, err := c.fetch(ctx, ref)
	var herr *Error
	if err != nil && !errors.As(err, &herr) && ctx.Err() == nil {
		// The network failed (not the Hub saying no): what the cache has will do.
		if cp, cerr := c.cached(ref); cerr == nil {
			return cp, nil
		}
	}
	return p, err
}

func (c *Client) fetch(ctx context.Context, ref Ref) (string, error) {
	file := ref.File
	if file == "" {
		files, err := c.Files(ctx, ref.Repo)
		if err != nil {
			return "", err
		}
		if file, err = Choose(ref, files); err != nil {
			return "", err
		}
	}
	return c.Download(ctx, ref.Repo, file)
}

// cached finds ref in the cache: the revision's commit from refs/ (or the
// revision itself when it is a commit), then the snapshot's file.
func (c *Client) cached(ref Ref) (string, error) {
	dir := c.repoDir(ref.Repo)
	commit := c.cfg.Revision
	if !commitPattern.MatchString(commit) {
		b, err := os.ReadFile(filepath.Join(dir, "refs", filepath.FromSlash(commit)))
		if err != nil {
			return "", fmt.Errorf("%s (revision %s) is not in the cache %s", ref.Repo, c.cfg.Revision, c.cfg.CacheDir)
		}
		commit = strings.TrimSpace(string(b))
		if !commitPattern.MatchString(commit) {
			return "", fmt.Errorf("the cache's refs/%s of %s holds no commit", c.cfg.Revision, ref.Repo)
		}
	}
	snap := filepath.Join(dir, "snapshots", commit)
	if ref.File != "" {
		p := filepath.Join(snap, filepath.FromSlash(ref.File))
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s of %s is not in the cache %s", ref.File, ref.Repo, c.cfg.CacheDir)
		}
		return p, nil
	}
	var files []string
	err := filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(snap, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("%s is not in the cache %s", ref.Repo, c.cfg.CacheDir)
	}
	f, err := Choose(ref, files)
	if err != nil {
		return "", fmt.Errorf("in the cache: %w", err)
	}
	return filepath.Join(snap, filepath.FromSlash(f)), nil
}

// meta is what the Hub's answer to HEAD .../resolve/... says of a file.
type meta struct {
	commit string // X-Repo-Commit
	etag   string // X-Linked-Etag (LFS: the sha256) or ETag, unquoted
	size   int64  // X-Linked-Size or Content-Length; -1 if not known
	url    string // where the bytes are: the CDN the Hub redirects to, or the resolve URL
}

// resolveURL is /{repo}/resolve/{revision}/{file}.
func (c *Client) resolveURL(repo, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.cfg.Endpoint, repo, url.PathEscape(c.cfg.Revision), strings.Join(parts, "/"))
}

// head asks the Hub for the file's commit, etag and size, following
// redirects on the Hub's own host (a renamed repository) but not the one to
// the CDN, whose address is where the bytes are then fetched.
func (c *Client) head(ctx context.Context, repo, file string) (meta, error) {
	hub, _ := url.Parse(c.cfg.Endpoint)
	u := c.resolveURL(repo, file)
	noFollow := *c.hc
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for hops := 0; ; hops++ {
		req, err := c.request(ctx, http.MethodHead, u)
		if err != nil {
			return meta{}, err
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			return meta{}, fmt.Errorf("hub: %s: %w", file, err)
		}
		resp.Body.Close()
		h := resp.Header
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Request.URL.Parse(h.Get("Location"))
			if err != nil || h.Get("Location") == "" {
				return meta{}, fmt.Errorf("hub: %s: a redirect with no usable Location", file)
			}
			if loc.Host == hub.Host && hops < 5 {
				u = loc.String()
				continue
			}
			m, err := metaOf(file, h, -1)
			m.url = loc.String()
			return m, err
		case resp.StatusCode == http.StatusOK:
			m, err := metaOf(file, h, resp.ContentLength)
			m.url = u
			return m, err
		default:
			return meta{}, httpError(resp)
		}
	}
}

func metaOf(file string, h http.Header, length int64) (meta, error) {
	m := meta{commit: h.Get("X-Repo-Commit"), size: -1}
	if !commitPattern.MatchString(m.commit) {
		return m, fmt.Errorf("hub: %s: the Hub's answer has no commit (X-Repo-Commit %q)", file, limit(m.commit, 80))
	}
	etag := h.Get("X-Linked-Etag")
	if etag == "" {
		etag = h.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if !etagPattern.MatchString(m.etag) {
		return m, fmt.Errorf("hub: %s: the Hub's answer has no usable ETag (%q)", file, limit(etag, 80))
	}
	if s := h.Get("X-Linked-Size"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return m, fmt.Errorf("hub: %s: bad X-Linked-Size %q", file, limit(s, 40))
		}
		m.size = n
	} else if length >= 0 {
		m.size = length
	}
	if m.size > maxFileSize {
		return m, fmt.Errorf("hub: %s: the Hub says it is %d bytes, over the %d this accepts", file, m.size, int64(maxFileSize))
	}
	return m, nil
}

// Download fetches one file of repo into the cache (unless its blob is
// there already) and returns its path in the snapshot folder.
func (c *Client) Download(ctx context.Context, repo, file string) (string, error) {
	if !repoPattern.MatchString(repo) {
		return "", fmt.Errorf("hub: %q is not a repository name of the form org/name", repo)
	}
	if err := checkFile(file); err != nil {
		return "", err
	}
	m, err := c.head(ctx, repo, file)
	if err != nil {
		return "", err
	}
	dir := c.repoDir(repo)
	blob := filepath.Join(dir, "blobs", m.etag)
	pointer := filepath.Join(dir, "snapshots", m.commit, filepath.FromSlash(file))
	if !haveBlob(blob, m.size) {
		unlock, err := c.lockBlob(ctx, repo, m.etag)
		if err != nil {
			return "", err
		}
		// Another download may have finished it while this one waited.
		if !haveBlob(blob, m.size) {
			err = c.downloadBlob(ctx, file, m, blob)
		}
		unlock()
		if err != nil {
			return "", err
		}
	}
	if err := link(blob, pointer); err != nil {
		return "", err
	}
	if c.cfg.Revision != m.commit {
		refs := filepath.Join(dir, "refs", filepath.FromSlash(c.cfg.Revision))
		if err := os.MkdirAll(filepath.Dir(refs), 0o755); err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
		if err := os.WriteFile(refs, []byte(m.commit), 0o644); err != nil {
			return "", fmt.Errorf("hub: %w", err)
		}
	}
	return pointer, nil
}

// haveBlob reports whether the blob is complete (of the size the Hub gave).
func haveBlob(blob string, size int64) bool {
	st, err := os.Stat(blob)
	return err == nil && st.Mode().IsRegular() && (size < 0 || st.Size() == size)
}

// link makes pointer a relative symlink to blob, as the Hub's tools do.
func link(blob, pointer string) error {
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if cur, err := os.Readlink(pointer); err == nil && cur == rel {
		return nil
	}
	// A link under a name of this call's own, renamed over the pointer:
	// concurrent fetches of one file each replace it atomically instead
	// of racing to create it.
	f, err := os.CreateTemp(filepath.Dir(pointer), "."+filepath.Base(pointer)+".*.link")
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	if err := os.Symlink(rel, name); err != nil {
		return fmt.Errorf("hub: linking %s: %w", pointer, err)
	}
	if err := os.Rename(name, pointer); err != nil {
		os.Remove(name)
		return fmt.Errorf("hub: linking %s: %w", pointer, err)
	}
	return nil
}

// downloadBlob fetches the file's bytes into blob, resuming from
// blob.incomplete, and checks an LFS file's sha256 before the rename.
func (c *Client) downloadBlob(ctx context.Context, file string, m meta, blob string) error {
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	defer f.Close()
	var sum hash.Hash
	if len(m.etag) == 64 && isHex(m.etag) { // an LFS file: its etag is its sha256
		sum = sha256.New()
	}
	have, err := hashExisting(f, sum)
	if err != nil {
		return fmt.Errorf("hub: reading %s: %w", part, err)
	}
	if m.size >= 0 && have > m.size {
		if have, err = restart(f, sum); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		done, err := c.get(ctx, file, m, f, sum, have)
		if err == errRestart && attempt == 0 {
			if have, err = restart(f, sum); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		have = done
		break
	}
	if m.size >= 0 && have != m.size {
		return fmt.Errorf("hub: %s: got %d bytes, the Hub said %d", file, have, m.size)
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); got != m.etag {
			_ = os.Remove(part)
			return fmt.Errorf("hub: %s: sha256 %s does not match the Hub's %s: the download is corrupt (removed; try again)", file, got, m.etag)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(part, blob); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// errRestart says the server cannot continue a partial download.
var errRestart = errors.New("hub: the server cannot resume this download")

func hashExisting(f *os.File, sum hash.Hash) (int64, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	if sum == nil {
		return f.Seek(0, io.SeekEnd)
	}
	return io.Copy(sum, f)
}

func restart(f *os.File, sum hash.Hash) (int64, error) {
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if sum != nil {
		sum.Reset()
	}
	return 0, nil
}

// get appends the bytes from offset have on to f (and sum), returning how
// many f then holds.
func (c *Client) get(ctx context.Context, file string, m meta, f *os.File, sum hash.Hash, have int64) (int64, error) {
	if m.size >= 0 && have == m.size {
		return have, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return have, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("User-Agent", "moonlm")
	hub, _ := url.Parse(c.cfg.Endpoint)
	if c.cfg.Token != "" && req.URL.Host == hub.Host { // the token is for the Hub, not the CDN
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return have, fmt.Errorf("hub: downloading %s: %w (run again to resume)", file, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		var start int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-", &start); err != nil || start != have {
			return have, errRestart
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // the whole file again: start over
			if have, err = restart(f, sum); err != nil {
				return have, err
			}
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return have, errRestart
	default:
		return have, httpError(resp)
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return have, fmt.Errorf("hub: %w", err)
	}
	w := io.Writer(f)
	if sum != nil {
		w = io.MultiWriter(f, sum)
	}
	buf := make([]byte, 1<<20)
	var last time.Time
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if m.size >= 0 && have+int64(n) > m.size {
				return have, fmt.Errorf("hub: %s: the server sent more than the %d bytes the Hub said", file, m.size)
			}
			if _, err := w.Write(buf[:n]); err != nil {
				return have, fmt.Errorf("hub: writing %s: %w", f.Name(), err)
			}
			have += int64(n)
			if c.cfg.Progress != nil && time.Since(last) >= 100*time.Millisecond {
				c.cfg.Progress(file, have, m.size)
				last = time.Now()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return have, fmt.Errorf("hub: downloading %s: %w (run again to resume)", file, rerr)
		}
	}
	if c.cfg.Progress != nil {
		c.cfg.Progress(file, have, m.size)
	}
	return have, nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
