package hub

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moonlm/moonlm/internal/hub/hubtest"
	"github.com/stretchr/testify/require"
)

func client(t *testing.T, h *hubtest.Server, mod ...func(*Config)) (*Client, Config) {
	cfg := Config{Endpoint: h.Hub.URL, CacheDir: filepath.Join(t.TempDir(), "hub")}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return c, cfg
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"org/name":                     {Repo: "org/name"},
		"org/name:Q4_K_M":              {Repo: "org/name", Quant: "Q4_K_M"},
		"org/name:q8_0":                {Repo: "org/name", Quant: "q8_0"},
		"org/name:model-Q4_K_M.gguf":   {Repo: "org/name", File: "model-Q4_K_M.gguf"},
		"org/name:sub/dir/model.GGUF":  {Repo: "org/name", File: "sub/dir/model.GGUF"},
		"unsloth/gemma-3-270m-it-GGUF": {Repo: "unsloth/gemma-3-270m-it-GGUF"},
	} {
		got, err := ParseRef(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "name", "org/", "/name", "org/name/x", "org/..", "org/name:", "org/name:../x.gguf",
		"org/name:/etc/x.gguf", "org/name:a//b.gguf", "org/name:a\\b.gguf"} {
		_, err := ParseRef(bad)
		require.Error(t, err, bad)
	}
}

func TestChoose(t *testing.T) {
	files := []string{"README.md", "m-Q4_K_M.gguf", "m-Q8_0.gguf", "m-Q4_K_S.gguf"}
	pick := func(r Ref, fs []string) (string, error) { return Choose(r, fs) }
	got, err := pick(Ref{Repo: "o/m", Quant: "q8_0"}, files)
	require.NoError(t, err)
	require.Equal(t, "m-Q8_0.gguf", got)
	got, err = pick(Ref{Repo: "o/m"}, files) // several: Q4_K_M by default
	require.NoError(t, err)
	require.Equal(t, "m-Q4_K_M.gguf", got)
	got, err = pick(Ref{Repo: "o/m"}, []string{"x.txt", "only.gguf"})
	require.NoError(t, err)
	require.Equal(t, "only.gguf", got)
	_, err = pick(Ref{Repo: "o/m", Quant: "Q4_K"}, files)
	require.ErrorContains(t, err, "m-Q4_K_M.gguf, m-Q4_K_S.gguf")
	_, err = pick(Ref{Repo: "o/m", Quant: "IQ2"}, files)
	require.ErrorContains(t, err, "no .gguf file of o/m has \"IQ2\"")
	_, err = pick(Ref{Repo: "o/m"}, []string{"a-Q8_0.gguf", "b-F16.gguf"})
	require.ErrorContains(t, err, "several .gguf files")
	_, err = pick(Ref{Repo: "o/m", File: "nope.gguf"}, files)
	require.ErrorContains(t, err, "has no file nope.gguf")
	_, err = pick(Ref{Repo: "o/m"}, []string{"README.md"})
	require.ErrorContains(t, err, "no .gguf file")
}

func TestFetchIntoTheHubCacheLayout(t *testing.T) {
	h := hubtest.New(t)
	c, cfg := client(t, h, func(c *Config) { c.Token = "hf_secret" })
	ctx := context.Background()
	data := h.Files["org/model"]["model-Q4_K_M.gguf"]

	p, err := c.Fetch(ctx, Ref{Repo: "org/model", Quant: "q4_k_m"})
	require.NoError(t, err)
	repo := filepath.Join(cfg.CacheDir, "models--org--model")
	require.Equal(t, filepath.Join(repo, "snapshots", h.Commit, "model-Q4_K_M.gguf"), p)
	target, err := os.Readlink(p)
	require.NoError(t, err)
	require.Equal(t, filepath.Join("..", "..", "blobs", hubtest.SHA256(data)), target, "a relative link to the blob")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, data, got)
	ref, err := os.ReadFile(filepath.Join(repo, "refs", "main"))
	require.NoError(t, err)
	require.Equal(t, h.Commit, string(ref))
	_, err = os.Stat(filepath.Join(repo, "blobs", hubtest.SHA256(data)+".incomplete"))
	require.True(t, os.IsNotExist(err), "no .incomplete file left")
	require.Equal(t, []string{""}, h.CDNAuth, "the token went to the CDN")

	// Again: the blob is there, nothing is downloaded.
	p2, err := c.Fetch(ctx, Ref{Repo: "org/model", File: "model-Q4_K_M.gguf"})
	require.NoError(t, err)
	require.Equal(t, p, p2)
	require.Equal(t, 1, h.CDNGets)

	// A small (non-LFS) file comes from the Hub itself, named by its ETag.
	readme, err := c.Fetch(ctx, Ref{Repo: "org/model", File: "README.md"})
	require.NoError(t, err)
	b, err := os.ReadFile(readme)
	require.NoError(t, err)
	require.Equal(t, "# a model\n", string(b))
	_, err = os.Stat(filepath.Join(repo, "blobs", fmt.Sprintf("%040x", len(b))))
	require.NoError(t, err)
}

func TestFetchResumesWithRange(t *testing.T) {
	h := hubtest.New(t)
	c, cfg := client(t, h)
	data := h.Files["org/model"]["model-Q8_0.gguf"]
	h.Cut = 70_000
	_, err := c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q8_0"})
	require.Error(t, err, "the connection dropped mid-file")
	part := filepath.Join(cfg.CacheDir, "models--org--model", "blobs", hubtest.SHA256(data)+".incomplete")
	st, err := os.Stat(part)
	require.NoError(t, err)
	require.Equal(t, int64(70_000), st.Size())

	p, err := c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q8_0"})
	require.NoError(t, err)
	require.Equal(t, []string{"", "bytes=70000-"}, h.CDNRanges, "the second download asks for the rest only")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestFetchRestartsWhenTheServerIgnoresRange(t *testing.T) {
	h := hubtest.New(t)
	c, _ := client(t, h)
	data := h.Files["org/model"]["model-Q8_0.gguf"]
	h.Cut = 50_000
	_, err := c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q8_0"})
	require.Error(t, err)
	h.NoRanges = true
	p, err := c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q8_0"})
	require.NoError(t, err)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

func TestConcurrentFetchesDownloadOnce(t *testing.T) {
	h := hubtest.New(t)
	c, _ := client(t, h)
	data := h.Files["org/model"]["model-Q4_K_M.gguf"]
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q4_K_M"})
		}()
	}
	wg.Wait()
	for i := range paths {
		require.NoError(t, errs[i])
		require.Equal(t, paths[0], paths[i])
	}
	got, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	require.Equal(t, data, got)
	h.Mu.Lock()
	defer h.Mu.Unlock()
	require.Equal(t, 1, h.CDNGets, "one download; the others waited for its lock and found the blob")
}

func TestFetchRefusesBytesThatFailSha256(t *testing.T) {
	h := hubtest.New(t)
	c, cfg := client(t, h)
	h.Corrupt = true
	_, err := c.Fetch(context.Background(), Ref{Repo: "org/model", Quant: "Q8_0"})
	require.ErrorContains(t, err, "sha256")
	blobs := filepath.Join(cfg.CacheDir, "models--org--model", "blobs")
	entries, _ := os.ReadDir(blobs)
	require.Empty(t, entries, "a corrupt download is neither kept nor resumed")
	_, err = os.Stat(filepath.Join(cfg.CacheDir, "models--org--model", "snapshots"))
	require.True(t, os.IsNotExist(err))
}

func TestFetchErrorsFromTheHub(t *testing.T) {
	h := hubtest.New(t)
	c, _ := client(t, h)
	ctx := context.Background()
	_, err := c.Fetch(ctx, Ref{Repo: "org/gated", Quant: "Q4_0"})
	require.ErrorContains(t, err, "HTTP 401")
	require.ErrorContains(t, err, "HF_TOKEN")
	require.ErrorContains(t, err, "restricted")
	_, err = c.Fetch(ctx, Ref{Repo: "org/nothing"})
	require.ErrorContains(t, err, "HTTP 401")
	_, err = c.Fetch(ctx, Ref{Repo: "org/model", File: "missing.gguf"})
	require.ErrorContains(t, err, "HTTP 404")
	require.ErrorContains(t, err, "no such repository, file or revision")
	_, err = c.Fetch(ctx, Ref{Repo: "org/split", Quant: "Q4_K_M"})
	require.ErrorContains(t, err, "2 files of org/split match")

	ct, _ := client(t, h, func(c *Config) { c.Token = h.Token })
	p, err := ct.Fetch(ctx, Ref{Repo: "org/gated", Quant: "Q4_0"})
	require.NoError(t, err)
	require.FileExists(t, p)
}

func TestFetchUsesTheCacheOffline(t *testing.T) {
	h := hubtest.New(t)
	c, cfg := client(t, h)
	ctx := context.Background()
	p, err := c.Fetch(ctx, Ref{Repo: "org/model", Quant: "Q8_0"})
	require.NoError(t, err)
	h.Hub.Close()
	h.CDN.Close()

	off := cfg
	off.Offline = true
	co, err := New(off)
	require.NoError(t, err)
	for _, ref := range []Ref{{Repo: "org/model", Quant: "q8_0"}, {Repo: "org/model", File: "model-Q8_0.gguf"}} {
		got, err := co.Fetch(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, p, got)
	}
	_, err = co.Fetch(ctx, Ref{Repo: "org/model", Quant: "Q4_K_M"})
	require.ErrorContains(t, err, "offline")
	_, err = co.Fetch(ctx, Ref{Repo: "org/other"})
	require.ErrorContains(t, err, "not in the cache")

	// Online but the Hub unreachable: the cached file still serves.
	got, err := c.Fetch(ctx, Ref{Repo: "org/model", Quant: "Q8_0"})
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = c.Fetch(ctx, Ref{Repo: "org/model", Quant: "Q4_K_M"})
	require.Error(t, err)
}

func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := FromEnv(env(map[string]string{"HOME": home}))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, ".cache", "huggingface", "hub"), c.CacheDir)
	require.False(t, c.Offline)
	require.Empty(t, c.Token)

	hf := filepath.Join(home, "hf")
	require.NoError(t, os.MkdirAll(hf, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hf, "token"), []byte("hf_fromfile\n"), 0o600))
	c, err = FromEnv(env(map[string]string{"HOME": home, "HF_HOME": hf, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9/"}))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(hf, "hub"), c.CacheDir)
	require.Equal(t, "hf_fromfile", c.Token)
	require.True(t, c.Offline)
	require.Equal(t, "http://127.0.0.1:9", c.Endpoint)

	c, err = FromEnv(env(map[string]string{"HF_HOME": hf, "HF_HUB_CACHE": "/x/cache", "HF_TOKEN": "hf_env"}))
	require.NoError(t, err)
	require.Equal(t, "/x/cache", c.CacheDir)
	require.Equal(t, "hf_env", c.Token)

	_, err = FromEnv(env(nil))
	require.Error(t, err)
}

func TestProgress(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	var plain, tty bytes.Buffer
	for _, pr := range []*progress{{w: &plain}, {w: &tty, tty: true}} {
		now = start
		pr.now = func() time.Time { return now }
		pr.report("m.gguf", 0, 100<<20)
		for i := int64(1); i <= 10; i++ {
			now = now.Add(time.Second)
			pr.report("m.gguf", i*10<<20, 100<<20)
		}
	}
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	// At the start, 5 s later, and at the end; never a carriage return.
	require.Len(t, lines, 3, plain.String())
	require.NotContains(t, plain.String(), "\r")
	require.Equal(t, "m.gguf  50.0 MiB / 100.0 MiB   50%  10.0 MiB/s  ETA 0:05", lines[1])
	require.Equal(t, "m.gguf  100.0 MiB / 100.0 MiB  100%  10.0 MiB/s  done in 0:10", lines[2])
	// On a terminal: one line redrawn each time, ended once.
	require.Equal(t, 11, strings.Count(tty.String(), "\r\x1b[K"))
	require.Equal(t, 1, strings.Count(tty.String(), "\n"))
	require.Equal(t, "1.5 GiB", Bytes(3<<29))
	require.Equal(t, "1:01:01", clock(3661*time.Second))
}
