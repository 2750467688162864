// Package hub downloads model files from the Hugging Face Hub over its HTTP
// API into the Hub's standard cache layout, so that files fetched here are
// shared with the Hub's own tools and theirs with us:
//
//	<cache>/models--ORG--NAME/blobs/<etag>            the file's bytes
//	<cache>/models--ORG--NAME/snapshots/<commit>/FILE  a relative symlink to the blob
//	<cache>/models--ORG--NAME/refs/<revision>          the commit the revision names
//
// Downloads resume (HTTP Range) from blobs/<etag>.incomplete, and an LFS
// file's bytes are checked against the sha256 the Hub gives as its
// X-Linked-ETag. A download holds the lock the Hub's tools hold
// (flock on <cache>/.locks/models--ORG--NAME/<etag>.lock), so two downloads
// of one file never write it at once. Offline, files are found through refs/
// and snapshots/.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Config says where and how to download. The zero value of each field but
// CacheDir has a usable default; FromEnv fills it from the Hub's variables.
type Config struct {
	Endpoint string       // the Hub's base URL (DefaultEndpoint)
	CacheDir string       // the hub cache folder (HF_HUB_CACHE)
	Token    string       // sent as a Bearer token to the Hub (not to the CDN it redirects to)
	Offline  bool         // use the cache only, never the network
	Revision string       // branch, tag or commit ("main")
	Client   *http.Client // nil: a client with no overall timeout (large files)
	// Progress, when set, is told how a download goes (see NewProgress).
	Progress func(file string, done, total int64)
}

// FromEnv is the configuration the Hub's own tools would use: HF_ENDPOINT,
// HF_HUB_CACHE (else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub), HF_TOKEN (else the token file in HF_HOME) and
// HF_HUB_OFFLINE.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{Endpoint: strings.TrimRight(getenv("HF_ENDPOINT"), "/")}
	home := getenv("HF_HOME")
	if home == "" {
		xdg := getenv("XDG_CACHE_HOME")
		if xdg == "" {
			h := getenv("HOME")
			if h == "" {
				return c, errors.New("hub: cannot place the cache: none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or HOME is set")
			}
			xdg = filepath.Join(h, ".cache")
		}
		home = filepath.Join(xdg, "huggingface")
	}
	c.CacheDir = getenv("HF_HUB_CACHE")
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(home, "hub")
	}
	c.Token = strings.TrimSpace(getenv("HF_TOKEN"))
	if c.Token == "" {
		if b, err := os.ReadFile(filepath.Join(home, "token")); err == nil && len(b) < 4096 {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(strings.TrimSpace(getenv("HF_HUB_OFFLINE"))) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c, nil
}

// Ref names a file to fetch: REPO, REPO:FILE or REPO:QUANT.
type Ref struct {
	Repo  string // "org/name"
	File  string // a path in the repository, or ""
	Quant string // a part of the file name to choose by (case-insensitive), or ""
}

var (
	repoPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$`)
	etagPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// ParseRef reads REPO[:FILE|:QUANT]. What follows the colon is a file when
// it ends in .gguf or holds a slash, else a quantization name (Q4_K_M).
func ParseRef(s string) (Ref, error) {
	repo, rest, hasRest := strings.Cut(s, ":")
	if !repoPattern.MatchString(repo) || strings.Contains(repo, "..") {
		return Ref{}, fmt.Errorf("hub: %q is not a repository name of the form org/name", repo)
	}
	r := Ref{Repo: repo}
	if !hasRest {
		return r, nil
	}
	if rest == "" {
		return Ref{}, fmt.Errorf("hub: %q: nothing after the colon (want REPO:FILE or REPO:QUANT)", s)
	}
	if strings.HasSuffix(strings.ToLower(rest), ".gguf") || strings.Contains(rest, "/") {
		if err := checkFile(rest); err != nil {
			return Ref{}, err
		}
		r.File = rest
	} else {
		r.Quant = rest
	}
	return r, nil
}

// checkFile refuses a file path that could leave the snapshot folder.
func checkFile(f string) error {
	if f == "" || len(f) > 1024 || strings.HasPrefix(f, "/") || strings.Contains(f, "\\") || strings.ContainsRune(f, 0) {
		return fmt.Errorf("hub: %q is not a file path in a repository", f)
	}
	for _, part := range strings.Split(f, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("hub: %q is not a file path in a repository", f)
		}
	}
	return nil
}

// Client downloads with one configuration.
type Client struct {
	cfg Config
	hc  *http.Client
}

// New returns a client for cfg, with its defaults filled in.
func New(cfg Config) (*Client, error) {
	if cfg.CacheDir == "" {
		return nil, errors.New("hub: no cache folder configured")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = DefaultEndpoint
	}
	cfg.Endpoint = strings.TrimRight(cfg.Endpoint, "/")
	if u, err := url.Parse(cfg.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hub: endpoint %q is not an http(s) URL", cfg.Endpoint)
	}
	if cfg.Revision == "" {
		cfg.Revision = "main"
	}
	if strings.Contains(cfg.Revision, "..") || strings.ContainsAny(cfg.Revision, "\\\x00") || len(cfg.Revision) > 256 {
		return nil, fmt.Errorf("hub: %q is not a revision", cfg.Revision)
	}
	hc := cfg.Client
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, hc: hc}, nil
}

// repoDir is the repository's folder in the cache.
func (c *Client) repoDir(repo string) string {
	return filepath.Join(c.cfg.CacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Error is an answer of the Hub that is not a success, with what it said.
type Error struct {
	Status  int
	Code    string // X-Error-Code, e.g. RepoNotFound, EntryNotFound, GatedRepo
	Message string // X-Error-Message
	URL     string
}

func (e *Error) Error() string {
	var hint string
	switch {
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		hint = ": the repository is private or gated, or does not exist; set HF_TOKEN to a token that can read it"
	case e.Status == http.StatusNotFound:
		hint = ": no such repository, file or revision"
	}
	msg := ""
	if e.Message != "" {
		msg = " (" + e.Message + ")"
	}
	return fmt.Sprintf("hub: %s: HTTP %d%s%s", e.URL, e.Status, msg, hint)
}

func httpError(resp *http.Response) error {
	return &Error{
		Status:  resp.StatusCode,
		Code:    resp.Header.Get("X-Error-Code"),
		Message: strings.TrimSpace(limit(resp.Header.Get("X-Error-Message"), 300)),
		URL:     resp.Request.URL.Redacted(),
	}
}

func limit(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// request is a GET or HEAD of the Hub, with the token.
func (c *Client) request(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	req.Header.Set("User-Agent", "moonlm")
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	return req, nil
}

// maxListing bounds the model info the Hub answers (its file list).
const maxListing = 16 << 20

// Files lists the repository's files at the configured revision
// (GET /api/models/{repo}/revision/{revision}).
func (c *Client) Files(ctx context.Context, repo string) ([]string, error) {
	if !repoPattern.MatchString(repo) {
		return nil, fmt.Errorf("hub: %q is not a repository name of the form org/name", repo)
	}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", c.cfg.Endpoint, repo, url.PathEscape(c.cfg.Revision))
	req, err := c.request(ctx, http.MethodGet, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hub: listing %s: %w", repo, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp)
	}
	var info struct {
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+1))
	if err != nil {
		return nil, fmt.Errorf("hub: listing %s: %w", repo, err)
	}
	if len(body) > maxListing {
		return nil, fmt.Errorf("hub: listing %s: the answer is over %d bytes", repo, maxListing)
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("hub: listing %s: %w", repo, err)
	}
	out := make([]string, 0, len(info.Siblings))
	for _, s := range info.Siblings {
		out = append(out, s.Name)
	}
	return out, nil
}

// Choose picks the GGUF file ref means among files: ref.File itself; the
// one whose name contains ref.Quant (case-insensitive); with neither, the
// only GGUF file, else the one that is Q4_K_M. Anything ambiguous is an
// error that lists the candidates.
func Choose(ref Ref, files []string) (string, error) {
	if ref.File != "" {
		for _, f := range files {
			if f == ref.File {
				return f, nil
			}
		}
		return "", fmt.Errorf("hub: %s has no file %s", ref.Repo, ref.File)
	}
	var ggufs []string
	for _, f := range files {
		if strings.HasSuffix(strings.ToLower(f), ".gguf") {
			ggufs = append(ggufs, f)
		}
	}
	sort.Strings(ggufs)
	if len(ggufs) == 0 {
		return "", fmt.Errorf("hub: %s has no .gguf file", ref.Repo)
	}
	pick := func(q string) []string {
		var m []string
		for _, f := range ggufs {
			if strings.Contains(strings.ToLower(path.Base(f)), strings.ToLower(q)) {
				m = append(m, f)
			}
		}
		return m
	}
	var matches []string
	switch {
	case ref.Quant != "":
		matches = pick(ref.Quant)
		if len(matches) == 0 {
			return "", fmt.Errorf("hub: no .gguf file of %s has %q in its name; it has: %s", ref.Repo, ref.Quant, strings.Join(ggufs, ", "))
		}
	case len(ggufs) == 1:
		matches = ggufs
	default:
		matches = pick("Q4_K_M")
		if len(matches) == 0 {
			return "", fmt.Errorf("hub: %s has several .gguf files; name one (REPO:FILE) or a quantization (REPO:Q8_0): %s", ref.Repo, strings.Join(ggufs, ", "))
		}
	}
	if len(matches) > 1 {
		return "", fmt.Errorf("hub: %d files of %s match; name one (REPO:FILE): %s", len(matches), ref.Repo, strings.Join(matches, ", "))
	}
	return matches[0], nil
}
