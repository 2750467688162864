// Package hubtest is a fake Hugging Face Hub for tests: it answers the
// Hub's HTTP API on loopback as the real one does (file lists, resolve
// redirects to a CDN on another host with ETag, X-Linked-Etag,
// X-Linked-Size and X-Repo-Commit, ranges, 401 and 404 with X-Error-Code),
// and can drop a download midway, corrupt it or ignore ranges.
package hubtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server answers like the Hub: /api/models/{repo}/revision/{rev} lists the
// files; HEAD and GET /{repo}/resolve/{rev}/{file} answer an LFS file with a
// redirect to a CDN on another host (X-Linked-Etag = sha256, X-Linked-Size)
// and a small file directly (ETag); private repositories want a token.
type Server struct {
	Hub, CDN *httptest.Server
	Commit   string
	Token    string // the token private repositories accept
	Files    map[string]map[string][]byte
	Private  map[string]bool
	lfs      map[string]bool

	Mu        sync.Mutex // guards the fields below
	Cut       int64      // when > 0, the CDN's next full answer stops after this many bytes
	Corrupt   bool       // the CDN flips a byte of what it sends
	NoRanges  bool       // the CDN ignores Range and sends the whole file
	CDNAuth   []string
	CDNRanges []string
	CDNGets   int
}

// SHA256 is the hex sha256 of b: an LFS file's etag.
func SHA256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// New starts the fake Hub and its CDN on loopback, closed when t ends. Its
// repositories: org/model (model-Q4_K_M.gguf, model-Q8_0.gguf, README.md),
// org/gated (private: wants Token), org/split (two Q4_K_M files).
func New(t testing.TB) *Server {
	rng := rand.New(rand.NewSource(1))
	blob := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	s := &Server{
		Commit: "0123456789abcdef0123456789abcdef01234567",
		Token:  "hf_secret",
		Files: map[string]map[string][]byte{
			"org/model": {
				"model-Q4_K_M.gguf": blob(300_000),
				"model-Q8_0.gguf":   blob(200_000),
				"README.md":         []byte("# a model\n"),
			},
			"org/gated": {"gated-Q4_0.gguf": blob(1000)},
			"org/split": {"a-q4_k_m.gguf": blob(10), "sub/b-Q4_K_M.gguf": blob(10)},
		},
		Private: map[string]bool{"org/gated": true},
		lfs:     map[string]bool{".gguf": true},
	}
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	t.Cleanup(func() { s.Hub.Close(); s.CDN.Close() })
	return s
}

func (s *Server) isLFS(file string) bool { return s.lfs[filepath.Ext(file)] }

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	var repo, rest string
	if strings.HasPrefix(p, "api/models/") {
		parts := strings.SplitN(strings.TrimPrefix(p, "api/models/"), "/", 3)
		if len(parts) < 2 {
			http.NotFound(w, r)
			return
		}
		repo = parts[0] + "/" + parts[1]
		if !s.allowed(w, r, repo) {
			return
		}
		var sib []map[string]string
		for f := range s.Files[repo] {
			sib = append(sib, map[string]string{"rfilename": f})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": repo, "sha": s.Commit, "siblings": sib})
		return
	}
	parts := strings.SplitN(p, "/", 5) // org, name, "resolve", rev, file
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo, rest = parts[0]+"/"+parts[1], parts[4]
	if !s.allowed(w, r, repo) {
		return
	}
	if parts[3] != "main" && parts[3] != s.Commit {
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	data, ok := s.Files[repo][rest]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		w.Header().Set("X-Error-Message", "Entry not found")
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", s.Commit)
	if s.isLFS(rest) {
		w.Header().Set("ETag", `"not-the-sha"`)
		w.Header().Set("X-Linked-Etag", `"`+SHA256(data)+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		w.Header().Set("Location", s.CDN.URL+"/blobs/"+SHA256(data))
		w.WriteHeader(http.StatusFound)
		return
	}
	w.Header().Set("ETag", fmt.Sprintf(`"%040x"`, len(data)))
	http.ServeContent(w, r, rest, time.Time{}, bytes.NewReader(data))
}

// allowed answers 401 for a private repository without the token and 404
// (RepoNotFound, as the Hub does, with 401) for an unknown one.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, repo string) bool {
	if _, ok := s.Files[repo]; !ok {
		w.Header().Set("X-Error-Code", "RepoNotFound")
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	if s.Private[repo] && r.Header.Get("Authorization") != "Bearer "+s.Token {
		w.Header().Set("X-Error-Code", "GatedRepo")
		w.Header().Set("X-Error-Message", "Access to this repo is restricted")
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	return true
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	s.CDNGets++
	s.CDNAuth = append(s.CDNAuth, r.Header.Get("Authorization"))
	s.CDNRanges = append(s.CDNRanges, r.Header.Get("Range"))
	cut, corrupt, noRanges := s.Cut, s.Corrupt, s.NoRanges
	s.Cut = 0
	s.Mu.Unlock()
	want := strings.TrimPrefix(r.URL.Path, "/blobs/")
	for _, files := range s.Files {
		for _, data := range files {
			if SHA256(data) != want {
				continue
			}
			if corrupt {
				data = append([]byte(nil), data...)
				data[len(data)/2] ^= 1
			}
			if noRanges {
				r.Header.Del("Range")
			}
			if cut > 0 && r.Header.Get("Range") == "" {
				// Promise the whole file, send part of it, drop the connection.
				w.Header().Set("Content-Length", fmt.Sprint(len(data)))
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(data[:cut])
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
			return
		}
	}
	http.NotFound(w, r)
}
